"""On PostgreSQL the server prepares the statements it sends again and again (a transition's),
unless ``DEEPWORK_PG_PREPARED`` turns that off for a pooler that cannot keep them."""

from __future__ import annotations

import pytest
from django.db import connection

from deepwork_site import settings as site_settings

URL = "postgres://deepwork@db.example:5432/deepwork"


def _options(monkeypatch, **env: str) -> dict:
    monkeypatch.setenv("DATABASE_URL", URL)
    for name in ("DEEPWORK_PG_PREPARED", "DEEPWORK_PG_LOCK_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return site_settings._database()["OPTIONS"]


def test_postgres_binds_on_the_server_and_prepares_by_default(monkeypatch):
    assert _options(monkeypatch) == {"server_side_binding": True, "prepare_threshold": 5}


@pytest.mark.parametrize("off", ["off", "false", "0"])
def test_prepared_statements_can_be_turned_off(monkeypatch, off):
    assert _options(monkeypatch, DEEPWORK_PG_PREPARED=off) == {}


def test_the_lock_timeout_rides_along(monkeypatch):
    options = _options(monkeypatch, DEEPWORK_PG_LOCK_TIMEOUT="200ms")
    assert options == {
        "server_side_binding": True,
        "prepare_threshold": 5,
        "options": "-c lock_timeout=200ms",
    }


def test_a_setting_that_is_not_a_switch_is_refused(monkeypatch):
    with pytest.raises(ValueError, match="DEEPWORK_PG_PREPARED must be true or false"):
        _options(monkeypatch, DEEPWORK_PG_PREPARED="sometimes")


def test_sqlite_gets_none_of_it(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'db.sqlite3'}")
    options = site_settings._database()["OPTIONS"]
    assert "server_side_binding" not in options
    assert "prepare_threshold" not in options


@pytest.mark.django_db
@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's (DATABASE_URL)"
)
def test_a_transition_read_sent_again_is_prepared(project, agent):
    """The stack read every transition makes, run past the threshold on this connection, is
    one of the connection's prepared statements."""
    from workflows.selectors import stack_for_agent

    for _ in range(6):
        stack_for_agent(agent=agent)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert any("workflows_workflowsession" in statement for statement in prepared)
