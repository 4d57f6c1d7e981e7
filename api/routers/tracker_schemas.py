"""The tracker's REST shapes (``api.routers.tracker``). Statuses and enums are the stored
values, as `get_context` gives them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

from api.schemas import Name, encodable
from tracker.models import Decision, Issue, Milestone, Phase, Task, TrackedWorkflow

TrackedStatus = Literal["PENDING", "IN_PROGRESS", "COMPLETED", "FAILED", "PARTIAL", "BLOCKED"]
TrackedProfile = Literal["SIMPLE", "STANDARD", "COMPLEX"]


def _wire_case(value: Any) -> Any:
    # The stored upper-case form, as the answers show it, names the same value.
    return value.lower() if isinstance(value, str) and value.isupper() else value


# The filters take the tracker tools' lower-case wire values, what agents send to `start_workflow`
# and `complete_workflow` (`in_progress`, `partial`, `simple` ...), or the upper-case form the
# answers show; anything else is a 400 listing the valid values.
StatusFilter = Annotated[
    Literal["pending", "in_progress", "completed", "failed", "partial", "blocked"],
    BeforeValidator(_wire_case),
]
ProfileFilter = Annotated[Literal["simple", "standard", "complex"], BeforeValidator(_wire_case)]


class TrackedWorkflowQuery(Schema):
    """The tracked workflow list's filters as the query string gives them."""

    project: int | None = Field(None, ge=1, le=2**63 - 1, description="Project id.")
    status: StatusFilter | None = Field(
        None, description="A wire value (lower case) or the stored upper-case form."
    )
    profile: ProfileFilter | None = Field(
        None, description="A wire value (lower case) or the stored upper-case form."
    )
    agent: Name | None = Field(None, description="Agent id of the agent that started it.")


class TrackedWorkflowOut(Schema):
    id: int
    project_id: int
    project_name: str
    agent_id: str
    name: str
    objective: str
    profile: TrackedProfile
    status: TrackedStatus
    current_phase: int
    total_phases: int
    summary: str
    total_duration_ms: int = Field(description="Summed task time (parallel tasks count twice).")
    total_tokens: int
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None

    @staticmethod
    def resolve_project_name(workflow: TrackedWorkflow) -> str:
        return workflow.project.name

    @staticmethod
    def resolve_agent_id(workflow: TrackedWorkflow) -> str:
        return workflow.agent.agent_id


class TrackedWorkflowPage(Schema):
    items: list[TrackedWorkflowOut]
    next_cursor: int | None = Field(
        description="Pass as `cursor` for the next (older) page; null on the last page."
    )


class PhaseTasksOut(Schema):
    total: int
    completed: int
    failed: int
    in_progress: int


class PhaseOut(Schema):
    id: int
    number: int
    name: str
    status: Literal["PENDING", "IN_PROGRESS", "COMPLETED", "FAILED"]
    tasks: PhaseTasksOut
    started_at: datetime | None
    completed_at: datetime | None

    @staticmethod
    def resolve_tasks(phase: Any) -> dict[str, int]:
        # Annotated by tracked_workflow_detail.
        return {
            "total": phase.n_total,
            "completed": phase.n_completed,
            "failed": phase.n_failed,
            "in_progress": phase.n_running,
        }


class TrackedCountsOut(Schema):
    tasks: int
    decisions: int
    issues: int
    open_blockers: int = Field(description="Issues that need a person and have no answer yet.")
    milestones: int


class TrackedWorkflowDetailOut(TrackedWorkflowOut):
    scope: str
    constraints: str
    achievements: list[Any]
    limitations: list[Any]
    progress: float | None = Field(description="The latest milestone's progress (0-100).")
    counts: TrackedCountsOut = Field(
        description="Sizes of the lists, read page by page at .../tasks, .../decisions, "
        ".../issues and .../milestones."
    )
    phases: list[PhaseOut] = Field(description="By number.")

    @staticmethod
    def resolve_progress(workflow: Any) -> float | None:
        return workflow.latest_progress

    @staticmethod
    def resolve_counts(workflow: Any) -> dict[str, int]:
        # Annotated by tracked_workflow_detail.
        return {
            "tasks": workflow.n_tasks or 0,
            "decisions": workflow.n_decisions or 0,
            "issues": workflow.n_issues or 0,
            "open_blockers": workflow.n_open_blockers or 0,
            "milestones": workflow.n_milestones or 0,
        }

    @staticmethod
    def resolve_phases(workflow: TrackedWorkflow) -> list[Phase]:
        return list(workflow.phases.all())


class FilesChangedOut(Schema):
    added: list[str] = []
    modified: list[str] = []
    deleted: list[str] = []


class TrackedTaskOut(Schema):
    id: int
    parent_task_id: int | None
    phase_id: int | None
    phase_number: int | None
    name: str
    goal: str
    status: Literal["IN_PROGRESS", "SUCCESS", "PARTIAL_SUCCESS", "FAILED"]
    caller_type: str = Field(description="ORCHESTRATOR, SUBAGENT, or empty.")
    agent_name: str = Field(description="The sub-agent's name, else the agent id.")
    areas: list[str]
    files_changed: FilesChangedOut | None = Field(
        description="What changed during the task; null while it runs or if nothing did."
    )
    scope_match: bool | None
    unexpected_files: list[str]
    warnings: list[str]
    summary: str
    achievements: list[Any]
    limitations: list[Any]
    next_steps: list[Any]
    manual_review_needed: bool
    manual_review_reason: str
    tests_status: str = Field(description="PASSED, FAILED, NOT_RUN, or empty.")
    tokens_input: int
    tokens_output: int
    started_at: datetime
    completed_at: datetime | None
    duration_ms: int | None
    subtasks: list[TrackedTaskOut] = Field(
        description="The first `subtask_limit` sub-tasks, oldest first, each nested the same way."
    )
    subtasks_count: int = Field(description="How many sub-tasks the task has in all.")
    subtasks_next_cursor: int | None = Field(
        description="Pass as `cursor` to /api/tracker/tasks/{id}/subtasks for the sub-tasks "
        "after these; null when all are shown."
    )

    @staticmethod
    def resolve_parent_task_id(task: Task) -> int | None:
        return task.parent_id

    @staticmethod
    def resolve_phase_number(task: Task) -> int | None:
        return task.phase.number if task.phase is not None else None

    @staticmethod
    def resolve_agent_name(task: Task) -> str:
        return task.agent_name or task.agent.agent_id

    @staticmethod
    def resolve_files_changed(task: Task) -> dict[str, Any] | None:
        return task.files_changed or None


class TrackedTaskPage(Schema):
    items: list[TrackedTaskOut] = Field(description="Top-level tasks, newest first.")
    next_cursor: int | None = Field(
        description="Pass as `cursor` for the next (older) page; null on the last page."
    )


class SubtaskPage(Schema):
    items: list[TrackedTaskOut] = Field(description="The task's sub-tasks, oldest first.")
    next_cursor: int | None = Field(
        description="Pass as `cursor` for the next (later) page; null on the last page."
    )


class _LogOut(Schema):
    id: int
    task_id: int
    task_name: str
    agent_name: str
    created_at: datetime

    @staticmethod
    def resolve_task_name(row: Decision | Issue | Milestone) -> str:
        return row.task.name

    @staticmethod
    def resolve_agent_name(row: Decision | Issue | Milestone) -> str:
        return row.task.agent_name or row.task.agent.agent_id


class TrackedDecisionOut(_LogOut):
    category: Literal["ARCHITECTURE", "LIBRARY_CHOICE", "TRADE_OFF", "WORKAROUND", "OTHER"]
    question: str
    options_considered: list[Any]
    chosen: str
    reasoning: str
    trade_offs: str


class IssueOut(_LogOut):
    type: Literal["DOC_GAP", "BUG", "DEPENDENCY_CONFLICT", "UNCLEAR_REQUIREMENT", "OTHER"]
    description: str
    resolution: str = Field(description="What the agent did about it.")
    requires_human_review: bool = Field(description="A blocker while no person has answered.")
    human_resolution: str = Field(description="A person's written answer, once resolved.")
    resolved_by: str | None
    resolved_via: str = Field(
        description="The credential the person answered through: dashboard, or "
        "'API token <id> (<name>)'; empty while open."
    )
    resolved_at: datetime | None

    @staticmethod
    def resolve_resolved_by(issue: Issue) -> str | None:
        return issue.resolved_by.get_username() if issue.resolved_by is not None else None


class MilestoneOut(_LogOut):
    message: str
    progress: float | None
    metadata: dict[str, Any]


class TrackedDecisionPage(Schema):
    items: list[TrackedDecisionOut]
    next_cursor: int | None = Field(description="Pass as `cursor`; null on the last page.")


class IssuePage(Schema):
    items: list[IssueOut]
    next_cursor: int | None = Field(description="Pass as `cursor`; null on the last page.")


class MilestonePage(Schema):
    items: list[MilestoneOut]
    next_cursor: int | None = Field(description="Pass as `cursor`; null on the last page.")


# A person's written text as the tracker's services take it: not blank, and no control
# character but tab and line breaks (limits.TRACKER_TEXT), declared so that every value the
# schema allows is one the service accepts. Its length is checked by the service.
_CONTROL = r"\x00-\x08\x0b\x0c\x0e-\x1f"
WrittenText = Annotated[
    str,
    StringConstraints(pattern=rf"^[^{_CONTROL}]*[^\s{_CONTROL}][^{_CONTROL}]*$"),
    AfterValidator(encodable),
]


class ResolveIn(Schema):
    resolution: WrittenText = Field(
        description="How the blocker is resolved, for the agent to read."
    )
