"""``workflows.rows``, the written-out statements of the transition path: what they read and
write must be what the ORM reads and writes for the same rows, on SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from workflows import rows
from workflows.models import Event, Job, Step, StepRun, WorkflowSession
from workflows.selectors import session_resolve, workflow_entries
from workflows.services import sessions

pytestmark = pytest.mark.django_db


def started(project, agent, catalog) -> WorkflowSession:
    return sessions.session_start(
        project=project,
        agent=agent,
        catalog=catalog.view(),
        job_name="demo",
        workflow_name="main",
        goal="rows",
        instance_id="acme",
    ).begun.session


def as_stored(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


def test_a_selected_row_reads_as_the_orm_reads_it(project, agent, catalog):
    session = started(project, agent, catalog)
    WorkflowSession.objects.filter(pk=session.pk).update(abort_untold=True)

    (found,) = rows.select_models(WorkflowSession, where="id = %s", params=[session.pk])

    orm = WorkflowSession.objects.get(pk=session.pk)
    assert as_stored(found) == as_stored(orm)
    # Converted as the ORM converts: an aware datetime, a real boolean.
    assert timezone.is_aware(found.started_at)
    assert found.abort_untold is True
    assert found._state.db == "default"
    assert not found._state.adding


def test_json_columns_come_back_decoded(project, agent, catalog):
    session = started(project, agent, catalog)
    run = StepRun.objects.filter(session=session).first()
    StepRun.objects.filter(pk=run.pk).update(outputs={"notes": ["a.md", "b.md"]})

    (found,) = rows.select_models(StepRun, where="id = %s", params=[run.pk])

    assert found.outputs == {"notes": ["a.md", "b.md"]}
    assert found.input_values == StepRun.objects.get(pk=run.pk).input_values


def test_fields_not_selected_are_deferred_and_load_on_access(project, agent, catalog):
    session = started(project, agent, catalog)

    found = rows.select_model(
        WorkflowSession, where="id = %s", params=[session.pk], fields=("id", "session_id")
    )

    assert found is not None
    assert found.get_deferred_fields() >= {"goal", "instance_id"}
    with CaptureQueriesContext(connection) as queries:
        assert found.goal == "rows"
    assert len(queries) == 1


def test_order_limit_and_no_match(project, agent, catalog):
    first, second = started(project, agent, catalog), started(project, agent, catalog)

    newest = rows.select_model(
        WorkflowSession, where="agent_id = %s", params=[agent.pk], order_by="id DESC"
    )
    nothing = rows.select_model(WorkflowSession, where="session_id = %s", params=["nope"])

    assert newest is not None
    assert newest.pk == second.pk != first.pk
    assert nothing is None


def test_a_joined_column_is_annotated_on_each_instance(project, agent, catalog):
    session = started(project, agent, catalog)

    entries = workflow_entries(workflow=session.workflow)

    assert [[step.step_id for step in entry] for entry in entries] == [
        ["gather"],
        ["part_a", "part_b"],
        ["wrap_up"],
    ]
    assert [step.entry_index for entry in entries for step in entry] == [0, 1, 1, 2]
    orm = {step.pk: as_stored(step) for step in Step.objects.filter(job=session.job_id)}
    assert all(as_stored(step) == orm[step.pk] for entry in entries for step in entry)


def test_an_unknown_field_is_refused():
    with pytest.raises(ValueError, match="no concrete field"):
        rows.select_models(Job, where="id = %s", params=[1], fields=("nope",))
    with pytest.raises(ValueError, match="not a column of its own"):
        rows.update_where(Job, values={"workflows": 1}, where="id = %s", params=[1])


def test_inserted_rows_equal_what_the_orm_would_write(project, agent, catalog):
    session = started(project, agent, catalog)
    mine = Event(
        project_id=project.pk,
        session=session,
        agent=agent,
        kind=Event.Kind.SESSION_STARTED,
        payload={"job": "demo", "nested": {"list": [1, 2]}},
    )
    theirs = Event(
        project_id=project.pk,
        session=session,
        agent=agent,
        kind=Event.Kind.SESSION_STARTED,
        payload={"job": "demo", "nested": {"list": [1, 2]}},
        created_at=mine.created_at,
    )

    rows.insert_models([mine])
    theirs.save(force_insert=True)

    assert mine.pk is not None
    assert mine.pk != theirs.pk
    assert not mine._state.adding
    stored_mine, stored_theirs = Event.objects.get(pk=mine.pk), Event.objects.get(pk=theirs.pk)
    assert model_to_dict(stored_mine, exclude=["id"]) == model_to_dict(
        stored_theirs, exclude=["id"]
    )


def test_many_rows_go_in_batches_and_each_gets_its_own_key(project):
    # More rows than one SQLite statement may carry parameters for (999 / 6 columns).
    events = [
        Event(project_id=project.pk, kind=Event.Kind.CATALOG_SYNCED, payload={"n": i})
        for i in range(400)
    ]

    rows.insert_models(events)

    stored = dict(Event.objects.filter(kind="catalog_synced").values_list("pk", "payload"))
    assert len({event.pk for event in events}) == 400
    assert all(stored[event.pk] == {"n": i} for i, event in enumerate(events))


def test_an_update_prepares_values_and_compares_and_sets(project, agent, catalog):
    session = started(project, agent, catalog)
    later = timezone.now() + timedelta(minutes=5)

    changed = rows.update_where(
        WorkflowSession,
        values={"goal": "moved", "completed_at": later, "status": "completed"},
        extra="revision = revision + 1",
        where="id = %s AND revision = %s",
        params=[session.pk, session.revision],
    )
    again = rows.update_where(
        WorkflowSession,
        values={"goal": "lost"},
        where="id = %s AND revision = %s",
        params=[session.pk, session.revision],
    )

    stored = WorkflowSession.objects.get(pk=session.pk)
    assert (changed, again) == (1, 0)
    assert (stored.goal, stored.status, stored.revision) == ("moved", "completed", 1)
    assert stored.completed_at == later
    run = StepRun.objects.filter(session=session).first()
    rows.update_where(
        StepRun, values={"outputs": {"x": ["y.md"]}}, where="id = %s", params=[run.pk]
    )
    assert StepRun.objects.get(pk=run.pk).outputs == {"x": ["y.md"]}


def test_an_update_answers_with_the_changed_rows_read_as_the_orm_reads_them(
    project, agent, catalog
):
    session = started(project, agent, catalog)
    run = StepRun.objects.get(session=session)
    done = timezone.now() + timedelta(minutes=1)

    with CaptureQueriesContext(connection) as statements:
        found = rows.update_returning(
            StepRun,
            values={"status": "completed", "completed_at": done, "outputs": {"a": "a.md"}},
            where="session_id = %s AND status = %s",
            params=[session.pk, "active"],
            returning=("entry_index", "started_at", "completed_at", "outputs"),
        )
    again = rows.update_returning(
        StepRun,
        values={"status": "completed"},
        where="session_id = %s AND status = %s",
        params=[session.pk, "active"],
        returning=("entry_index",),
    )

    stored = StepRun.objects.get(pk=run.pk)
    assert len(statements) == 1
    assert found == [
        {
            "entry_index": stored.entry_index,
            "started_at": stored.started_at,  # an aware datetime on SQLite too
            "completed_at": done,
            "outputs": {"a": "a.md"},  # decoded, as the field reads it
        }
    ]
    assert found[0]["started_at"].tzinfo is not None
    assert again == []


def test_related_rows_come_in_the_same_query(project, agent, catalog):
    session = started(project, agent, catalog)
    created = Job.objects.get(pk=session.job_id).created_at

    with CaptureQueriesContext(connection) as queries:
        found = rows.select_model(
            WorkflowSession,
            where="workflows_workflowsession.id = %s",
            params=[session.pk],
            related={"job": ("id", "name", "job_dir", "created_at"), "workflow": None},
        )
        assert found is not None
        assert (found.job.name, found.workflow.name) == ("demo", "main")
        assert as_stored(found.workflow) == as_stored(session.workflow)
        assert found.job.created_at == created
    assert len(queries) == 1
    assert "definition" in found.job.get_deferred_fields()
    with pytest.raises(ValueError, match="not a required foreign key"):
        rows.select_models(WorkflowSession, where="1 = 1", params=[], related={"parent": None})


def test_resolving_a_hand_in_reads_the_session_with_its_job_and_workflow_at_once(
    project, agent, catalog
):
    started(project, agent, catalog)

    with CaptureQueriesContext(connection) as queries:
        session = session_resolve(project=project, agent=agent, session_id=None)
        assert (session.job.job_dir, session.workflow.name, session.agent) == (
            session.job.job_dir,
            "main",
            agent,
        )
    assert len(queries) == 1
