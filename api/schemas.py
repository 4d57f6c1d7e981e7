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
from workflows.models import Job, StepRun, WorkflowSession
from workflows.schemas import ReviewInfo
from workflows.selectors.catalog import entries_of
from workflows.selectors.events import EventRow
from workflows.selectors.sessions import SESSION_CURSOR_PATTERN
from workflows.services.step_changes import run_files


def encodable(value: str) -> str:
    # A lone surrogate (legal in JSON, "\ud800") can be neither stored nor sent back as UTF-8.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text") from None
    return value


NO_NUL = r"^[^\x00]*$"

# Every string a client sends: no NUL character (PostgreSQL stores none) and valid Unicode.
Text = Annotated[str, StringConstraints(pattern=NO_NUL), AfterValidator(encodable)]
# A name or id stored in a 255-character column.
Name = Annotated[
    str,
    StringConstraints(min_length=1, max_length=255, pattern=NO_NUL),
    AfterValidator(encodable),
]
# An agent id: up to 128 characters, not only spaces (agent_ensure's rule, declared).
AgentId = Annotated[
    str,
    StringConstraints(max_length=128, pattern=r"^[^\x00]*[^\s\x00][^\x00]*$"),
    AfterValidator(encodable),
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
    hosted: bool = Field(
        description="Served to tokens: hosted /mcp and the API's actions (start, hand in, "
        "define, execute). A folder a local stdio server registered is not, until a person "
        "who may add projects adds it."
    )
    removed_at: datetime | None = Field(
        description="When the project was removed: served nowhere, its sessions kept "
        "read-only; adding its folder again brings it back."
    )


class ProjectPage(Schema):
    items: list[ProjectOut]
    count: int


class ProjectAddIn(Schema):
    # Checked by the service (absolute, no NUL, at most 1024 characters, a folder a project
    # may be), as for the command line and the admin, so all three refuse with the same words.
    root_path: Annotated[str, AfterValidator(encodable)] = Field(
        description="The project folder's absolute path on the server (the folder holding "
        ".deepwork/jobs). Symbolic links and '..' are resolved.",
    )


class ProjectAddedOut(ProjectOut):
    created: bool = Field(description="False: the folder was already a project, this one.")
    folder_found: bool = Field(
        description="Whether the server can read a folder at the path. Why not (missing, a "
        "file, unreadable...) is said only in the server's log and to its operator."
    )
    warnings: list[str] = Field(
        description="What to know: the folder cannot be read (yet), in one wording whatever "
        "is at the path (the project is added anyway, and served once it can); a system "
        "folder (/etc, /usr...) whose readable files its sessions can show."
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
    via: str = Field(
        description="The credential the person ruled through: dashboard, admin, or "
        "'API token <id> (<name>)'; empty for rulings recorded before it was kept."
    )
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
