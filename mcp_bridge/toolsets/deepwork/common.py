"""What the DeepWork toolsets of both generations share: the parameter declarations of the
0.14 and the union tools, the one database call with DeepWork's error wording, and how a
caller's ``session_id`` maps to the conversation that names its stack.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NoReturn, TypeVar

from fastmcp.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from mcp_bridge.state import ServerState
from mcp_bridge.toolsets import hints
from mcp_bridge.toolsets.calls import Refusal, db_tool_call, refusal_error

T = TypeVar("T")

# The workflow tools' hints, the same in every generation.
LIST_HINTS = hints.reads("List workflows")
START_HINTS = hints.writes("Start a workflow")
ABORT_HINTS = hints.writes("Abort a workflow", destructive=True)
# Going back discards the progress after the step; going back there again discards no more.
GO_TO_STEP_HINTS = hints.writes("Go back to a step", destructive=True, idempotent=True)


def finish_hints(*, open_world: bool) -> ToolAnnotations:
    """``finished_step``'s hints; ``open_world`` when a hand-in may run a program (a reviewer
    the server runs, a review rule's precompute command)."""
    return hints.writes("Hand in a step", open_world=open_world)


def fail(tool: str, message: object) -> ToolError:
    # DeepWork's clients see this exact prefix on every tool error.
    return refusal_error(f"Error calling tool '{tool}': {message}")


async def call(
    state: ServerState,
    name: str,
    params: dict[str, Any],
    fn: Callable[[], T],
    *,
    stack: Callable[[T], Any] | None = None,
) -> T:
    """``fn`` through the one database-call path; a refusal is DeepWork's tool error.
    ``stack`` reads the caller's stack from the answer for the call log."""

    def refused(refusal: Refusal) -> NoReturn:
        raise fail(name, refusal.error if refusal.error is not None else refusal.message)

    return await db_tool_call(state, name, params, fn, refused=refused, stack=stack)


def platform(state: ServerState) -> str:
    return state.platform or "claude"


# Conversations this server process started 0.14 workflows for, for the mixed-stack check.
_conversations: dict[str, set[str]] = {}


def started_here(state: ServerState) -> set[str]:
    # Over /mcp one state serves many tokens: each sees only its own conversations.
    key = f"{id(state)}:{state.conversation_scope()}"
    return _conversations.setdefault(key, set())


def conversation(state: ServerState, session_id: str) -> str:
    """The stored conversation id (stack key) of the caller's ``session_id``: as given on
    stdio; over ``/mcp`` under the request's token, so two tokens using the same
    ``session_id`` never share a stack (the raw id is checked first, so errors name it)."""
    if state.conversation_scope():
        from workflows.generations.v0_14 import stack_id_clean

        stack_id_clean("session_id", session_id)
    return state.conversation_id(session_id)


def shown(state: ServerState, answer: Any) -> Any:
    """``answer`` with every ``session_id`` as the caller named it."""
    if not state.conversation_scope() or not isinstance(answer, BaseModel):
        return answer
    update: dict[str, Any] = {}
    for name in type(answer).model_fields:
        value = getattr(answer, name)
        if name == "session_id" and isinstance(value, str):
            update[name] = state.session_id_shown(value)
        elif isinstance(value, BaseModel):
            update[name] = shown(state, value)
    return answer.model_copy(update=update) if update else answer


class Capture:
    """Stands in for a server to collect 0.9.1's tool functions as ``deepwork.register``
    defines them, so the union tools can hand a 0.9.1 call to them unchanged."""

    def __init__(self) -> None:
        self.fns: dict[str, Callable[..., Awaitable[Any]]] = {}

    def tool(self, fn: Callable[..., Awaitable[Any]], *, name: str, **options: Any) -> None:
        self.fns[name] = fn


# start_workflow's parameters as DeepWork 0.9.1 words them (its own tools and the union's).
Goal = Annotated[str, Field(description="What the user wants to accomplish.")]
JobName = Annotated[
    str, Field(description="The job's name as get_workflows lists it (or its folder).")
]
WorkflowName = Annotated[
    str,
    Field(
        description="The workflow within the job. A job with a single workflow runs it "
        "whatever name is given; otherwise an unknown name lists the available ones."
    ),
]
# Parameter declarations shared by the 0.14 and the union tools.
SessionId = Annotated[
    str | None,
    Field(
        description="DeepWork 0.14: your conversation id (CLAUDE_CODE_SESSION_ID on Claude "
        "Code, else the begin_step.session_id start_workflow returned). It names your stack."
    ),
]
AgentId = Annotated[
    str | None,
    Field(description="DeepWork 0.14: a sub-agent's id (CLAUDE_CODE_AGENT_ID); its own stack."),
]
Inputs = Annotated[
    dict[str, str | list[str]] | None,
    Field(
        description="Values of the first step's declared inputs, by argument name: a string, "
        "or for file_path arguments a path or list of paths. They reach every step that "
        "declares them."
    ),
]
Outputs = Annotated[
    dict[str, str | list[str]],
    Field(
        description="Output name -> value: file_path outputs take a path or list of paths "
        "relative to the project root; string outputs take the string itself."
    ),
]
WorkSummary = Annotated[
    str | None,
    Field(description="What you did in this step; checked against its process requirements."),
]
Override = Annotated[
    str | None,
    Field(description="Skips every review of this step when given; say why."),
]
