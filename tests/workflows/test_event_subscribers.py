"""Contexts react to events through ``event_subscribe``: inside the writer's transaction, only
for the kinds they asked for, once per name, and rolled back with the event."""

from __future__ import annotations

import pytest
from django.db import transaction

from workflows import events
from workflows.models import Event

pytestmark = pytest.mark.django_db


@pytest.fixture
def heard(monkeypatch):
    monkeypatch.setattr(events, "_subscriptions", dict(events._subscriptions))
    calls: list[tuple[list[str], bool]] = []

    def handler(*, events, session):
        calls.append(([e.kind for e in events], transaction.get_connection().in_atomic_block))

    events.event_subscribe(name="test", kinds=[Event.Kind.AGENT_REGISTERED], handler=handler)
    return calls


def registered(project, name="a"):
    return events.event_record(
        kind=Event.Kind.AGENT_REGISTERED,
        project=project,
        payload={"agent_id": name, "roles": []},
    )


def test_a_subscriber_hears_its_kinds_inside_the_writing_transaction(project, heard):
    with transaction.atomic():
        registered(project)
        events.event_record(
            kind=Event.Kind.DAG_DELETED,
            project=project,
            payload={"workflow_id": "w", "name": "w", "requesting_agent_id": "a", "status": "x"},
        )
    assert heard == [([Event.Kind.AGENT_REGISTERED], True)]


def test_registering_a_name_again_replaces_it(project, heard):
    events.event_subscribe(
        name="test",
        kinds=[Event.Kind.AGENT_REGISTERED],
        handler=lambda *, events, session: heard.append((["again"], True)),
    )
    registered(project)
    assert heard == [(["again"], True)]


def test_a_failing_subscriber_rolls_the_event_back(project, monkeypatch):
    monkeypatch.setattr(events, "_subscriptions", dict(events._subscriptions))

    def refuse(*, events, session):
        raise RuntimeError("projection failed")

    events.event_subscribe(name="refuse", kinds=[Event.Kind.AGENT_REGISTERED], handler=refuse)
    with pytest.raises(RuntimeError), transaction.atomic():
        registered(project, "b")
    assert not Event.objects.filter(kind=Event.Kind.AGENT_REGISTERED).exists()


def test_an_unknown_kind_is_refused_at_registration():
    with pytest.raises(ValueError, match="no event kind"):
        events.event_subscribe(name="typo", kinds=["dag_deleeted"], handler=lambda **_: None)
