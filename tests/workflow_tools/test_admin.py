"""The admin of the workflow tools: filters a person edits, names shown read-only; each list
costs the same queries for 2 or 20 rows."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from workflow_tools.models import WorkflowToolFilter, WorkflowToolName
from workflow_tools.services import workflow_tool_names_assign
from workflow_tools.sources import PublishedWorkflow

pytestmark = pytest.mark.django_db


def grow(project, start: int, count: int) -> None:
    for index in range(start, start + count):
        WorkflowToolFilter.objects.create(action="exclude", pattern=f"wf{index}*")
    workflow_tool_names_assign(
        project=project,
        wanted=[
            (
                f"remote-x:wf{index}",
                PublishedWorkflow(id=f"wf{index}", name=f"wf {index}", description="d"),
            )
            for index in range(start, start + count)
        ],
        reserved=(),
    )


@pytest.mark.parametrize("model", ["workflowtoolfilter", "workflowtoolname"])
def test_changelists_cost_the_same_queries_for_2_or_20_rows(model, admin_client, project):
    url = reverse(f"admin:workflow_tools_{model}_changelist")
    grow(project, 0, 2)
    admin_client.get(url)  # the first request of a login refreshes its session

    with CaptureQueriesContext(connection) as few:
        assert admin_client.get(url).status_code == 200
    grow(project, 2, 18)
    with CaptureQueriesContext(connection) as many:
        page = admin_client.get(url)
    assert len(page.context["cl"].result_list) == 20
    assert len(few) == len(many)


def test_names_are_read_only_and_filters_editable(admin_client, project):
    grow(project, 0, 1)
    name = WorkflowToolName.objects.get()
    assert name.tool_name == "workflow_wf_0"
    page = admin_client.get(reverse("admin:workflow_tools_workflowtoolname_change", args=[name.pk]))
    assert b'name="tool_name"' not in page.content
    added = admin_client.post(
        reverse("admin:workflow_tools_workflowtoolfilter_add"),
        {
            "action": "include",
            "field": "category",
            "pattern": "deepwork/*",
            "enabled": "on",
            "note": "",
        },
    )
    assert added.status_code == 302, added.content[:2000]
    assert WorkflowToolFilter.objects.filter(action="include", pattern="deepwork/*").exists()
