"""Session services on a real database: transitions, the stack, targeting, atomicity, races."""

from __future__ import annotations

import pytest

from tests.support.driving import step_finish
from tests.support.factories import make_user
from workflows.dialects import deepwork
from workflows.errors import Conflict, InvalidInput, JobBroken, NotFound
from workflows.models import Event, StepRun, WorkflowSession
from workflows.results import WorkflowCompleted
from workflows.schemas import StepStatus
from workflows.services import sessions
from workflows.services.agents import ProcessHolder, agent_claim

pytestmark = pytest.mark.django_db


def start(project, agent, catalog, job="demo", workflow="main", **kwargs):
    return deepwork.start_workflow(
        project=project,
        agent=agent,
        catalog=catalog.view(),
        job_name=job,
        workflow_name=workflow,
        goal=kwargs.pop("goal", "test goal"),
        **kwargs,
    )


def finish(project, agent, outputs, **kwargs):
    return step_finish(project=project, agent=agent, outputs=outputs, **kwargs)


def test_start_returns_first_step_with_every_field(project, agent, catalog):
    response = start(project, agent, catalog, instance_id="acme")

    step = response.begin_step
    assert step.step_id == "gather"
    assert len(step.session_id) == 8
    assert step.job_dir.endswith("/.deepwork/jobs/demo")
    assert [o.model_dump() for o in step.step_expected_outputs] == [
        {
            "name": "notes.md",
            "type": "file",
            "description": "Notes",
            "required": True,
            "syntax_for_finished_step_tool": "filepath",
        },
        {
            "name": "extras",
            "type": "files",
            "description": "Extra files",
            "required": False,
            "syntax_for_finished_step_tool": "array of filepaths for all individual files",
        },
    ]
    assert step.step_instructions == "# gather\n\nDo the gather work.\n"
    assert step.common_job_info == "Shared context for every step.\n"
    assert [e.model_dump() for e in response.stack] == [{"workflow": "demo/main", "step": "gather"}]
    session = WorkflowSession.objects.get(session_id=step.session_id)
    assert session.instance_id == "acme"
    assert session.status == WorkflowSession.Status.ACTIVE
    assert list(session.events.values_list("kind", flat=True).order_by("id")) == [
        Event.Kind.SESSION_STARTED,
        Event.Kind.STEP_STARTED,
    ]


def test_start_accepts_the_yaml_name_as_well_as_the_folder(project_dir, db):
    from tests.conftest import NESTED_JOB
    from tests.support.factories import write_job
    from workflows.services.catalog import Catalog
    from workflows.services.projects import project_ensure

    write_job(project_dir, "folder_differs", NESTED_JOB, ["first", "second"])
    project = project_ensure(root_path=project_dir)
    agent = agent_claim(project=project, holder=ProcessHolder.for_this_process())
    catalog = Catalog(project)

    by_yaml = start(project, agent, catalog, job="nested", workflow="only")
    by_folder = start(project, agent, catalog, job="folder_differs", workflow="only")

    assert by_yaml.stack[0].workflow == "nested/only"
    assert by_folder.stack[1].workflow == "folder_differs/only"


def test_unknown_job_and_workflow_name_the_problem(project, agent, catalog):
    with pytest.raises(NotFound, match=r"^Job not found: nope$"):
        start(project, agent, catalog, job="nope")
    with pytest.raises(NotFound) as excinfo:
        start(project, agent, catalog, workflow="zzz")
    assert str(excinfo.value) == (
        "Workflow 'zzz' not found in job 'demo'. Available workflows: main, quick"
    )
    with pytest.raises(NotFound, match="Job not found: ../demo"):
        start(project, agent, catalog, job="../demo")
    assert not WorkflowSession.objects.exists()


def test_single_workflow_job_is_selected_whatever_the_name(project, agent, catalog):
    response = start(project, agent, catalog, job="nested", workflow="anything")
    assert response.stack[0].workflow == "nested/only"


def test_full_run_through_a_concurrent_entry(project, agent, catalog):
    start(project, agent, catalog)

    after_gather = finish(project, agent, {"notes.md": "notes.md"}, notes="gathered")
    assert after_gather.status == StepStatus.NEXT_STEP
    begin = after_gather.begin_step
    assert begin.step_id == "part_a"
    # Every member of the concurrent entry is announced, with its outputs and instructions.
    assert [o.name for o in begin.step_expected_outputs] == ["a.md", "b.md"]
    assert begin.step_instructions.startswith(
        "# part_a\n\nDo the part_a work.\n\n\n**CONCURRENT STEPS**: This entry has 2 steps that "
        "can run in parallel: part_a, part_b\nUse the Task tool to execute them concurrently."
    )
    assert "## Instructions for concurrent step 'part_b'" in begin.step_instructions

    # Both members are validated: leaving out part_b's output fails.
    with pytest.raises(InvalidInput, match=r"Missing required outputs: b.md\."):
        finish(project, agent, {"a.md": "a.md"})

    after_parts = finish(project, agent, {"a.md": "a.md", "b.md": "b.md"})
    assert after_parts.begin_step.step_id == "wrap_up"
    assert after_parts.begin_step.step_reviews[0].run_each == "summary.md"

    done = finish(project, agent, {"summary.md": "summary.md"})
    assert done.status == StepStatus.WORKFLOW_COMPLETE
    assert done.summary == "Workflow 'main' completed successfully!"
    assert done.all_outputs == {
        "notes.md": "notes.md",
        "a.md": "a.md",
        "b.md": "b.md",
        "summary.md": "summary.md",
    }
    assert done.stack == []
    assert done.begin_step is None
    assert done.feedback is None
    assert done.failed_reviews is None

    session = WorkflowSession.objects.get()
    assert session.status == WorkflowSession.Status.COMPLETED
    assert session.completed_at is not None
    runs = {run.step_id: run for run in session.runs.all()}
    assert runs["part_b"].outputs == {"b.md": "b.md"}
    assert runs["gather"].notes == "gathered"
    assert all(run.status == StepRun.Status.COMPLETED for run in runs.values())


def test_nested_workflow_pops_back_to_the_parent(project, agent, catalog):
    outer = start(project, agent, catalog)
    inner = start(project, agent, catalog, job="nested", workflow="only")
    assert [e.workflow for e in inner.stack] == ["demo/main", "nested/only"]
    assert WorkflowSession.objects.get(
        session_id=inner.begin_step.session_id
    ).parent.session_id == (outer.begin_step.session_id)

    finish(project, agent, {"first.md": "first.md"})
    done = finish(project, agent, {})
    assert done.status == StepStatus.WORKFLOW_COMPLETE
    assert [e.model_dump() for e in done.stack] == [{"workflow": "demo/main", "step": "gather"}]

    resumed = finish(project, agent, {"notes.md": "notes.md"})
    assert resumed.begin_step.session_id == outer.begin_step.session_id


def test_session_id_targets_a_session_below_the_top(project, agent, catalog):
    below = start(project, agent, catalog).begin_step.session_id
    start(project, agent, catalog, job="nested", workflow="only")

    response = finish(project, agent, {"notes.md": "notes.md"}, session_id=below)

    assert response.begin_step.session_id == below
    assert response.begin_step.step_id == "part_a"
    assert [e.step for e in response.stack] == ["part_a", "first"]


def test_abort_resumes_the_parent_and_records_why(project, agent, catalog):
    start(project, agent, catalog)
    inner = start(project, agent, catalog, job="nested", workflow="only")

    response = deepwork.abort_workflow(project=project, agent=agent, explanation="stop nested")

    assert response.model_dump() == {
        "aborted_workflow": "nested/only",
        "aborted_step": "first",
        "explanation": "stop nested",
        "stack": [{"workflow": "demo/main", "step": "gather"}],
        "resumed_workflow": "demo/main",
        "resumed_step": "gather",
    }
    session = WorkflowSession.objects.get(session_id=inner.begin_step.session_id)
    assert session.status == WorkflowSession.Status.ABORTED
    assert session.abort_reason == "stop nested"
    assert session.runs.get().status == StepRun.Status.ABORTED


def test_a_persons_reason_ending_in_a_full_stop_is_told_with_one(project, agent, catalog):
    sid = start(project, agent, catalog).begin_step.session_id
    sessions.session_abort(
        project=project,
        agent=agent,
        explanation="The customer cancelled.",
        session_id=sid,
        by=make_user(username="alice"),
    )
    with pytest.raises(sessions.AbortedByPerson) as told:
        finish(project, agent, {"notes.md": "notes.md"})
    assert "Their reason: The customer cancelled. Nothing was handed in." in told.value.message
    assert ".." not in told.value.message


def test_no_active_session_and_unknown_session_ids(project, agent, catalog):
    with pytest.raises(NotFound) as excinfo:
        finish(project, agent, {})
    assert str(excinfo.value) == (
        "No active workflow session. Use start_workflow to begin a workflow."
    )
    with pytest.raises(NotFound, match=r"^Session 'nope' not found in active stack$"):
        sessions.session_abort(project=project, agent=agent, explanation="x", session_id="nope")


def test_finishing_a_completed_session_is_refused_and_changes_nothing(project, agent, catalog):
    sid = start(project, agent, catalog, job="nested", workflow="only").begin_step.session_id
    finish(project, agent, {"first.md": "first.md"})
    finish(project, agent, {})
    events_before = Event.objects.count()

    with pytest.raises(NotFound, match=f"Session '{sid}' is completed"):
        finish(project, agent, {}, session_id=sid)
    assert Event.objects.count() == events_before


def test_missing_next_instructions_leaves_no_half_state(project, agent, catalog, demo_project):
    sid = start(project, agent, catalog).begin_step.session_id
    (demo_project / ".deepwork/jobs/demo/steps/part_b.md").unlink()
    revision_before = WorkflowSession.objects.get(session_id=sid).revision

    with pytest.raises(JobBroken) as refused:
        finish(project, agent, {"notes.md": "notes.md"})
    # The 0.9.1 text first, then what the agent can do about a session that cannot go on.
    assert refused.value.message == (
        "Instructions file not found: steps/part_b.md. This session cannot begin that step. "
        "Put the file back in place and call again, or call abort_workflow, fix the job and "
        "start the workflow again: this session keeps the job as it was when it started, so "
        "an edit of job.yml does not reach it."
    )

    session = WorkflowSession.objects.get(session_id=sid)
    assert (session.current_step_id, session.revision) == ("gather", revision_before)
    assert list(session.runs.values_list("step_id", "status")) == [("gather", "active")]


def test_missing_first_instructions_creates_no_session(project, agent, catalog, demo_project):
    catalog.view()  # loaded while the file was there
    (demo_project / ".deepwork/jobs/demo/steps/gather.md").unlink()
    with pytest.raises(JobBroken, match="^Instructions file not found: steps/gather.md$"):
        start(project, agent, catalog)
    assert not WorkflowSession.objects.exists()
    assert not Event.objects.filter(kind=Event.Kind.SESSION_STARTED).exists()


def test_escaping_instructions_file_is_refused(project, agent, catalog, demo_project):
    job_yml = demo_project / ".deepwork/jobs/nested/job.yml"
    job_yml.write_text(job_yml.read_text().replace("steps/first.md", "../../../../etc/hostname"))
    with pytest.raises(JobBroken) as refused:
        start(project, agent, catalog, job="nested", workflow="only")
    assert refused.value.message == (
        "Failed to parse job 'nested': Step 'first' has instructions_file "
        "'../../../../etc/hostname', which is outside the job folder"
    )


def test_an_escaping_instructions_file_named_after_loading_is_refused_at_the_start(
    project, agent, catalog, demo_project
):
    catalog.view()
    (demo_project / ".deepwork/jobs/nested/steps/first.md").unlink()
    (demo_project / ".deepwork/jobs/nested/steps/first.md").symlink_to("/etc/hostname")
    with pytest.raises(JobBroken, match="is outside the job folder"):
        start(project, agent, catalog, job="nested", workflow="only")


def test_session_keeps_its_definition_when_job_yml_changes(project, agent, catalog, demo_project):
    start(project, agent, catalog, job="nested", workflow="only")
    job_yml = demo_project / ".deepwork/jobs/nested/job.yml"
    job_yml.write_text(
        job_yml.read_text().replace("first.md: {type: file", "renamed.md: {type: file")
    )
    catalog.view()  # the catalog picks the edit up: a new revision becomes current

    response = finish(project, agent, {"first.md": "first.md"})

    assert response.begin_step.step_id == "second"
    new_run = start(project, agent, catalog, job="nested", workflow="only")
    assert [o.name for o in new_run.begin_step.step_expected_outputs] == ["renamed.md"]


def test_lost_race_changes_nothing_and_names_the_current_step(project, agent, catalog):
    sid = start(project, agent, catalog).begin_step.session_id

    def another_caller_advances_first(checkpoint):
        finish(project, agent, {"notes.md": "notes.md"})
        return None  # the gate lets this hand-in through, to a session that has moved on

    with pytest.raises(Conflict) as excinfo:
        step_finish(
            project=project,
            agent=agent,
            outputs={"notes.md": "notes.md"},
            quality_gate=another_caller_advances_first,
        )
    assert str(excinfo.value) == (
        f"Session '{sid}' moved on while this call ran: its current step is now 'part_a'; "
        "nothing was changed"
    )
    session = WorkflowSession.objects.get(session_id=sid)
    assert (session.revision, session.current_step_id) == (1, "part_a")
    assert Event.objects.filter(kind=Event.Kind.STEP_FINISHED).count() == 1


def test_go_to_step_discards_later_progress(project, agent, catalog):
    start(project, agent, catalog)
    finish(project, agent, {"notes.md": "notes.md"})
    finish(project, agent, {"a.md": "a.md", "b.md": "b.md"})

    response = deepwork.go_to_step(project=project, agent=agent, step_id="part_b")

    assert response.begin_step.step_id == "part_a"
    assert response.invalidated_steps == ["part_a", "part_b", "wrap_up"]
    assert [e.step for e in response.stack] == ["part_a"]
    session = WorkflowSession.objects.get()
    assert sorted(
        session.runs.filter(status=StepRun.Status.ACTIVE).values_list("step_id", flat=True)
    ) == ["part_a", "part_b"]
    assert session.runs.filter(status=StepRun.Status.COMPLETED).get().step_id == "gather"


def test_go_to_step_refuses_unknown_and_forward_steps(project, agent, catalog):
    start(project, agent, catalog)
    with pytest.raises(NotFound) as excinfo:
        sessions.session_go_to_step(project=project, agent=agent, step_id="nope")
    assert str(excinfo.value) == (
        "Step 'nope' not found in workflow 'main'. Available steps: gather, part_a, part_b, wrap_up"
    )
    with pytest.raises(InvalidInput) as excinfo:
        sessions.session_go_to_step(project=project, agent=agent, step_id="wrap_up")
    assert str(excinfo.value) == (
        "Cannot go forward to step 'wrap_up' (entry index 2 > current 0). "
        "Use finished_step to advance forward."
    )


def test_stacks_belong_to_their_agent(project, catalog):
    first = agent_claim(project=project, holder=ProcessHolder.for_this_process())
    second = agent_claim(project=project, holder=ProcessHolder.for_this_process())
    assert first.pk != second.pk

    start(project, first, catalog)
    with pytest.raises(NotFound, match="No active workflow session"):
        finish(project, second, {"notes.md": "notes.md"})


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        ({"notes.md": "../outside.md"}, "resolves outside the project root"),
        ({"notes.md": "/etc/hostname"}, "absolute paths outside the project root"),
        ({"notes.md": ""}, "the path is empty"),
        ({"notes.md": "notes.md", "extras": "x"}, "must be a list of paths, got str"),
        ({"notes.md": "notes.md", "bogus": "x"}, "Unknown output names: bogus"),
    ],
)
def test_invalid_outputs_change_nothing(project, agent, catalog, outputs, message):
    sid = start(project, agent, catalog).begin_step.session_id
    before = (Event.objects.count(), WorkflowSession.objects.get(session_id=sid).revision)

    with pytest.raises(InvalidInput, match=message):
        finish(project, agent, outputs)

    assert (Event.objects.count(), WorkflowSession.objects.get(session_id=sid).revision) == before


def test_optional_files_output_may_be_empty_or_listed(project, agent, catalog):
    start(project, agent, catalog)
    response = finish(
        project, agent, {"notes.md": "notes.md", "extras": ["extra1.md", "extra2.md"]}
    )
    assert response.status == StepStatus.NEXT_STEP
    run = StepRun.objects.get(step_id="gather")
    assert run.outputs == {"notes.md": "notes.md", "extras": ["extra1.md", "extra2.md"]}


# One way to write an event (workflows.events): validated payloads, one shape per kind, and the
# writes that must commit together with their event.


def test_every_event_kind_has_one_payload_shape_and_unknown_keys_are_refused(project):
    from pydantic import ValidationError

    from workflows import events

    assert set(events.PAYLOADS) == set(Event.Kind.values)
    with pytest.raises(ValidationError):
        events.event_record(
            kind=Event.Kind.SESSION_ABORTED,
            project=project,
            payload={"step_id": "gather", "explanation": "x", "whom": "nobody"},
        )
    with pytest.raises(ValidationError):
        events.event_record(
            kind=Event.Kind.AGENT_CONNECTED, project=project, payload={"agent_id": "a"}
        )
    assert not Event.objects.exists()


def test_review_rounds_of_both_kinds_store_all_five_keys_and_by_as_a_username(project):
    from pydantic import ValidationError

    from workflows import events

    person = make_user(username="olga")
    skipped = events.event_record(
        kind=Event.Kind.REVIEW_PASSED,
        project=project,
        by=person,
        payload=events.ReviewRound(
            step_ids=["part_a", "part_b"], attempt=0, reviews=0, failed=0, override_reason="fine"
        ),
    )
    failed = events.event_record(
        kind=Event.Kind.REVIEW_FAILED,
        project=project,
        payload={
            "step_ids": ["wrap_up"],
            "attempt": 2,
            "reviews": 3,
            "failed": 1,
            "override_reason": None,
        },
    )
    skipped.refresh_from_db()
    failed.refresh_from_db()
    assert skipped.payload == {
        "step_ids": ["part_a", "part_b"],
        "attempt": 0,
        "reviews": 0,
        "failed": 0,
        "override_reason": "fine",
        "by": "olga",
    }
    # No reason is stored as null, not left out: one shape for every round.
    assert failed.payload == {
        "step_ids": ["wrap_up"],
        "attempt": 2,
        "reviews": 3,
        "failed": 1,
        "override_reason": None,
    }

    # The shapes the two kinds had before (a reason for one step; counts without the steps)
    # are refused, as is a round of no steps.
    for kind, payload in [
        (Event.Kind.REVIEW_PASSED, {"step_id": "wrap_up", "override_reason": "fine"}),
        (Event.Kind.REVIEW_FAILED, {"attempt": 1, "reviews": 1, "failed": 1}),
        (
            Event.Kind.REVIEW_PASSED,
            {"step_ids": ["wrap_up"], "attempt": 1, "reviews": 1, "failed": 0},
        ),
        (
            Event.Kind.REVIEW_FAILED,
            {"step_ids": [], "attempt": 1, "reviews": 1, "failed": 1, "override_reason": None},
        ),
    ]:
        with pytest.raises(ValidationError):
            events.event_record(kind=kind, project=project, payload=payload)
    assert Event.objects.count() == 2


def test_a_new_agent_and_its_connected_event_commit_together(project, monkeypatch):
    from workflows import events
    from workflows.models import Agent
    from workflows.services.agents import agent_ensure

    def broken(**_):
        raise RuntimeError("the outbox write failed")

    monkeypatch.setattr(events, "event_record", broken)
    with pytest.raises(RuntimeError):
        agent_ensure(project=project, agent_id="named")
    assert not Agent.objects.filter(agent_id="named").exists()


# Transactional: the gated finish runs the services as the MCP tool does, on the database
# thread with stale connections closed around it, which a test's open transaction cannot survive.
@pytest.mark.django_db(transaction=True)
def test_an_override_is_consumed_with_its_event_and_the_advance_or_not_at_all(
    project, agent, catalog, monkeypatch
):
    from asgiref.sync import async_to_sync

    from reviews.gate import GateConfig
    from reviews.models import HumanDecision
    from reviews.rulings import review_override
    from reviews.services import step_finish_gated
    from workflows import events

    sid = start(project, agent, catalog).begin_step.session_id
    finish(project, agent, {"notes.md": "notes.md"})
    finish(project, agent, {"a.md": "a.md", "b.md": "b.md"})
    run = StepRun.objects.get(step_id="wrap_up", status="active")
    review_override(step_run=run, reason="fine", by=make_user(username="ed"), via="dashboard")
    real = events.event_record

    def failing_delivery(**kwargs):
        if kwargs["kind"] == Event.Kind.OVERRIDE_DELIVERED:
            raise RuntimeError("the outbox write failed")
        return real(**kwargs)

    monkeypatch.setattr(events, "event_record", failing_delivery)

    def hand_in():
        # The pending override settles the hand-in, so no reviewer ever runs.
        return async_to_sync(step_finish_gated)(
            project=project,
            agent=agent,
            gate=GateConfig(),
            outputs={"summary.md": "summary.md"},
            session_id=sid,
        )

    with pytest.raises(RuntimeError):
        hand_in()
    session = WorkflowSession.objects.get(session_id=sid)
    assert (session.status, session.current_step_id) == ("active", "wrap_up")
    assert HumanDecision.objects.get().consumed_at is None
    assert not Event.objects.filter(kind=Event.Kind.SESSION_COMPLETED).exists()

    monkeypatch.setattr(events, "event_record", real)
    assert isinstance(hand_in(), WorkflowCompleted)
    assert HumanDecision.objects.get().consumed_at is not None
    assert Event.objects.filter(kind=Event.Kind.OVERRIDE_DELIVERED).count() == 1


def test_a_persons_abort_reason_ending_in_a_full_stop_is_told_with_one(project, agent, catalog):
    sid = start(project, agent, catalog).begin_step.session_id
    alice = make_user(username="alice")
    sessions.session_abort(
        project=project, agent=agent, explanation="Wrong ticket.", session_id=sid, by=alice
    )
    with pytest.raises(NotFound) as excinfo:
        finish(project, agent, {"notes.md": "notes.md"})
    told = str(excinfo.value)
    assert "Their reason: Wrong ticket. " in told
    assert ".." not in told
