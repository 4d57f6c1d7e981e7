"""The tracker's six models moved from ``workflows`` to ``tracker`` with no SQL: a database
holding tracked workflows, phases, tasks (with a sub-task), decisions, issues (a blocker a
person answered) and milestones, taken back to before the move and forward again, keeps every
row, read through ``tracker.models``; the content types keep their rows, so permissions, group
grants and the admin's history stay attached."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.tracker.test_admin import track
from tracker import services as tracker
from tracker.models import Decision, Issue, Milestone, Phase, Task, TrackedWorkflow

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("workflows", "0015_agent_lease"), ("tracker", None)]
MODELS = [TrackedWorkflow, Phase, Task, Decision, Issue, Milestone]


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


def test_tracker_rows_and_grants_survive_the_move(project, agent):
    person = User.objects.create_user("ann")
    done = track(project, agent, "alpha", complete=True)
    track(project, agent, "beta")
    tracker.blocker_resolve(issue_id=done.blocker.pk, by=person, resolution="It is public")
    expected = {model: every_row(model) for model in MODELS}
    assert all(len(rows) >= 2 for rows in expected.values())
    assert any(task.parent_id for task in Task.objects.all())
    assert Issue.objects.filter(resolved_by=person).exists()

    content_types = {m: ContentType.objects.get_for_model(m) for m in MODELS}
    assert {ct.app_label for ct in content_types.values()} == {"tracker"}
    change_task = Permission.objects.get(content_type=content_types[Task], codename="change_task")
    editors = Group.objects.create(name="Task editors")
    editors.permissions.add(change_task)
    watched = set(
        Group.objects.get(name="Watchers")
        .permissions.filter(content_type__app_label="tracker")
        .values_list("pk", flat=True)
    )
    assert len(watched) == len(MODELS)  # a view permission per model
    history = LogEntry.objects.create(
        user=person,
        content_type=content_types[Task],
        object_id=str(done.task.pk),
        object_repr=done.task.name,
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
        assert not ContentType.objects.filter(app_label="tracker").exists()
    finally:
        migrate()

    for model in MODELS:
        assert every_row(model) == expected[model], model.__name__
        assert model._meta.db_table == f"workflows_{model._meta.model_name}"
        ct = ContentType.objects.get(pk=content_types[model].pk)
        assert (ct.app_label, ct.model) == ("tracker", model._meta.model_name)
        assert ContentType.objects.filter(model=model._meta.model_name).count() == 1
    assert list(editors.permissions.all()) == [change_task]
    assert (
        set(
            Group.objects.get(name="Watchers")
            .permissions.filter(content_type__app_label="tracker")
            .values_list("pk", flat=True)
        )
        == watched
    )
    person = User.objects.get(pk=person.pk)
    person.groups.add(editors, Group.objects.get(name="Watchers"))
    assert person.has_perm("tracker.change_task")
    assert person.has_perm("tracker.view_issue")
    assert LogEntry.objects.get(pk=history.pk).get_edited_object() == Task.objects.get(
        pk=done.task.pk
    )
    # The services still write to the tables they read.
    tracker.milestone_log(project=project, agent=agent, task_id=str(done.task.pk), message="on")
    assert Milestone.objects.count() == len(expected[Milestone]) + 1
