"""The REST API returns each step run's files changed (real git repository, real database)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.driving import step_finish
from tests.support.step_files import make_repository, settle, write
from workflows.dialects import deepwork

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_session_lists_each_step_runs_files_changed(viewer, project, agent, catalog):
    root = Path(project.root_path)
    make_repository(root)
    answer = deepwork.start_workflow(
        project=project,
        agent=agent,
        catalog=catalog.view(),
        job_name="demo",
        workflow_name="main",
        goal="g",
    )
    session_id = answer.begin_step.session_id
    settle()
    write(root, "notes.md", "new notes\n")
    write(root, "sources/one.txt", "one\n")
    step_finish(project=project, agent=agent, outputs={"notes.md": "notes.md"})
    settle()

    runs = viewer.get(f"/api/sessions/{session_id}").json()["runs"]
    assert [(run["step_id"], run["files_changed"]["status"]) for run in runs] == [
        ("gather", "recorded"),
        ("part_a", "pending"),
        ("part_b", "pending"),
    ]
    assert runs[0]["files_changed"] == {
        "status": "recorded",
        "added": ["sources/one.txt"],
        "modified": ["notes.md"],
        "deleted": [],
        "warnings": [],
    }
    assert runs[1]["files_changed"] == {
        "status": "pending",
        "added": [],
        "modified": [],
        "deleted": [],
        "warnings": [],
    }
