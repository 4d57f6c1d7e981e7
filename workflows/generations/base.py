"""What differs between DeepWork's generations, as one strategy the engine consumes.

One session service (``workflows.services.sessions``) and one finish pipeline
(``reviews.services``) serve every session; each session row says which generation it runs
(``WorkflowSession.generation``), and a ``Generation`` answers the few questions on which the
generations differ:

- how a stack is keyed: by the agent the caller is (0.9), or by the caller's conversation
  and sub-agent id (0.14, ``Conversation``);
- what a step is and what it reads: a workflow entry of ``Step`` rows, possibly concurrent,
  with its instructions file (0.9); one typed step with inline instructions and input values
  carried from the start inputs and earlier outputs (0.14);
- how outputs are checked: 0.9.1's declared outputs and types, or 0.14's typed arguments
  (and, before any review, their ``json_schema``);
- who plans the reviews: the server's gate (an external reviewer or one self-review request,
  0.9) or review tasks the agent hands to sub-agents (0.14, ``reviews_by_agent``).

Everything else (the compare-and-set claim, the step runs, the events, a person's rulings and
aborts) is the engine's, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from workflows.models import Agent, Job, Project, Step, Workflow, WorkflowSession
    from workflows.results import Stack

Value = str | list[str]


@dataclass(frozen=True)
class Conversation:
    """A stack named by the caller's conversation id and, for a sub-agent, its agent id."""

    conversation_id: str
    agent_id: str | None = None


class Generation(Protocol):
    """The rules of one generation; see the module docstring for what they cover."""

    # The value stored in ``WorkflowSession.generation``.
    name: str
    # What an agent told of a person's abort may do next, in its generation's words.
    abort_told_next: str
    # True when the agent runs its reviews itself (review tasks), False when the gate does.
    reviews_by_agent: bool
    # Whether the engine records the files each step changed as the session moves.
    records_step_files: bool
    # Whether steps get input values (from the start inputs and earlier outputs).
    carries_inputs: bool
    # How go_to_step's refusal to go forward names a position.
    index_word: str

    def stack_agent(
        self,
        *,
        project: Project,
        agent: Agent | None,
        conversation: Conversation | None,
        create: bool,
    ) -> Agent | None:
        """The agent row holding the stack a call names."""

    def stack(self, *, project: Project, agent: Agent, conversation: Conversation | None) -> Stack:
        """The stack an answer shows."""

    def find_job(
        self,
        *,
        project: Project,
        catalog: Any,
        conversation: Conversation | None,
        job_name: str,
    ) -> Job:
        """The job a start names, or ``NotFound``/``JobBroken``/``InvalidInput``."""

    def parent(
        self, *, project: Project, agent: Agent, conversation: Conversation | None
    ) -> WorkflowSession | None:
        """The session a new one nests in."""

    def session_fields(
        self,
        *,
        conversation: Conversation | None,
        instance_id: str | None,
        inputs: dict[str, Value] | None,
    ) -> dict[str, Any]:
        """A new session's own columns (its id first among them)."""

    def entries(self, job: Job, workflow: Workflow) -> Sequence[Any]:
        """The workflow's entries in order (what ``current_entry_index`` counts)."""

    def current_entry(self, session: WorkflowSession, entries: Sequence[Any]) -> Any:
        """The entry the session is at, or ``JobBroken`` when the job no longer has it."""

    def step_rows(self, session: WorkflowSession, entry: Any) -> list[Step]:
        """The ``Step`` rows an entry's runs point at."""

    def find_step(self, entries: Sequence[Any], step_id: str) -> int | None:
        """The index of the entry ``go_to_step`` names."""

    def step_names(self, entries: Sequence[Any]) -> list[str]:
        """Every step as ``go_to_step`` names it."""

    def entry_keys(self, entry: Any) -> list[str]:
        """The step ids of an entry's runs."""

    def read_entry(self, job: Job, entries: Sequence[Any], entry: Any) -> Any:
        """What an entry's answer shows, read before any transaction (instructions)."""

    def check_outputs(self, *, entry: Any, outputs: dict[str, Value], project_root: Path) -> None:
        """Refuse a hand-in whose outputs do not fit the entry (``InvalidInput``)."""

    def output_feedback(
        self, *, entry: Any, outputs: dict[str, Value], project_root: Path
    ) -> str | None:
        """Why outputs that passed ``check_outputs`` still go back to the agent as
        ``needs_work`` before any review (a failed ``json_schema``), or None."""

    def run_outputs(self, entry: Any, key: str, outputs: dict[str, Value]) -> dict[str, Value]:
        """The outputs a step run stores of its entry's hand-in."""

    def input_values(
        self, session: WorkflowSession, entry: Any, produced: dict[str, Value]
    ) -> dict[str, Value | None]:
        """The values of an entry's declared inputs, from the start inputs and ``produced``
        (earlier steps' outputs); empty where a generation gives steps no input values."""

    def begun(
        self,
        session: WorkflowSession,
        entries: Sequence[Any],
        entry: Any,
        read: Any,
        values: dict[str, Value | None],
    ) -> Any:
        """The answer's view of an entry just begun."""

    def completed(
        self,
        session: WorkflowSession,
        entries: Sequence[Any],
        all_outputs: dict[str, Value],
        stack: Stack,
    ) -> Any:
        """The answer to the hand-in that completed the workflow."""

    def aborted(
        self, session: WorkflowSession, explanation: str, step_id: str, stack: Stack
    ) -> Any:
        """The answer to an abort."""

    def invalidated(
        self, entries: Sequence[Any], target: int, run_step_ids: list[str]
    ) -> tuple[str, ...]:
        """The steps ``go_to_step`` names as invalidated, from the runs it discarded."""

    def started(self, *, begun: Any, stack: Stack) -> Any:
        """The answer to a start."""

    def advanced(self, *, begun: Any, stack: Stack) -> Any:
        """The answer to a hand-in that moved the session on."""

    def went(self, *, begun: Any, invalidated_steps: tuple[str, ...], stack: Stack) -> Any:
        """The answer to ``go_to_step``."""
