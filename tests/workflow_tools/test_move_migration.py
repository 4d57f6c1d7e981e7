"""The workflow tools' two models moved from ``workflows`` to ``workflow_tools`` with no SQL: a
database holding tool names of two projects and include/exclude filters, taken back to before
the move and forward again, keeps every row, read through ``workflow_tools.models``; the content
types keep their rows, so permissions, group grants and the admin's history stay attached."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from tests.support.model_moves import (
    assert_the_move_round_trips,
    every_row,
    grants_before_the_move,
)
from workflow_tools.models import WorkflowToolFilter, WorkflowToolName
from workflow_tools.services import workflow_tool_names_assign
from workflow_tools.sources import PublishedWorkflow
from workflows.services.projects import project_ensure

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("workflows", "0016_hand_over_tracker"), ("workflow_tools", None)]
MODELS = [WorkflowToolName, WorkflowToolFilter]


def published(workflow_id: str, name: str) -> PublishedWorkflow:
    return PublishedWorkflow(id=workflow_id, name=name, description=name)


def test_workflow_tools_rows_and_grants_survive_the_move(project, tmp_path):
    other = project_ensure(root_path=tmp_path)
    for each in (project, other):
        workflow_tool_names_assign(
            project=each,
            wanted=[
                ("deepwork:build", published("build", "build")),
                ("http:build", published("build", "build")),
                ("dag:dag-1", published("dag-1", "plan it")),
            ],
            reserved=["list_workflows"],
        )
    WorkflowToolFilter.objects.create(action="include", field="category", pattern="ops*")
    WorkflowToolFilter.objects.create(action="exclude", pattern="*draft*", enabled=False, note="n")
    expected = {model: every_row(model) for model in MODELS}
    assert len(expected[WorkflowToolName]) == 6
    assert len(expected[WorkflowToolFilter]) == 2

    person = User.objects.create_user("ann")
    first_filter = WorkflowToolFilter.objects.order_by("pk").first()
    assert first_filter is not None
    grants = grants_before_the_move(
        app="workflow_tools", models=MODELS, edited=first_filter, person=person
    )
    assert_the_move_round_trips(before=BEFORE, expected=expected, grants=grants, person=person)
    # The tables keep their constraints under the new label: a name stays one workflow's.
    with pytest.raises(IntegrityError), transaction.atomic():
        WorkflowToolName.objects.create(
            project=project, workflow_key="deepwork:other", tool_name="workflow_build"
        )
    # The service still writes to the table it reads.
    names = workflow_tool_names_assign(
        project=project, wanted=[("deepwork:test", published("test", "test"))], reserved=[]
    )
    assert names["deepwork:test"] == "workflow_test"
    assert WorkflowToolName.objects.count() == len(expected[WorkflowToolName]) + 1
