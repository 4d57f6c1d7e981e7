"""Files changed per DeepWork step run, on real databases and in real temporary git repositories
and plain folders: snapshots at each step's start, comparisons at its end, on the worker thread.
"""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from reviews.gate import GateConfig
from tests.reviews.test_gate import GATE_JOB, calls, command_gate
from tests.support.driving import finished_step, step_finish
from tests.support.driving import workflow_start as start
from tests.support.factories import write_job
from tests.support.step_files import git, settle, write
from workflows.dialects import deepwork
from workflows.models import Event, StepRun
from workflows.services import sessions, step_changes
from workflows.services.agents import ProcessHolder, agent_claim
from workflows.services.projects import project_ensure

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _on_the_worker(monkeypatch):
    """The production mode: every look runs on the worker thread, after the commit."""
    monkeypatch.setenv("DEEPWORK_STEP_FILES", "on")


needs_git = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is not installed",
)


def runs(step_id: str) -> list[StepRun]:
    return list(StepRun.objects.filter(step_id=step_id).order_by("id"))


def files_of(run: StepRun) -> dict:
    run.refresh_from_db()
    return step_changes.run_files(run).as_dict()


@pytest.fixture
def git_project(demo_project: Path):
    """The demo project as a git repository, with one file already dirty and one untracked."""
    write(demo_project, ".gitignore", ".deepwork/tmp/\n")
    write(demo_project, "src/app.py", "print('v1')\n")
    write(demo_project, "src/old_name.py", "OLD = 1\n")
    write(demo_project, "doomed.txt", "bye\n")
    write(demo_project, "staged.txt", "s1\n")
    git(demo_project, "init", "-q", "-b", "main")
    git(demo_project, "add", "-A")
    git(demo_project, "commit", "-q", "-m", "initial")
    write(demo_project, "notes.md", "dirty before the workflow started\n")  # tracked, dirty
    write(demo_project, "scratch.txt", "untracked before\n")  # untracked
    project = project_ensure(root_path=demo_project)
    agent = agent_claim(project=project, holder=ProcessHolder.for_this_process())
    return project, agent, demo_project


@needs_git
def test_each_step_records_exactly_what_it_changed_in_a_git_repository(git_project):
    project, agent, root = git_project
    start(project, agent)
    settle()
    (gather,) = runs("gather")
    gather.refresh_from_db()
    assert gather.files_snapshot is not None
    assert gather.files_snapshot["kind"] == "git"
    assert files_of(gather)["status"] == "pending"

    # During `gather`: a commit, a staged change, an unstaged change, an untracked file, a
    # rename and a deletion; the dirty notes.md and untracked scratch.txt are left alone.
    write(root, "src/committed.py", "C = 1\n")
    git(root, "add", "src/committed.py")
    git(root, "commit", "-q", "-m", "during the step")
    write(root, "staged.txt", "s2\n")
    git(root, "add", "staged.txt")
    write(root, "src/app.py", "print('v2')\n")
    write(root, "brand_new.md", "new\n")
    git(root, "mv", "src/old_name.py", "src/new_name.py")
    (root / "doomed.txt").unlink()
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    settle()

    assert files_of(gather) == {
        "status": "recorded",
        "added": ["brand_new.md", "src/committed.py", "src/new_name.py"],
        "modified": ["src/app.py", "staged.txt"],
        "deleted": ["doomed.txt", "src/old_name.py"],
        "warnings": [],
    }
    recorded = Event.objects.get(kind=Event.Kind.STEP_FILES_RECORDED)
    assert recorded.payload == {
        "step_id": "gather",
        "status": "recorded",
        "added": 3,
        "modified": 2,
        "deleted": 2,
        "warnings": 0,
    }
    # The members of the concurrent entry that began share the snapshot `gather` ended on.
    part_a, part_b = runs("part_a")[0], runs("part_b")[0]
    part_a.refresh_from_db()
    part_b.refresh_from_db()
    assert part_a.files_snapshot == part_b.files_snapshot
    assert part_a.files_snapshot["head"] == git(root, "rev-parse", "HEAD").strip()

    # The next entry sees only its own work; a file the previous step changed and this one
    # left alone is not reported again.
    write(root, "a.md", "A by part a\n")
    step_finish(project=project, agent=agent, outputs={"a.md": "a.md", "b.md": "b.md"})
    settle()
    for run in (part_a, part_b):
        assert files_of(run) == {
            "status": "recorded",
            "added": [],
            "modified": ["a.md"],
            "deleted": [],
            "warnings": [],
        }
    (wrap_up,) = runs("wrap_up")
    step_finish(project=project, agent=agent, outputs={"summary.md": "summary.md"})
    settle()
    assert files_of(wrap_up)["status"] == "recorded"
    assert files_of(wrap_up)["added"] == files_of(wrap_up)["modified"] == []


def test_a_plain_folder_is_compared_by_content(project, agent, demo_project):
    start(project, agent)
    settle()
    (gather,) = runs("gather")
    gather.refresh_from_db()
    assert gather.files_snapshot["kind"] == "tree"
    write(demo_project, "notes.md", "rewritten\n")
    write(demo_project, "deep/new.txt", "new\n")
    (demo_project / "extra1.md").unlink()
    (demo_project / "extra2.md").write_text("content of extra2.md\n")  # same bytes: not a change
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    settle()
    assert files_of(gather) == {
        "status": "recorded",
        "added": ["deep/new.txt"],
        "modified": ["notes.md"],
        "deleted": ["extra1.md"],
        "warnings": [],
    }


@needs_git
def test_without_git_on_path_steps_degrade_to_content_snapshots_with_a_warning(
    git_project, monkeypatch, tmp_path
):
    project, agent, root = git_project
    empty = tmp_path / "no-git-here"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    start(project, agent)
    settle()
    write(root, "src/app.py", "print('v3')\n")
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    settle()
    (gather,) = runs("gather")
    found = files_of(gather)
    assert (found["status"], found["modified"], found["added"]) == ("recorded", ["src/app.py"], [])
    assert found["warnings"] == [
        "git is not installed (no git executable on PATH); the project's files were "
        "snapshotted without git"
    ]
    assert runs("part_a")[0].status == StepRun.Status.ACTIVE  # the transition went through


def test_a_missing_start_snapshot_makes_the_files_unknown_with_a_warning(project, agent):
    start(project, agent)
    settle()
    # As if the process that started the step had stopped before its snapshot was stored.
    StepRun.objects.filter(step_id="gather").update(files_snapshot=None)
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    settle()
    (gather,) = runs("gather")
    assert files_of(gather) == {
        "status": "unknown",
        "added": [],
        "modified": [],
        "deleted": [],
        "warnings": [step_changes.NO_START_SNAPSHOT],
    }
    assert Event.objects.get(kind=Event.Kind.STEP_FILES_RECORDED).payload["status"] == "unknown"


def test_a_broken_start_snapshot_is_unknown_by_name_and_the_next_step_still_starts(project, agent):
    start(project, agent)
    settle()
    StepRun.objects.filter(step_id="gather").update(files_snapshot={"version": 9})
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    settle()
    (gather,) = runs("gather")
    assert files_of(gather)["warnings"] == [
        "the step's start snapshot could not be read (snapshot.version must be 1, not 9), so "
        "its changes are unknown"
    ]
    part_a = runs("part_a")[0]
    part_a.refresh_from_db()
    assert part_a.files_snapshot["kind"] == "tree"


def test_a_finished_run_left_uncompared_by_a_stopped_server_reads_unknown(project, agent):
    start(project, agent)
    settle()
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    settle()
    # The state a server that stopped between the commit and its look leaves behind.
    StepRun.objects.filter(step_id="gather").update(
        files_status=StepRun.FilesStatus.PENDING, files_changed=None, files_warnings=[]
    )
    (gather,) = runs("gather")
    assert files_of(gather)["status"] == "pending"
    StepRun.objects.filter(step_id="gather").update(
        completed_at=timezone.now() - step_changes.STALE_AFTER - timedelta(seconds=1)
    )
    assert files_of(gather)["status"] == "unknown"
    assert files_of(gather)["warnings"] == [step_changes.STOPPED_BEFORE_COMPARING]
    # A later transition never compares that old run with a project that has moved on.
    step_finish(project=project, agent=agent, outputs={"a.md": "a.md", "b.md": "b.md"})
    settle()
    assert files_of(gather)["status"] == "unknown"


def test_aborted_and_discarded_runs_say_why_their_files_are_unknown(project, agent):
    start(project, agent)
    settle()
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    sessions.session_go_to_step(project=project, agent=agent, step_id="gather")
    settle()
    discarded = runs("part_a")[0]
    assert files_of(discarded)["warnings"] == [
        "the step did not finish (invalidated), so its file changes were not computed"
    ]
    (_, again) = runs("gather")
    again.refresh_from_db()
    assert again.files_snapshot is not None  # go_to_step starts the step with a snapshot


def test_with_step_files_off_nothing_is_looked_at(project, agent, monkeypatch):
    monkeypatch.setenv("DEEPWORK_STEP_FILES", "off")
    start(project, agent)
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    settle()
    (gather,) = runs("gather")
    gather.refresh_from_db()
    assert gather.files_snapshot is None
    assert not Event.objects.filter(kind=Event.Kind.STEP_FILES_RECORDED).exists()


@pytest.fixture
def gated_git(project_dir: Path):
    write_job(project_dir, "gated", GATE_JOB, ["draft", "pages", "final"])
    write(project_dir, "draft.md", "DRAFT BODY\n")
    write(project_dir, "page0.md", "page 0\n")
    write(project_dir, "final.md", "FINAL BODY\n")
    git(project_dir, "init", "-q", "-b", "main")
    git(project_dir, "add", "-A")
    git(project_dir, "commit", "-q", "-m", "initial")
    project = project_ensure(root_path=project_dir)
    agent = agent_claim(project=project, holder=ProcessHolder.for_this_process())
    start(project, agent, job="gated")
    settle()
    return project, agent, project_dir


@needs_git
async def test_a_reviewed_step_gives_the_reviewer_its_files_and_keeps_that_record(
    gated_git, monkeypatch, tmp_path
):
    project, agent, root = gated_git
    log = tmp_path / "reviews"
    monkeypatch.setenv("FAKE_REVIEW_LOG", str(log))
    monkeypatch.setenv("FAKE_REVIEW", "pass")
    write(root, "draft.md", "DRAFT BODY, longer\n")
    write(root, "research/source.txt", "a source\n")
    await finished_step(
        project=project, agent=agent, gate=command_gate(), outputs={"draft.md": "draft.md"}
    )
    prompt = calls(log)[-1]["prompt"]
    assert (
        "==================== BEGIN FILES CHANGED ====================\n\n"
        "Files this step changed in the project since it started (A added, M modified, "
        "D deleted). Read them as needed:\nA research/source.txt\nM draft.md\n\n"
        "==================== END FILES CHANGED ===================="
    ) in prompt
    await sync_to_async(settle)()
    draft = (await sync_to_async(runs)("draft"))[0]
    found = await sync_to_async(files_of)(draft)
    assert (found["added"], found["modified"]) == (["research/source.txt"], ["draft.md"])
    # The next step starts where the reviewed look ended: its first change is its own only.
    write(root, "page0.md", "page 0, edited\n")
    await finished_step(
        project=project, agent=agent, gate=command_gate(), outputs={"pages": ["page0.md"]}
    )
    prompt = calls(log)[-1]["prompt"]
    assert "M page0.md\n" in prompt
    assert "draft.md\n" not in prompt.split("FILES CHANGED")[1]


@needs_git
async def test_a_failed_review_records_nothing_yet(gated_git, monkeypatch, tmp_path):
    project, agent, root = gated_git
    monkeypatch.setenv("FAKE_REVIEW_LOG", str(tmp_path / "reviews"))
    monkeypatch.setenv("FAKE_REVIEW", "fail")
    write(root, "draft.md", "DRAFT BODY, longer\n")
    answer = await finished_step(
        project=project, agent=agent, gate=command_gate(), outputs={"draft.md": "draft.md"}
    )
    assert answer.status == "needs_work"
    draft = (await sync_to_async(runs)("draft"))[0]
    assert (await sync_to_async(files_of)(draft))["status"] == "pending"


@needs_git
async def test_self_review_instructions_list_the_files_changed(gated_git):
    project, agent, root = gated_git
    write(root, "notes/idea.md", "idea\n")
    answer = await finished_step(
        project=project, agent=agent, gate=GateConfig(), outputs={"draft.md": "draft.md"}
    )
    assert answer.status == "needs_work"
    found = list(root.glob(".deepwork/tmp/quality_review_*_draft.md"))
    assert len(found) == 1
    assert "\nA notes/idea.md\n" in found[0].read_text()


def test_another_agents_step_at_the_same_time_is_named_in_a_warning(project, agent):
    from workflows.services.agents import agent_ensure

    start(project, agent)
    other = agent_ensure(project=project, agent_id="helper")
    theirs = start(project, other, job="nested", workflow="only").begin_step.session_id
    settle()
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    settle()
    (gather,) = runs("gather")
    assert files_of(gather)["warnings"] == [
        "other agents worked in this project at the same time, so some of these changes may be "
        f"theirs: helper: {theirs}/first"
    ]
    # The agent's own nested session is its own work: no warning for it.
    start(project, agent, job="nested", workflow="only")
    step_finish(project=project, agent=agent, outputs={"first.md": "first.md"})
    settle()
    assert files_of(runs("first")[1])["warnings"] == [
        "other agents worked in this project at the same time, so some of these changes may be "
        f"theirs: helper: {theirs}/first"
    ]


def test_a_step_another_agent_finished_meanwhile_is_named_and_one_before_is_not(project, agent):
    from workflows.services.agents import agent_ensure

    other = agent_ensure(project=project, agent_id="helper")
    before = start(project, other, job="nested", workflow="only").begin_step.session_id
    step_finish(project=project, agent=other, outputs={"first.md": "first.md"}, session_id=before)
    sessions.session_abort(project=project, agent=other, explanation="done", session_id=before)
    start(project, agent)  # the step starts after `before` ended: that work is not named
    meanwhile = start(project, other, job="nested", workflow="only").begin_step.session_id
    step_finish(
        project=project, agent=other, outputs={"first.md": "first.md"}, session_id=meanwhile
    )
    sessions.session_abort(project=project, agent=other, explanation="done", session_id=meanwhile)
    settle()
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    settle()
    gather = [run for run in runs("gather") if run.session.agent_id == agent.pk]
    assert files_of(gather[0])["warnings"] == [
        "other agents worked in this project at the same time, so some of these changes may be "
        f"theirs: helper: {meanwhile}/first, helper: {meanwhile}/second"
    ]


def test_runs_that_ended_or_never_began_are_not_named(project, agent):
    """Runs sent back by go_to_step, sessions aborted before the step began and DAG steps that
    never reached an agent have no end time, yet no one is working on them."""
    from dag.services import dag_define, dag_execute
    from workflows.services.agents import agent_ensure

    other = agent_ensure(project=project, agent_id="helper")
    theirs = start(project, other).begin_step.session_id
    step_finish(project=project, agent=other, outputs={"notes.md": "notes.md"}, session_id=theirs)
    sessions.session_go_to_step(project=project, agent=other, step_id="gather", session_id=theirs)
    sessions.session_abort(project=project, agent=other, explanation="done", session_id=theirs)
    assert StepRun.objects.filter(status="invalidated", completed_at=None).exists()
    defined = dag_define(
        project=project,
        creator_id="planner",
        name="Later",
        description=None,
        steps=[{"step_id": "wait", "description": "no agent has this role", "assigned_role": "x"}],
    )
    dag_execute(project=project, workflow_id=defined.job.dir_name, triggering_agent_id="planner")
    assert StepRun.objects.filter(status="ready", completed_at=None).exists()

    start(project, agent)
    settle()
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    settle()
    gather = [run for run in runs("gather") if run.session.agent_id == agent.pk]
    assert files_of(gather[0])["warnings"] == []


def test_a_dag_step_is_named_after_the_agent_it_was_handed_to(project, agent):
    from dag.services import dag_agent_register, dag_define, dag_execute

    dag_agent_register(project=project, agent_id="builder", roles=["swe"])
    defined = dag_define(
        project=project,
        creator_id="planner",
        name="Build",
        description=None,
        steps=[{"step_id": "build", "description": "build it", "assigned_role": "swe"}],
    )
    dag_execute(project=project, workflow_id=defined.job.dir_name, triggering_agent_id="planner")
    (held,) = StepRun.objects.filter(step_id="build", status="assigned")

    start(project, agent)
    settle()
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    settle()
    gather = [run for run in runs("gather") if run.session.agent_id == agent.pk]
    assert files_of(gather[0])["warnings"] == [
        "other agents worked in this project at the same time, so some of these changes may be "
        f"theirs: builder: {held.session.session_id}/build"
    ]


def test_a_step_finished_before_its_start_look_ran_is_still_compared(
    project, agent, demo_project, monkeypatch
):
    import threading

    held = threading.Event()
    look = step_changes._look

    def after_the_finish(job):
        assert held.wait(30)
        look(job)

    monkeypatch.setattr(step_changes, "_look", after_the_finish)
    start(project, agent)
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    held.set()  # the start look runs only now, after `gather` has finished
    settle()
    (gather,) = runs("gather")
    assert files_of(gather) == {
        "status": "recorded",
        "added": [],
        "modified": [],
        "deleted": [],
        "warnings": [],
    }
    # The next entry started from the same look and compares normally.
    write(demo_project, "a.md", "A, edited\n")
    step_finish(project=project, agent=agent, outputs={"a.md": "a.md", "b.md": "b.md"})
    settle()
    assert files_of(runs("part_a")[0])["modified"] == ["a.md"]


def test_a_step_sent_back_before_its_finish_look_ran_gets_no_record(
    project, agent, demo_project, monkeypatch
):
    import threading

    start(project, agent)
    settle()  # the start look is done: the finish reads the runs its look needs itself
    held = threading.Event()
    look = step_changes._look

    def after_the_way_back(job):
        assert held.wait(30)
        look(job)

    monkeypatch.setattr(step_changes, "_look", after_the_way_back)
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    deepwork.go_to_step(project=project, agent=agent, step_id="gather")
    held.set()
    settle()

    sent_back, again = runs("gather")
    part_a, *_ = runs("part_a")
    assert (sent_back.status, again.status, part_a.status) == (
        "invalidated",
        "active",
        "invalidated",
    )
    # Neither the sent-back run's record nor the discarded entry's start was written.
    assert files_of(sent_back)["status"] == "unknown"
    assert part_a.files_snapshot is None
    assert not Event.objects.filter(kind=Event.Kind.STEP_FILES_RECORDED).exists()
    # The step begun again starts from the way back's own look.
    again.refresh_from_db()
    assert again.files_snapshot is not None


class CountingDatabaseThread:
    """Stands in for the stdio server's database thread: counts the worker's trips to it."""

    def __init__(self) -> None:
        self.trips = 0

    def call(self, fn):
        self.trips += 1
        return fn()

    def wait(self, event, timeout):
        return event.wait(timeout)

    def wake(self):
        pass


def test_a_look_after_a_transition_takes_one_trip_to_the_database_thread(
    project, agent, demo_project, monkeypatch
):
    database = CountingDatabaseThread()
    monkeypatch.setattr(step_changes, "_database_thread", database)

    start(project, agent)
    settle()
    after_start = database.trips
    write(demo_project, "fresh.md", "gathered\n")
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    settle()

    # The transition read the runs; the look only writes (and reads other agents' work there).
    assert (after_start, database.trips) == (1, 2)
    (gather,) = runs("gather")
    assert files_of(gather)["added"] == ["fresh.md"]
