"""DeepWork's generations as strategies of the one engine (see ``base``)."""

from __future__ import annotations

from workflows.generations.base import Conversation, Generation
from workflows.generations.v0_9 import FIRST
from workflows.generations.v0_14 import LATER


def generation_for(conversation: Conversation | None) -> Generation:
    """The generation of a call: a stack named by a conversation is the later one's."""
    return FIRST if conversation is None else LATER


def generation_of_session(name: str) -> Generation:
    """The generation a stored session runs (``WorkflowSession.generation``)."""
    return LATER if name == LATER.name else FIRST


__all__ = ["Conversation", "Generation", "generation_for", "generation_of_session"]
