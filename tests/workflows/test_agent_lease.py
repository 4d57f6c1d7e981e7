"""The lease rule for agents: responsive (and given DAG steps) while the lease its renewer chose
runs; gone at once on a clean exit, which hands its steps on; silent once a lease runs out."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dag import selectors
from dag import services as dag
from workflows.liveness import process_lease_seconds, responsive_seconds
from workflows.models import Agent, Event, Project, StepRun
from workflows.services.agents import ProcessHolder, agent_claim, agent_heartbeat, agent_release

pytestmark = pytest.mark.django_db

STEP = [{"step_id": "build", "description": "Build it", "assigned_role": "swe"}]


@pytest.fixture
def proj(tmp_path) -> Project:
    return Project.objects.create(root_path=str(tmp_path), name="p")


def held_by_a_process(proj: Project) -> tuple[Agent, ProcessHolder]:
    """Agent ``a`` held by a running server (this process), registered as ``swe``, holding
    the step of a workflow started while it was the only one."""
    holder = ProcessHolder.for_this_process()
    agent = agent_claim(project=proj, holder=holder, agent_id="a")
    dag.dag_agent_register(
        project=proj, agent_id="a", roles=["swe"], lease_seconds=process_lease_seconds()
    )
    wid = dag.dag_define(
        project=proj, creator_id="boss", name="Ship", description="", steps=STEP
    ).job.dir_name
    started = dag.dag_execute(project=proj, workflow_id=wid, triggering_agent_id="boss")
    assert [(d.step_id, d.agent_id) for d in started.delegated] == [("build", "a")]
    return agent, holder


def states() -> dict[str, str]:
    """Each agent's state on the agents page, but the creator's (never renewed: silent)."""
    rows = selectors.dag_agents(project=None)
    found = {row["agent_id"]: row["state"] for row in rows}
    assert found.pop("boss") == "silent"
    return found


def holder_of_build() -> str | None:
    run = StepRun.objects.select_related("assigned_agent").get(step_id="build")
    return run.assigned_agent.agent_id if run.assigned_agent else None


def test_a_clean_exit_is_gone_at_once_and_its_steps_go_to_others(proj):
    agent, holder = held_by_a_process(proj)
    dag.dag_agent_register(project=proj, agent_id="b", roles=["swe"])
    assert states() == {"a": "responsive", "b": "responsive"}

    assert dag.dag_agent_leave(agent=agent, holder=holder) is True
    # Its lease had seconds left; leaving ended it, and the step went to b right then.
    assert states() == {"a": "gone", "b": "responsive"}
    assert holder_of_build() == "b"
    [handed] = Event.objects.filter(kind=Event.Kind.DAG_STEP_HANDED_ON)
    assert (handed.payload["step_id"], handed.payload["from_agent_id"]) == ("build", "a")
    left = Agent.objects.get(agent_id="a")
    assert (left.holder, left.lease_until, left.left_at is not None) == ("", None, True)


def test_a_release_without_dispatch_waits_for_the_next_one(proj):
    agent, holder = held_by_a_process(proj)
    dag.dag_agent_register(project=proj, agent_id="b", roles=["swe"])
    agent_release(agent=agent, holder=holder)
    assert holder_of_build() == "a"
    dag.dag_dispatch(project=proj)
    assert holder_of_build() == "b"


def test_a_process_that_lost_its_agent_does_not_release_it(proj):
    agent, old = held_by_a_process(proj)
    agent_claim(project=proj, holder=ProcessHolder.for_this_process(), agent_id="a")
    assert dag.dag_agent_leave(agent=agent, holder=old) is False
    assert states() == {"a": "responsive"}
    assert holder_of_build() == "a"


def test_a_recent_heartbeat_counts_for_nothing_once_the_lease_ran_out(proj):
    held_by_a_process(proj)
    dag.dag_agent_register(project=proj, agent_id="b", roles=["swe"])
    # Its last heartbeat a second ago, but the (short) lease it was given has ended: a
    # crashed server stops renewing, and that is all anyone sees.
    Agent.objects.filter(agent_id="a").update(
        heartbeat_at=timezone.now() - timedelta(seconds=1),
        lease_until=timezone.now() - timedelta(milliseconds=1),
    )
    assert states() == {"a": "silent", "b": "responsive"}
    [outcome] = dag.dag_dispatch(project=proj)
    assert outcome.handed_on == ["build"]
    assert holder_of_build() == "b"


def test_renewing_makes_a_gone_or_silent_agent_responsive_again(proj):
    agent, holder = held_by_a_process(proj)
    agent_release(agent=agent, holder=holder)
    assert states() == {"a": "gone"}
    renewed = agent_heartbeat(agent=agent, lease_seconds=30)
    assert renewed is not None
    assert renewed.left_at is None
    assert states() == {"a": "responsive"}
    Agent.objects.filter(pk=agent.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert states() == {"a": "silent"}


def test_the_renewer_chooses_the_lease_length(proj, settings):
    settings.DEEPWORK_AGENT_RESPONSIVE_SECONDS = 300
    settings.DEEPWORK_AGENT_LEASE_SECONDS = 30
    assert (process_lease_seconds(), responsive_seconds()) == (30, 300)

    def lease_left(agent_id: str) -> float:
        lease_until = Agent.objects.get(agent_id=agent_id).lease_until
        assert lease_until is not None
        return (lease_until - timezone.now()).total_seconds()

    # A running server's agent: the short lease its heartbeat thread keeps renewing.
    agent_claim(project=proj, holder=ProcessHolder.for_this_process(), agent_id="served")
    assert 20 < lease_left("served") <= 30
    # An agent renewed only by its own calls: the long one.
    dag.dag_agent_register(project=proj, agent_id="called", roles=["swe"])
    assert 290 < lease_left("called") <= 300
    # A process lease is never longer than the call lease: shortening that shortens both.
    settings.DEEPWORK_AGENT_RESPONSIVE_SECONDS = 2
    assert process_lease_seconds() == 2


def test_a_heartbeat_dispatches_when_asked(proj):
    held_by_a_process(proj)
    b = dag.dag_agent_register(project=proj, agent_id="b", roles=["swe"])
    Agent.objects.filter(agent_id="a").update(lease_until=timezone.now() - timedelta(seconds=1))
    agent_heartbeat(agent=b, lease_seconds=300)
    assert holder_of_build() == "a"  # not asked: nothing handed on yet
    dag.dag_agent_renew(agent=b, lease_seconds=300)
    assert holder_of_build() == "b"
