"""The written-out queries of the hot transition path: what they read and write, and how many.

``session_head``, ``stack_for_agent``, the compare-and-set behind every transition and
``session_abort`` skip the ORM's query building for speed; these tests pin that they still
mean exactly what the ORM versions meant, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.support.driving import step_finish
from tests.support.factories import make_user
from workflows.dialects import deepwork
from workflows.errors import Conflict, NotFound
from workflows.models import Event, StepRun, WorkflowSession
from workflows.results import StackItem
from workflows.selectors import session_head, session_resolve, stack_for_agent
from workflows.services import sessions
from workflows.services.agents import ProcessHolder, agent_claim

pytestmark = pytest.mark.django_db

# The transaction (a savepoint inside the test's own transaction), in it the stack with its top
# (one read: the top is the session, the rest the stack the abort leaves), the compare-and-set,
# the step runs, the event and the two insight tallies it counts into.
ABORT_QUERIES = 1 + 1 + 4 + 2
# A hand-in of a step without reviews, file tracking off: the session with its job and
# workflow, then in the transaction (a savepoint here) the compare-and-set, the run completed
# (answering with its entry and times), `step_finished`, its agent tally and its step-time
# tally (counted from the event, not from a read of the runs), the next run, `step_started`,
# then the stack.
FINISH_QUERIES = 1 + 2 + 5 + 2 + 1


def start(project, agent, catalog, job="demo", workflow="main") -> str:
    return sessions.session_start(
        project=project,
        agent=agent,
        catalog=catalog.view(),
        job_name=job,
        workflow_name=workflow,
        goal="queries",
    ).begun.session.session_id


def test_a_hand_in_without_reviews_sends_a_fixed_set_of_statements(
    project, agent, catalog, settings, django_assert_num_queries
):
    settings.DEEPWORK_STEP_FILES = "off"
    start(project, agent, catalog)

    with django_assert_num_queries(FINISH_QUERIES):
        step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})

    finished = Event.objects.get(kind=Event.Kind.STEP_FINISHED)
    run = StepRun.objects.get(step_id="gather")
    assert finished.payload["entry_index"] == run.entry_index == 0
    assert finished.payload["started_at"] == run.started_at.isoformat().replace("+00:00", "Z")
    assert finished.payload["completed_at"] == run.completed_at.isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize("depth", [1, 6])
def test_abort_query_count_stays_constant_as_the_stack_grows(
    project, agent, catalog, depth, django_assert_num_queries
):
    ids = [start(project, agent, catalog) for _ in range(depth)]
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})

    with django_assert_num_queries(ABORT_QUERIES):
        response = deepwork.abort_workflow(project=project, agent=agent, explanation="enough")

    assert (response.aborted_workflow, response.aborted_step) == ("demo/main", "part_a")
    assert [entry.step for entry in response.stack] == ["gather"] * (depth - 1)
    assert response.resumed_step == ("gather" if depth > 1 else None)
    top = WorkflowSession.objects.get(session_id=ids[-1])
    assert (top.status, top.revision, top.abort_reason) == ("aborted", 2, "enough")
    # part_a and part_b (the concurrent entry) were live; gather had completed.
    assert dict(top.runs.values_list("step_id", "status")) == {
        "gather": "completed",
        "part_a": "aborted",
        "part_b": "aborted",
    }


def test_abort_below_the_top_records_everything_in_one_go(project, agent, catalog):
    below = start(project, agent, catalog)
    start(project, agent, catalog, job="nested", workflow="only")
    person = make_user(username="operator")
    before = timezone.now()

    response = deepwork.abort_workflow(
        project=project, agent=agent, explanation="wrong job", session_id=below, by=person
    )

    assert response.model_dump() == {
        "aborted_workflow": "demo/main",
        "aborted_step": "gather",
        "explanation": "wrong job",
        "stack": [{"workflow": "nested/only", "step": "first"}],
        "resumed_workflow": "nested/only",
        "resumed_step": "first",
    }
    session = WorkflowSession.objects.get(session_id=below)
    assert (session.status, session.aborted_by, session.revision) == ("aborted", "operator", 1)
    # Aware datetimes written through the raw statements read back as the ORM wrote them.
    assert before <= session.completed_at <= timezone.now()
    assert session.completed_at <= session.updated_at <= timezone.now()
    run = session.runs.get()
    assert (run.status, run.completed_at) == (StepRun.Status.ABORTED, session.completed_at)
    event = Event.objects.get(kind=Event.Kind.SESSION_ABORTED)
    assert (event.project_id, event.session_id, event.agent_id) == (
        project.pk,
        session.pk,
        agent.pk,
    )
    assert event.payload == {"step_id": "gather", "explanation": "wrong job", "by": "operator"}


def test_lost_abort_race_changes_nothing(project, agent, catalog, monkeypatch):
    sid = start(project, agent, catalog)
    read = sessions.session_head
    stale: list[WorkflowSession] = []

    def read_then_let_the_rival_in(**kwargs):
        session = read(**kwargs)
        if not stale:
            stale.append(session)  # the rival's own read must not start a third caller
            step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
        return session

    monkeypatch.setattr(sessions, "session_head", read_then_let_the_rival_in)
    with pytest.raises(Conflict, match="its current step is now 'part_a'"):
        sessions.session_abort(project=project, agent=agent, explanation="wrong", session_id=sid)

    assert stale[0].revision == 0
    assert not Event.objects.filter(kind=Event.Kind.SESSION_ABORTED).exists()
    assert not StepRun.objects.filter(status=StepRun.Status.ABORTED).exists()
    current = WorkflowSession.objects.get(session_id=sid)
    assert (current.status, current.revision, current.completed_at) == ("active", 1, None)


def test_an_advance_moves_the_revision_and_the_step(project, agent, catalog):
    sid = start(project, agent, catalog)
    checkpoint = sessions.step_checkpoint(
        project=project, agent=agent, outputs={"notes.md": "notes.md"}, session_id=sid
    )
    session = checkpoint.session
    earlier = WorkflowSession.objects.get(session_id=sid).updated_at

    sessions.step_advance(checkpoint=checkpoint)

    stored = WorkflowSession.objects.get(session_id=sid)
    assert (stored.revision, stored.current_entry_index, stored.current_step_id) == (
        1,
        1,
        "part_a",
    )
    assert (session.revision, session.current_step_id) == (1, "part_a")
    assert earlier < stored.updated_at <= earlier + timedelta(minutes=1)
    assert session.updated_at == stored.updated_at


def test_session_head_reads_one_row_and_agrees_with_session_resolve(
    project, agent, catalog, django_assert_num_queries
):
    below = start(project, agent, catalog)
    start(project, agent, catalog, job="nested", workflow="only")

    for session_id in (None, below):
        with django_assert_num_queries(1):
            head = session_head(project=project, agent=agent, session_id=session_id)
        full = session_resolve(project=project, agent=agent, session_id=session_id)
        fields = [
            "pk",
            "session_id",
            "project_id",
            "agent_id",
            "job_name",
            "workflow_name",
            "status",
            "current_entry_index",
            "current_step_id",
            "revision",
        ]
        assert [getattr(head, f) for f in fields] == [getattr(full, f) for f in fields]
    # Anything else still loads on demand.
    assert head.goal == "queries"


def test_session_head_refuses_what_session_resolve_refuses(project, agent, catalog):
    other_agent = agent_claim(project=project, holder=ProcessHolder.for_this_process())
    done = start(project, agent, catalog)
    sessions.session_abort(project=project, agent=agent, explanation="x")

    cases = [
        (other_agent, None),  # no active session at all
        (agent, "nope"),  # an unknown id
        (agent, done),  # a session that is over
    ]
    for who, session_id in cases:
        with pytest.raises(NotFound) as by_resolve:
            session_resolve(project=project, agent=who, session_id=session_id)
        with pytest.raises(NotFound) as by_head:
            session_head(project=project, agent=who, session_id=session_id)
        assert str(by_head.value) == str(by_resolve.value)


def test_stack_is_per_agent_bottom_to_top(project, agent, catalog, django_assert_num_queries):
    other = agent_claim(project=project, holder=ProcessHolder.for_this_process())
    start(project, agent, catalog)
    start(project, other, catalog, job="nested", workflow="only")
    start(project, agent, catalog, job="nested", workflow="only")

    with django_assert_num_queries(1):
        stack = stack_for_agent(agent=agent)

    assert stack == (StackItem("demo", "main", "gather"), StackItem("nested", "only", "first"))
    assert stack_for_agent(agent=other) == (StackItem("nested", "only", "first"),)
