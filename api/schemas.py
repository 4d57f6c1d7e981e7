"""Request and response bodies of the REST API.

Actions answer with the wire models of ``workflows.schemas``: a program driving a session over
REST reads exactly what an agent reads from the MCP tools.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

from reviews.models import HumanDecision
from tracker.models import Decision, Issue, Milestone, Phase, Task, TrackedWorkflow
from workflows.models import Job, StepRun, WorkflowSession
from workflows.schemas import ReviewInfo
from workflows.selectors.catalog import entries_of
from workflows.selectors.events import EventRow
from workflows.selectors.sessions import SESSION_CURSOR_PATTERN
from workflows.services.step_changes import run_files


def _encodable(value: str) -> str:
    # A lone surrogate (legal in JSON, "\ud800") can be neither stored nor sent back as UTF-8.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text") from None
    return value


NO_NUL = r"^[^\x00]*$"

# Every string a client sends: no NUL character (PostgreSQL stores none) and valid Unicode.
Text = Annotated[str, StringConstraints(pattern=NO_NUL), AfterValidator(_encodable)]
# A name or id stored in a 255-character column.
Name = Annotated[
    str,
    StringConstraints(min_length=1, max_length=255, pattern=NO_NUL),
    AfterValidator(_encodable),
]
# An agent id: up to 128 characters, not only spaces (agent_ensure's rule, declared).
AgentId = Annotated[
    str,
    StringConstraints(max_length=128, pattern=r"^[^\x00]*[^\s\x00][^\x00]*$"),
    AfterValidator(_encodable),
]
# Output names are checked against the step's declared outputs before anything is stored.
Outputs = dict[str, Name | list[Name]]
# A page position in the session list: microseconds since 1970 and an id, as handed out in
# ``next_cursor``. Declared exactly, so that every value the schema allows is one to honour.
Cursor = Annotated[str, StringConstraints(pattern=SESSION_CURSOR_PATTERN)]


def _iso_8601(value: object) -> object:
    # pydantic would also read "1700000000" as seconds since 1970; here a moment is written as
    # ISO 8601 ("2026-03-01T12:00:00Z", or a date alone for its midnight).
    if isinstance(value, str) and not re.match(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        raise ValueError("must be an ISO 8601 date-time, e.g. 2026-03-01T12:00:00Z")
    return value


Moment = Annotated[datetime, BeforeValidator(_iso_8601)]
SessionStatus = Literal["active", "completed", "aborted", "running", "failed"]


class ErrorDetail(Schema):
    status: int
    code: str = Field(description="Stable machine-readable reason, e.g. 'not_found'.")
    message: str
    details: list[dict[str, Any]] | None = Field(
        description="For invalid requests: each offending field (loc, msg, type)."
    )


class ErrorOut(Schema):
    error: ErrorDetail


# Projects and their catalogs


class ProjectOut(Schema):
    id: int
    name: str
    root_path: str
    created_at: datetime


class ProjectPage(Schema):
    items: list[ProjectOut]
    count: int


class ProjectAddIn(Schema):
    # Checked by the service (absolute, no NUL, at most 1024 characters, not a file), as for
    # the command line and the admin, so all three refuse with the same words.
    root_path: Annotated[str, AfterValidator(_encodable)] = Field(
        description="The project folder's absolute path on the server (the folder holding "
        ".deepwork/jobs). Symbolic links and '..' are resolved."
    )


class ProjectAddedOut(ProjectOut):
    created: bool = Field(description="False: the folder was already a project, this one.")
    folder_found: bool = Field(
        description="Whether the folder exists on the server as a folder the server can read."
    )
    warnings: list[str] = Field(
        description="What to fix on the server, e.g. the folder is not there (yet): the "
        "project is added anyway, and served once it is."
    )


class StepOutputOut(Schema):
    name: str
    type: str
    description: str
    required: bool


class StepOut(Schema):
    step_id: str
    name: str
    description: str
    instructions_file: str
    inputs: list[dict[str, Any]] = Field(
        description="{name, description} asked of the user, or {file, from_step}."
    )
    outputs: list[StepOutputOut]
    reviews: list[ReviewInfo]


class WorkflowOut(Schema):
    name: str
    summary: str
    entries: list[list[str]] = Field(
        description="Step ids in order; an entry of several steps runs them concurrently."
    )


class JobOut(Schema):
    id: int = Field(description="This revision of the job.")
    name: str
    dir_name: str
    source: str
    version: str
    summary: str
    job_dir: str
    created_at: datetime
    workflows: list[WorkflowOut]
    steps: list[StepOut]

    @staticmethod
    def resolve_workflows(job: Job) -> list[dict[str, Any]]:
        # Reads the prefetched nodes of each workflow (see selectors.catalog.project_catalogs).
        return [
            {
                "name": workflow.name,
                "summary": workflow.summary,
                "entries": [
                    [node.step.step_id for node in entry]
                    for entry in entries_of(workflow.nodes.all())
                ],
            }
            for workflow in job.workflows.all()
        ]


class LoadErrorOut(Schema):
    dir_name: str
    job_dir: str
    error: str
    detected_at: datetime


class CatalogOut(Schema):
    jobs: list[JobOut]
    errors: list[LoadErrorOut]


# Sessions


class SessionOut(Schema):
    session_id: str
    project_id: int
    agent_id: str
    parent_session_id: str | None
    job_name: str
    workflow_name: str
    instance_id: str | None
    goal: str
    status: SessionStatus
    current_step_id: str
    abort_reason: str | None
    aborted_by: str
    started_at: datetime
    updated_at: datetime
    completed_at: datetime | None
    generation: Literal["0.9", "0.14"] = Field(
        description="The DeepWork tool generation the session was started in."
    )
    conversation_id: str = Field(description="0.14: the caller's session_id (its stack); else ''.")
    conversation_agent: str = Field(description="0.14: the sub-agent's agent_id; else ''.")
    inputs: dict[str, str | list[str]] = Field(description="0.14: start_workflow's inputs.")

    @staticmethod
    def resolve_agent_id(session: WorkflowSession) -> str:
        return session.agent.agent_id

    @staticmethod
    def resolve_parent_session_id(session: WorkflowSession) -> str | None:
        return session.parent.session_id if session.parent is not None else None


class SessionPage(Schema):
    items: list[SessionOut]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next (older) page; null on the last page."
    )


class CriterionOut(Schema):
    criterion: str
    passed: bool
    feedback: str | None = None


class ReviewResultOut(Schema):
    id: int
    attempt: int
    run_each: str
    target_file: str | None
    passed: bool
    feedback: str
    criteria_results: list[CriterionOut]
    reviewer_kind: Literal["self", "external", "human"]
    reviewer: str
    override_reason: str | None
    error: str | None
    duration_ms: int | None
    created_at: datetime


class DecisionOut(Schema):
    id: int
    session_id: str
    step_id: str
    kind: Literal["override", "request_changes"]
    decided_by: str
    reason: str
    created_at: datetime
    consumed_at: datetime | None = Field(
        description="When the agent's next finish applied it; null while pending."
    )

    @staticmethod
    def resolve_session_id(decision: HumanDecision) -> str:
        return decision.step_run.session.session_id

    @staticmethod
    def resolve_step_id(decision: HumanDecision) -> str:
        return decision.step_run.step_id

    @staticmethod
    def resolve_decided_by(decision: HumanDecision) -> str:
        return decision.decided_by_name


class StepFilesOut(Schema):
    """The files a step run changed in the project, by the tracker's rules (commits, staged,
    unstaged and untracked files; renames as a delete plus an add)."""

    status: Literal["recorded", "pending", "unknown"] = Field(
        description="recorded: the lists are complete (up to the warnings); pending: the step "
        "is running or its comparison is under way; unknown: the warnings say why."
    )
    added: list[str]
    modified: list[str]
    deleted: list[str]
    warnings: list[str]


class StepRunOut(Schema):
    id: int
    step_id: str
    entry_index: int
    status: Literal[
        "active", "completed", "invalidated", "aborted", "pending", "ready", "assigned", "failed"
    ]
    outputs: dict[str, str | list[str]]
    notes: str | None
    quality_attempts: int
    started_at: datetime
    completed_at: datetime | None
    input_values: dict[str, str | list[str] | None] = Field(
        description="0.14: the inputs the step started with (null: not yet available)."
    )
    reviews: list[ReviewResultOut]
    decisions: list[DecisionOut]
    files_changed: StepFilesOut

    @staticmethod
    def resolve_files_changed(run: StepRun) -> dict[str, Any]:
        return run_files(run).as_dict()


class SessionDetailOut(SessionOut):
    runs: list[StepRunOut] = Field(description="In entry order; within an entry, oldest first.")

    @staticmethod
    def resolve_runs(session: WorkflowSession) -> list[StepRun]:
        return sorted(session.runs.all(), key=lambda run: (run.entry_index, run.pk))


class SessionQuery(Schema):
    """The session list's filters as the query string gives them."""

    project: int | None = Field(None, ge=1, le=2**63 - 1, description="Project id.")
    job: Name | None = Field(
        None, description="Job name, folder name, or the name the session was started with."
    )
    status: SessionStatus | None = None
    agent: Name | None = Field(None, description="Agent id.")
    started_after: Moment | None = Field(
        None, description="Inclusive. ISO 8601; UTC when it names no zone; a date is midnight."
    )
    started_before: Moment | None = Field(None, description="Exclusive. ISO 8601, as above.")


# Events


class EventPage(Schema):
    items: list[EventRow]
    last_id: int = Field(description="Pass as `after` to read on; `after` itself if none came.")
    has_more: bool


# Actions


class StartIn(Schema):
    project: int = Field(ge=1, le=2**63 - 1, description="Project id.")
    job_name: Name = Field(description="The job's name (or folder name).")
    workflow_name: Name
    goal: Text
    instance_id: Name | None = None
    agent_id: AgentId | None = Field(
        None,
        description="The agent whose stack the session joins; defaults to 'api:<username>'.",
    )


class FinishIn(Schema):
    outputs: Outputs = Field(
        description="Output name -> path (a `file` output) or list of paths (`files`), "
        "relative to the project root."
    )
    notes: Text | None = None
    override_reason: Text | None = Field(
        None,
        description="Skips the quality review; say why (e.g. the self-review's outcome). "
        "Needs the permission `reviews.decide_review` as well.",
    )


class AbortIn(Schema):
    reason: Text


class GoToStepIn(Schema):
    step_id: Name


class OverrideIn(Schema):
    reason: Text


class RequestChangesIn(Schema):
    feedback: Text


# The tracker (seed 002). Statuses and enums are the stored values, as `get_context` gives them.

TrackedStatus = Literal["PENDING", "IN_PROGRESS", "COMPLETED", "FAILED", "PARTIAL", "BLOCKED"]
TrackedProfile = Literal["SIMPLE", "STANDARD", "COMPLEX"]


def _wire_case(value: Any) -> Any:
    # The stored upper-case form, as the answers show it, names the same value.
    return value.lower() if isinstance(value, str) and value.isupper() else value


# The filters take the seed's lower-case wire values, what agents send to `start_workflow`
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
    AfterValidator(_encodable),
]


class ResolveIn(Schema):
    resolution: WrittenText = Field(
        description="How the blocker is resolved, for the agent to read."
    )
