"""``tests/bench/tracker_bench.py`` at a small size, so it cannot rot between ``make bench``
runs: its seed writes what ``get_context`` pages through at a constant query count, and its
generated repository changes exactly the files the benchmark expects ``complete_task`` to
report."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench import tracker_bench
from tracker import services as tracker

pytestmark = pytest.mark.django_db


def test_seeded_logs_page_at_a_constant_query_count(project, agent):
    few = tracker_bench.seed_context(project=project, agent=agent, rows=3)
    many = tracker_bench.seed_context(project=project, agent=agent, rows=60)

    page = tracker_bench.context_first_page(project=project, workflow_id=str(many.pk))

    assert page["decisions_count"] == page["milestones_count"] == 60
    assert len(page["decisions"]) == len(page["milestones"]) == 50
    assert page["decisions"][0]["question"] == "Which way for part 59?"
    assert page["milestones"][0]["progress"] == 100
    assert page["tasks_count"] == 1
    assert page["decisions_next_cursor"] is not None
    assert tracker_bench.context_queries(
        project=project, workflow_id=str(few.pk)
    ) == tracker_bench.context_queries(project=project, workflow_id=str(many.pk))


def test_generated_repository_changes_what_complete_task_reports(project, agent, tmp_path: Path):
    repo = (tmp_path / "repo").resolve()
    paths = tracker_bench.make_repo(repo, files=40)
    workflow = tracker.tracked_workflow_start(project=project, agent=agent, name="files")
    started = tracker.task_start(
        project=project, agent=agent, workflow_id=str(workflow.pk), name="t", goal="g", root=repo
    )

    added = tracker_bench.change_files(repo, paths, changed=10, new=2, tag="t0")
    done = tracker.task_complete(
        project=project,
        agent=agent,
        task_id=str(started.task.pk),
        status="success",
        summary="s",
        root=repo,
    )

    files = done.files.as_dict()
    assert len(files["modified"]) == 8
    assert sorted(files["added"]) == added
    assert files["deleted"] == []
    tracker_bench.reset_repo(repo)
    assert tracker_bench.git(repo, "status", "--porcelain") == b""
