"""DeepWork's generations as strategies of the one engine (see ``base``)."""

from __future__ import annotations

from workflows.generations.base import Conversation, Generation

# The generations themselves read the database, so they are imported where they are chosen:
# the tool modules that name a ``Conversation`` are imported before Django's app registry is
# ready (``mcpserve`` lists its tools first).


def generation_for(conversation: Conversation | None) -> Generation:
    """The generation of a call: a stack named by a conversation is the later one's."""
    from workflows.generations.v0_9 import FIRST
    from workflows.generations.v0_14 import LATER

    return FIRST if conversation is None else LATER


def generation_of_session(name: str) -> Generation:
    """The generation a stored session runs (``WorkflowSession.generation``)."""
    from workflows.generations.v0_9 import FIRST
    from workflows.generations.v0_14 import LATER

    return LATER if name == LATER.name else FIRST


__all__ = ["Conversation", "Generation", "generation_for", "generation_of_session"]
