"""A transition's answer waits, briefly, for the look at the project it queued: a look done in
time leaves no gap between the answer and the look, and a slower one goes on after the answer.

The worker thread is the real one (the production mode, ``DEEPWORK_STEP_FILES=on``); a slow look
is made by holding the look at the files until the test lets it go, never by timing it.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support.driving import step_finish
from tests.support.driving import workflow_start as start
from tests.support.step_files import settle, write
from workflows import changes
from workflows.models import StepRun
from workflows.services import step_changes
from workflows.services.agents import ProcessHolder, agent_claim

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _on_the_worker(monkeypatch):
    monkeypatch.setenv("DEEPWORK_STEP_FILES", "on")


def run_of(step_id: str) -> StepRun:
    return StepRun.objects.get(step_id=step_id)


class HeldLooks:
    """Holds every look at the project's files until ``release``; counts the looks begun."""

    def __init__(self, monkeypatch) -> None:
        self.released = threading.Event()
        self.begun = 0
        for name in ("snapshot_take", "changes_and_snapshot"):
            real = getattr(changes, name)
            monkeypatch.setattr(changes, name, self._held(real))

    def _held(self, real):
        def look(**kwargs):
            self.begun += 1
            assert self.released.wait(60), "the test never let the look go"
            return real(**kwargs)

        return look

    def release(self) -> None:
        self.released.set()


class WaitingDatabaseThread:
    """Stands in for the stdio server's database thread: counts the answers that waited."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def call(self, fn):
        return fn()

    def wait(self, event: threading.Event, timeout: float) -> bool:
        self.waits.append(timeout)
        return event.wait(timeout)

    def wake(self) -> None:
        pass


def test_an_answer_leaves_after_its_look_so_a_change_right_after_it_counts_for_the_step_begun(
    project, agent, demo_project: Path, monkeypatch
):
    # Long enough for any machine: what is tested is the order, not the time.
    monkeypatch.setattr(step_changes, "ANSWER_WAITS_SECONDS", 60.0)

    start(project, agent)
    # No settle(): the answer came back after the start snapshot was stored.
    assert run_of("gather").files_snapshot is not None
    write(demo_project, "right_after_start.md", "written the moment the answer came\n")

    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    gather = run_of("gather")
    assert step_changes.run_files(gather).as_dict() == {
        "status": "recorded",
        "added": ["right_after_start.md"],
        "modified": [],
        "deleted": [],
        "warnings": [],
    }
    # The runs begun start from that same look, so this change is theirs, not gather's.
    write(demo_project, "right_after_finish.md", "next step's work\n")
    assert run_of("part_a").files_snapshot is not None
    step_finish(project=project, agent=agent, outputs={"a.md": "a.md", "b.md": "b.md"})
    assert step_changes.run_files(run_of("part_a")).added == ("right_after_finish.md",)
    assert step_changes.run_files(run_of("gather")).added == ("right_after_start.md",)


def test_a_look_slower_than_the_wait_goes_on_after_the_answer_and_later_answers_do_not_wait(
    project, agent, demo_project: Path, monkeypatch
):
    monkeypatch.setattr(step_changes, "ANSWER_WAITS_SECONDS", 0.05)
    database = WaitingDatabaseThread()
    monkeypatch.setattr(step_changes, "_database_thread", database)
    held = HeldLooks(monkeypatch)
    try:
        start(project, agent)
        # The answer left at the deadline, with its look still held.
        assert database.waits == [0.05]
        assert not held.released.is_set()
        assert run_of("gather").files_snapshot is None
    finally:
        held.release()
    settle()
    assert run_of("gather").files_snapshot is not None
    # That look took longer than an answer waits: the next answer does not wait for its own.
    held.released.clear()
    try:
        write(demo_project, "during_gather.md", "gathered\n")
        step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
        assert database.waits == [0.05]
        assert step_changes.run_files(run_of("gather")).status == "pending"
    finally:
        held.release()
    settle()
    # Late, and as exact: the record is the same one an answer that waited would have seen.
    assert step_changes.run_files(run_of("gather")).added == ("during_gather.md",)
    assert held.begun == 2


def test_an_answer_does_not_wait_behind_another_sessions_look(
    project, agent, demo_project: Path, monkeypatch
):
    monkeypatch.setattr(step_changes, "ANSWER_WAITS_SECONDS", 0.05)
    database = WaitingDatabaseThread()
    monkeypatch.setattr(step_changes, "_database_thread", database)
    other = agent_claim(project=project, holder=ProcessHolder.for_this_process(), agent_id="b")
    held = HeldLooks(monkeypatch)
    try:
        start(project, agent)
        assert database.waits == [0.05]
        # The first look is still held on the worker: the second session's answer, queued
        # behind it, leaves without waiting for either.
        start(project, other)
        assert database.waits == [0.05]
        assert held.begun == 1
    finally:
        held.release()
    settle()
    assert held.begun == 2
    snapshots = [run.files_snapshot for run in StepRun.objects.filter(step_id="gather")]
    assert len(snapshots) == 2
    assert None not in snapshots
