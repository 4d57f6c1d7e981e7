"""The workflow tools' two models moved from ``workflows`` to ``workflow_tools`` with no SQL: a
database holding tool names of two projects and include/exclude filters, taken back to before
the move and forward again, keeps every row, read through ``workflow_tools.models``; the content
types keep their rows, so permissions, group grants and the admin's history stay attached."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from workflow_tools.models import WorkflowToolFilter, WorkflowToolName
from workflow_tools.services import workflow_tool_names_assign
from workflow_tools.sources import PublishedWorkflow
from workflows.services.projects import project_ensure

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("workflows", "0016_hand_over_tracker"), ("workflow_tools", None)]
MODELS = [WorkflowToolName, WorkflowToolFilter]


def migrate(targets=None) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    # Without targets: every app to its latest migration, as the other tests expect.
    executor.migrate(targets or executor.loader.graph.leaf_nodes())
    ContentType.objects.clear_cache()


def every_row(model, fields: list[str] | None = None) -> list[dict]:
    """Every row, every column (the current model's, unless ``fields`` names them), by id."""
    fields = fields or [field.attname for field in model._meta.concrete_fields]
    return list(model.objects.order_by("pk").values(*fields))


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
    content_types = {m: ContentType.objects.get_for_model(m) for m in MODELS}
    assert {ct.app_label for ct in content_types.values()} == {"workflow_tools"}
    change_filter = Permission.objects.get(
        content_type=content_types[WorkflowToolFilter], codename="change_workflowtoolfilter"
    )
    editors = Group.objects.create(name="Filter editors")
    editors.permissions.add(change_filter)
    watched = set(
        Group.objects.get(name="Watchers")
        .permissions.filter(content_type__app_label="workflow_tools")
        .values_list("pk", flat=True)
    )
    assert len(watched) == len(MODELS)  # a view permission per model
    first_filter = WorkflowToolFilter.objects.order_by("pk").first()
    assert first_filter is not None
    history = LogEntry.objects.create(
        user=person,
        content_type=content_types[WorkflowToolFilter],
        object_id=str(first_filter.pk),
        object_repr=str(first_filter),
        action_flag=CHANGE,
        change_message="looked",
    )

    migrate(BEFORE)
    try:
        # Before the move the same rows are the workflows app's, in the same tables, and the
        # same content type rows carry the old label with their permissions.
        old = MigrationExecutor(connection).loader.project_state(BEFORE[0]).apps
        for model in MODELS:
            historical = old.get_model("workflows", model.__name__)
            assert historical._meta.db_table == model._meta.db_table
            columns = [field.attname for field in model._meta.concrete_fields]
            assert every_row(historical, columns) == expected[model]
            assert ContentType.objects.get(pk=content_types[model].pk).app_label == "workflows"
        assert not ContentType.objects.filter(app_label="workflow_tools").exists()
    finally:
        migrate()

    for model in MODELS:
        assert every_row(model) == expected[model], model.__name__
        assert model._meta.db_table == f"workflows_{model._meta.model_name}"
        ct = ContentType.objects.get(pk=content_types[model].pk)
        assert (ct.app_label, ct.model) == ("workflow_tools", model._meta.model_name)
        assert ContentType.objects.filter(model=model._meta.model_name).count() == 1
    assert list(editors.permissions.all()) == [change_filter]
    assert (
        set(
            Group.objects.get(name="Watchers")
            .permissions.filter(content_type__app_label="workflow_tools")
            .values_list("pk", flat=True)
        )
        == watched
    )
    person = User.objects.get(pk=person.pk)
    person.groups.add(editors, Group.objects.get(name="Watchers"))
    assert person.has_perm("workflow_tools.change_workflowtoolfilter")
    assert person.has_perm("workflow_tools.view_workflowtoolname")
    assert LogEntry.objects.get(pk=history.pk).get_edited_object() == first_filter
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
