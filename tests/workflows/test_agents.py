"""Agent identities: live processes never share a stack; a dead process's stack is adopted."""

from __future__ import annotations

import socket
import subprocess
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.support.driving import step_finish
from workflows.models import Agent
from workflows.services import sessions
from workflows.services.agents import (
    ProcessHolder,
    agent_claim,
    agent_heartbeat,
    agent_release,
    holder_is_alive,
)

pytestmark = pytest.mark.django_db


def exited_process_holder() -> ProcessHolder:
    """A holder whose process really ran and has exited."""
    process = subprocess.Popen(["true"])
    process.wait()
    return ProcessHolder(
        hostname=socket.gethostname(), pid=process.pid, start_ticks="1", token="dead"
    )


def test_two_live_processes_get_distinct_agents(project):
    first = agent_claim(project=project, holder=ProcessHolder.for_this_process())
    second = agent_claim(project=project, holder=ProcessHolder.for_this_process())
    assert first.agent_id != second.agent_id
    assert holder_is_alive(first)


def test_a_stack_left_by_a_dead_process_is_adopted(project, catalog):
    orphan = agent_claim(project=project, holder=exited_process_holder())
    sessions.session_start(
        project=project,
        agent=orphan,
        catalog=catalog.view(),
        job_name="demo",
        workflow_name="main",
        goal="g",
    )
    assert not holder_is_alive(Agent.objects.get(pk=orphan.pk))

    successor = agent_claim(project=project, holder=ProcessHolder.for_this_process())

    assert successor.pk == orphan.pk
    response = step_finish(project=project, agent=successor, outputs={"notes.md": "notes.md"})
    assert response.begin_step.step_id == "part_a"


def test_a_released_agent_is_adopted_at_once(project):
    holder = ProcessHolder.for_this_process()
    agent = agent_claim(project=project, holder=holder)
    agent_release(agent=agent, holder=holder)
    assert agent_claim(project=project, holder=ProcessHolder.for_this_process()).pk == agent.pk


def test_a_recycled_pid_does_not_count_as_the_holder(project):
    holder = ProcessHolder.for_this_process()
    impostor = ProcessHolder(
        hostname=holder.hostname, pid=holder.pid, start_ticks="12345", token="old"
    )
    agent = agent_claim(project=project, holder=impostor)
    assert not holder_is_alive(Agent.objects.get(pk=agent.pk))


def test_remote_holders_are_judged_by_their_lease(project):
    agent = agent_claim(project=project, holder=ProcessHolder.for_this_process())
    Agent.objects.filter(pk=agent.pk).update(
        hostname="elsewhere", lease_until=timezone.now() + timedelta(seconds=30)
    )
    assert holder_is_alive(Agent.objects.get(pk=agent.pk))
    Agent.objects.filter(pk=agent.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert not holder_is_alive(Agent.objects.get(pk=agent.pk))


def test_explicit_agent_id_is_reused_and_never_adopted_implicitly(project):
    named = agent_claim(project=project, holder=exited_process_holder(), agent_id="reviewer")
    assert named.explicit

    implicit = agent_claim(project=project, holder=ProcessHolder.for_this_process())
    assert implicit.pk != named.pk
    again = agent_claim(
        project=project, holder=ProcessHolder.for_this_process(), agent_id="reviewer"
    )
    assert again.pk == named.pk


def test_heartbeat_reports_a_takeover(project):
    old = exited_process_holder()
    agent = agent_claim(project=project, holder=old)
    agent_claim(project=project, holder=ProcessHolder.for_this_process())  # adopts it
    assert agent_heartbeat(agent=agent, holder=old, lease_seconds=30) is None


def test_an_agent_reconnecting_soon_is_recorded_once(project):
    from workflows.models import Event
    from workflows.services.agents import RECONNECT_WINDOW

    def connected() -> int:
        return Event.objects.filter(kind=Event.Kind.AGENT_CONNECTED).count()

    holder = ProcessHolder.for_this_process()
    agent = agent_claim(project=project, holder=holder)
    for _ in range(3):  # three short-lived clients, one after the other
        agent_release(agent=agent, holder=holder)
        holder = ProcessHolder.for_this_process()
        assert agent_claim(project=project, holder=holder).pk == agent.pk
    assert connected() == 1
    # Once the window has passed, a reconnection is news again.
    Event.objects.update(created_at=timezone.now() - RECONNECT_WINDOW - timedelta(seconds=1))
    agent_release(agent=agent, holder=holder)
    agent_claim(project=project, holder=ProcessHolder.for_this_process())
    assert connected() == 2
    # Another agent connecting is always recorded.
    agent_claim(project=project, holder=ProcessHolder.for_this_process())
    assert connected() == 3
