"""The insight tallies moved from ``workflows`` to ``insights`` with no SQL: a database holding
session, agent (day and month, one with no agent) and step-time tallies, taken back to before
the move and forward again, keeps every row, read through ``insights.models``; the content
types keep their rows, so permissions, group grants and the admin's history stay attached,
and the event writer still counts into the same tables."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from insights.models import AgentTally, SessionTally, StepTimeTally
from insights.tallies import insight_tallies_summed
from tests.insights.test_tallies import start

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("workflows", "0016_hand_over_tracker"), ("insights", None)]
MODELS = [SessionTally, AgentTally, StepTimeTally]


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


def test_tally_rows_and_grants_survive_the_move(history, project, agent, catalog):
    person = User.objects.create_user("ann")
    # A count with no agent (events a person wrote, not an agent), which the key allows.
    agentless = AgentTally.objects.order_by("pk").first()
    agentless.pk, agentless.agent = None, None
    agentless.save()
    expected = {model: every_row(model) for model in MODELS}
    assert all(len(rows) >= 2 for rows in expected.values())
    assert {row["period"] for row in expected[AgentTally]} == {"day", "month"}
    assert any(row["agent_id"] is None for row in expected[AgentTally])
    summed = insight_tallies_summed()

    content_types = {m: ContentType.objects.get_for_model(m) for m in MODELS}
    assert {ct.app_label for ct in content_types.values()} == {"insights"}
    change_tally = Permission.objects.get(
        content_type=content_types[SessionTally], codename="change_sessiontally"
    )
    editors = Group.objects.create(name="Tally editors")
    editors.permissions.add(change_tally)
    watched = set(
        Group.objects.get(name="Watchers")
        .permissions.filter(content_type__app_label="insights")
        .values_list("pk", flat=True)
    )
    assert len(watched) == len(MODELS)  # a view permission per model
    tally = SessionTally.objects.order_by("pk").first()
    history_entry = LogEntry.objects.create(
        user=person,
        content_type=content_types[SessionTally],
        object_id=str(tally.pk),
        object_repr=str(tally),
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
        assert not ContentType.objects.filter(app_label="insights").exists()
    finally:
        migrate()

    for model in MODELS:
        assert every_row(model) == expected[model], model.__name__
        assert model._meta.db_table == f"workflows_{model._meta.model_name}"
        ct = ContentType.objects.get(pk=content_types[model].pk)
        assert (ct.app_label, ct.model) == ("insights", model._meta.model_name)
        assert ContentType.objects.filter(model=model._meta.model_name).count() == 1
    assert insight_tallies_summed() == summed
    assert list(editors.permissions.all()) == [change_tally]
    assert (
        set(
            Group.objects.get(name="Watchers")
            .permissions.filter(content_type__app_label="insights")
            .values_list("pk", flat=True)
        )
        == watched
    )
    person = User.objects.get(pk=person.pk)
    person.groups.add(editors, Group.objects.get(name="Watchers"))
    assert person.has_perm("insights.change_sessiontally")
    assert person.has_perm("insights.view_steptimetally")
    assert LogEntry.objects.get(pk=history_entry.pk).get_edited_object() == tally

    # The event writer still counts into the same tables: a new session is one more start.
    started = sum(row["started"] for row in expected[SessionTally])
    start(project, agent, catalog)
    assert sum(SessionTally.objects.values_list("started", flat=True)) == started + 1
