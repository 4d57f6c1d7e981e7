"""Migration workflows 0012 counts an upgrading install's history into the tallies with its own
frozen copy of the rules, over the models as they stood then: the same tallies as the live
rebuild counts from the same rows."""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from insights.models import AgentTally, SessionTally, StepTimeTally
from insights.tallies import insight_tallies_rebuild, insight_tallies_summed

pytestmark = pytest.mark.django_db(transaction=True)

MIGRATION = ("workflows", "0012_insight_tallies")


def test_the_migration_counts_the_history_as_the_rebuild_does(history):
    insight_tallies_rebuild()
    expected = insight_tallies_summed()
    assert all(expected.values())  # every tally has rows to compare
    for model in (SessionTally, AgentTally, StepTimeTally):
        model.objects.all().delete()

    frozen = importlib.import_module("workflows.migrations.0012_insight_tallies")
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(ast.parse(inspect.getsource(frozen)))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    # Only the standard library and Django: nothing of the live code, at any depth.
    assert {name.split(".")[0] for name in imported} <= {
        "collections",
        "datetime",
        "django",
        "math",
    }
    state = MigrationLoader(connection).project_state(MIGRATION, at_end=True)
    with connection.schema_editor(atomic=True) as schema_editor:
        frozen.count_what_happened(state.apps, schema_editor)

    assert insight_tallies_summed() == expected
