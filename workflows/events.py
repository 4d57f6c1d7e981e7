"""The one way to write to the ``Event`` outbox.

Every event kind has one payload model: a write is validated against it, so each kind is
stored in one shape whoever writes it. The person acting (``by``) is recorded the same way for
every kind, as ``"by": <username>``, and only when a person rather than the agent acted; with
it, where given, the credential they acted through (``"via"``: the dashboard, the admin, which
API token).
Listeners are told after the transaction commits (``outbox.announce``), never before: a rolled
back transition must not show on the dashboard.

Other contexts react to events without the engine knowing them: a projection (the insight
tallies) or a reaction (a workflow tool's name freed when its DAG workflow runs or is deleted)
is registered with ``event_subscribe`` from its app's ``ready()``, and runs inside the writer's
transaction, so it commits or rolls back with the event itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from django.db import router, transaction
from pydantic import BaseModel, ConfigDict, Field

from workflows import outbox, rows
from workflows.models import Agent, Event, Project, WorkflowSession

if TYPE_CHECKING:
    from django.contrib.auth.models import User as User
else:
    User = Any


# Where a signed-in person acted, recorded as ``via`` (over the REST API,
# ``accounts.identity.identity_via`` names the token instead).
VIA_DASHBOARD = "dashboard"
VIA_ADMIN = "admin"


class Payload(BaseModel):
    """Base of every payload: no unknown keys, so a typo cannot invent a new shape."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SessionStarted(Payload):
    job: str
    workflow: str
    goal: str
    parent: str | None


class StepStarted(Payload):
    step_id: str
    entry_index: int


class StepFinished(Payload):
    step_id: str
    outputs: dict[str, str | list[str]]
    notes: str | None
    # The run it finished (None in events written before these were recorded): listeners
    # such as the insight tallies count it from here, without reading the runs.
    entry_index: int | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None


class StepReopened(Payload):
    step_id: str
    invalidated_steps: list[str]


class SessionCompleted(Payload):
    workflow: str


class SessionAborted(Payload):
    step_id: str
    explanation: str


class ReviewRequested(Payload):
    instructions: str


class ReviewRound(Payload):
    """One hand-in's round of reviews of its entry, passed or failed: the entry's steps in
    order, the attempt, how many reviews ran and failed, and the reason that skipped them (then
    no review ran). Every key is always stored, so readers never guess which shape they got."""

    step_ids: list[str] = Field(min_length=1)
    attempt: int
    reviews: int
    failed: int
    override_reason: str | None


class ReviewOverridden(Payload):
    step_id: str
    reason: str


class ChangesRequested(Payload):
    step_id: str
    reason: str


class OverrideDelivered(Payload):
    decision: int


class ChangesDelivered(Payload):
    decision: int


class CatalogSynced(Payload):
    jobs: int
    errors: int


class AgentConnected(Payload):
    agent_id: str
    adopted: bool


class StepFilesRecorded(Payload):
    """The files one step run changed, computed once it finished (see
    ``workflows.services.step_changes``); ``status`` "recorded" or "unknown"."""

    step_id: str
    status: str
    added: int
    modified: int
    deleted: int
    warnings: int


# The tracker's events: ids as the tools show them (text), enum values as stored.


class TrackedWorkflowCreated(Payload):
    workflow_id: str
    name: str
    profile: str
    status: str
    total_phases: int


class TrackedWorkflowUpdated(Payload):
    """A status or current-phase change; ``reason`` says which call made it."""

    workflow_id: str
    status: str
    current_phase: int
    reason: str


class PhaseCreated(Payload):
    workflow_id: str
    phase_id: str
    number: int
    name: str
    status: str


class PhaseUpdated(Payload):
    workflow_id: str
    phase_id: str
    number: int
    status: str


class TaskCreated(Payload):
    workflow_id: str
    task_id: str
    name: str
    phase_id: str | None
    parent_task_id: str | None
    caller_type: str
    agent_name: str


class TaskUpdated(Payload):
    workflow_id: str
    task_id: str
    status: str
    duration_ms: int
    files_changed: dict[str, list[str]]
    unexpected_files: list[str]


class DecisionCreated(Payload):
    workflow_id: str
    task_id: str
    decision_id: str
    category: str


class IssueCreated(Payload):
    workflow_id: str
    task_id: str
    issue_id: str
    type: str
    requires_human_review: bool


class IssueResolved(Payload):
    """A person's written answer to a blocker (``by`` names them)."""

    workflow_id: str
    task_id: str
    issue_id: str
    human_resolution: str


class MilestoneCreated(Payload):
    workflow_id: str
    task_id: str
    milestone_id: str
    message: str
    progress: float | None


# Multi-agent DAG workflows: ids as agents see them.


class DagDefined(Payload):
    workflow_id: str
    name: str
    creator_id: str
    steps: int


class DagDeleted(Payload):
    workflow_id: str
    name: str
    requesting_agent_id: str
    status: str


class DagStepAssigned(Payload):
    workflow_id: str
    step_id: str
    agent_id: str


class DagStepCompleted(Payload):
    workflow_id: str
    step_id: str
    agent_id: str


class DagStepFailed(Payload):
    workflow_id: str
    step_id: str
    agent_id: str
    error_message: str


class DagStepHandedOn(Payload):
    """A step taken from an agent whose heartbeat went stale; the next assignment follows."""

    workflow_id: str
    step_id: str
    from_agent_id: str
    last_heartbeat: str | None


class SessionFailed(Payload):
    workflow: str
    step_id: str
    error_message: str


class AgentRegistered(Payload):
    agent_id: str
    roles: list[str]


PAYLOADS: Mapping[str, type[Payload]] = {
    Event.Kind.SESSION_STARTED: SessionStarted,
    Event.Kind.STEP_STARTED: StepStarted,
    Event.Kind.STEP_FINISHED: StepFinished,
    Event.Kind.STEP_REOPENED: StepReopened,
    Event.Kind.SESSION_COMPLETED: SessionCompleted,
    Event.Kind.SESSION_ABORTED: SessionAborted,
    Event.Kind.REVIEW_REQUESTED: ReviewRequested,
    Event.Kind.REVIEW_PASSED: ReviewRound,
    Event.Kind.REVIEW_FAILED: ReviewRound,
    Event.Kind.REVIEW_OVERRIDDEN: ReviewOverridden,
    Event.Kind.CHANGES_REQUESTED: ChangesRequested,
    Event.Kind.OVERRIDE_DELIVERED: OverrideDelivered,
    Event.Kind.CHANGES_DELIVERED: ChangesDelivered,
    Event.Kind.CATALOG_SYNCED: CatalogSynced,
    Event.Kind.AGENT_CONNECTED: AgentConnected,
    Event.Kind.STEP_FILES_RECORDED: StepFilesRecorded,
    Event.Kind.WORKFLOW_CREATED: TrackedWorkflowCreated,
    Event.Kind.WORKFLOW_UPDATED: TrackedWorkflowUpdated,
    Event.Kind.PHASE_CREATED: PhaseCreated,
    Event.Kind.PHASE_UPDATED: PhaseUpdated,
    Event.Kind.TASK_CREATED: TaskCreated,
    Event.Kind.TASK_UPDATED: TaskUpdated,
    Event.Kind.DECISION_CREATED: DecisionCreated,
    Event.Kind.ISSUE_CREATED: IssueCreated,
    Event.Kind.ISSUE_UPDATED: IssueResolved,
    Event.Kind.MILESTONE_CREATED: MilestoneCreated,
    Event.Kind.DAG_DEFINED: DagDefined,
    Event.Kind.DAG_DELETED: DagDeleted,
    Event.Kind.DAG_STEP_ASSIGNED: DagStepAssigned,
    Event.Kind.DAG_STEP_COMPLETED: DagStepCompleted,
    Event.Kind.DAG_STEP_FAILED: DagStepFailed,
    Event.Kind.DAG_STEP_HANDED_ON: DagStepHandedOn,
    Event.Kind.SESSION_FAILED: SessionFailed,
    Event.Kind.AGENT_REGISTERED: AgentRegistered,
}
assert set(PAYLOADS) == set(Event.Kind.values), "every event kind needs its payload model"


def _stored(
    kind: str, payload: Payload | Mapping[str, Any], by: User | None, via: str = ""
) -> dict[str, Any]:
    model = PAYLOADS[kind]
    if not isinstance(payload, model):
        # A mapping, or a model of another kind handed in by mistake: validate as this kind.
        data = payload.model_dump() if isinstance(payload, Payload) else payload
        payload = model.model_validate(data)
    # Every field, defaults included: a kind's stored shape never depends on what a writer set.
    stored = payload.model_dump(mode="json")
    if by is not None:
        stored["by"] = by.get_username()
        if via:
            stored["via"] = via
    return stored


class Subscriber(Protocol):
    def __call__(self, *, events: Sequence[Event], session: WorkflowSession | None) -> None: ...


@dataclass(frozen=True)
class _Subscription:
    name: str
    kinds: frozenset[str]
    handler: Subscriber


_subscriptions: dict[str, _Subscription] = {}


def event_subscribe(*, name: str, kinds: Iterable[str], handler: Subscriber) -> None:
    """Have ``handler(events=..., session=...)`` called, inside the writing transaction, for every
    write of one of ``kinds``. Registered once per name (an app's ``ready()`` may run twice in
    tests): registering a name again replaces its handler rather than calling it twice."""
    unknown = set(kinds) - set(Event.Kind.values)
    if unknown:
        raise ValueError(f"event_subscribe({name!r}): no event kind {sorted(unknown)}")
    _subscriptions[name] = _Subscription(name=name, kinds=frozenset(kinds), handler=handler)


def _notify_subscribers(events: Sequence[Event], session: WorkflowSession | None) -> None:
    kind = events[0].kind
    for subscription in _subscriptions.values():
        if kind in subscription.kinds:
            subscription.handler(events=events, session=session)


def _announce_after_commit(using: str) -> None:
    if outbox.announcer_enabled():
        transaction.on_commit(outbox.announce, using=using)


def event_record(
    *,
    kind: str,
    project: Project,
    session: WorkflowSession | None = None,
    agent: Agent | None = None,
    by: User | None = None,
    via: str = "",
    payload: Payload | Mapping[str, Any],
) -> Event:
    """Append one event; listeners hear of it once the surrounding transaction commits."""
    event = Event(
        project_id=project.pk,
        session=session,
        agent=agent,
        kind=kind,
        payload=_stored(kind, payload, by, via),
    )
    using = router.db_for_write(Event)
    rows.insert_models([event], using=using)
    _notify_subscribers([event], session)
    _announce_after_commit(using)
    return event


def event_record_many(
    *,
    kind: str,
    project: Project,
    session: WorkflowSession | None = None,
    agent: Agent | None = None,
    by: User | None = None,
    via: str = "",
    payloads: Iterable[Payload | Mapping[str, Any]],
) -> list[Event]:
    """Append several events of one kind in one INSERT (the members of a concurrent entry)."""
    events = [
        Event(
            project_id=project.pk,
            session=session,
            agent=agent,
            kind=kind,
            payload=_stored(kind, payload, by, via),
        )
        for payload in payloads
    ]
    if not events:
        return events
    using = router.db_for_write(Event)
    rows.insert_models(events, using=using)
    _notify_subscribers(events, session)
    _announce_after_commit(using)
    return events
