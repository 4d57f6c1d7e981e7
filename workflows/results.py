"""What the engine answers, in domain terms: the session services and the quality gate return
these, and each dialect (``workflows.dialects``) renders them in its own wire format and wording.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from workflows.models import Job, Step, WorkflowSession


class CriterionResult(TypedDict):
    """One criterion's verdict as a reviewer gave it and ``FailedReviewOut.criteria_results``
    stores it; ``workflows.schemas.QualityCriteriaResult`` is its DeepWork wire form."""

    criterion: str
    passed: bool
    feedback: str | None


@dataclass(frozen=True)
class StackItem:
    """One active session of an agent's stack."""

    job_name: str
    workflow_name: str
    step_id: str  # the session's current step


Stack = tuple[StackItem, ...]  # bottom to top


@dataclass(frozen=True)
class StepInstructions:
    step_id: str
    text: str


@dataclass(frozen=True)
class StepBegun:
    """The entry a session is now at: its steps (more than one when they run concurrently)
    and each step's instructions, read from the job folder."""

    session: WorkflowSession
    job: Job
    steps: tuple[Step, ...]
    instructions: tuple[StepInstructions, ...]


@dataclass(frozen=True)
class SessionStarted:
    begun: StepBegun
    stack: Stack


@dataclass(frozen=True)
class StepAdvanced:
    """The hand-in passed; the session moved on to ``begun``."""

    begun: StepBegun
    stack: Stack


@dataclass(frozen=True)
class WorkflowCompleted:
    """The hand-in passed and it was the last entry: the session is completed."""

    workflow_name: str
    all_outputs: dict[str, str | list[str]]  # every completed step's outputs, in step order
    stack: Stack


@dataclass(frozen=True)
class FailedReview:
    """One review that judged the work and found it wanting."""

    run_each: str
    feedback: str
    target_file: str | None = None
    criteria_results: tuple[CriterionResult, ...] = ()


@dataclass(frozen=True)
class NeedsWork:
    """The hand-in did not pass: the reviews (or a person) sent it back."""

    failed: tuple[FailedReview, ...]
    stack: Stack


@dataclass(frozen=True)
class SelfReviewRequired:
    """The agent is to review its own work with the instructions written at
    ``instructions_path`` (relative to the project root), then hand in again."""

    instructions_path: str
    stack: Stack


FinishOutcome = StepAdvanced | WorkflowCompleted | NeedsWork | SelfReviewRequired


@dataclass(frozen=True)
class SessionAborted:
    session: WorkflowSession
    step_id: str  # the step it was at
    explanation: str
    stack: Stack  # after the abort

    @property
    def resumed(self) -> StackItem | None:
        """The session that is now on top of the stack, if any."""
        return self.stack[-1] if self.stack else None


@dataclass(frozen=True)
class WentToStep:
    begun: StepBegun
    invalidated_steps: tuple[str, ...]  # steps whose progress was discarded, in step order
    stack: Stack
