"""Two ``mcpserve --toolsets agents`` stdio processes with the same role: when one leaves, the
step it held (or one defined after it left) goes to the other, which is waiting in
``await_assignment``. A clean exit (stdin closed, SIGTERM) hands the step on at once; a crash
(SIGKILL) once the process's lease has run out (shortened here with the setting); the agents
page shows an agent that left as gone.

Responsiveness for agents renewed only by their calls stays at its 300 s default throughout, so
none of these hand-offs can come from that limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from dag import services as dag
from tests.dashboard.conftest import client_for
from tests.e2e.driver import Driver
from tests.support.factories import make_user
from workflows.models import Agent, Event, Project

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

# Longest wait for a step: generous for a loaded machine, far below the 300 s an agent that
# left used to stay responsive.
WAIT = 45
STEP = [{"step_id": "build", "description": "Build it", "assigned_role": "swe"}]


def agent_server(project: Path, agent_id: str, lease: str | None = None) -> Driver:
    env = {"DEEPWORK_AGENT_LEASE_SECONDS": lease} if lease else {}
    return Driver(
        project, "--toolsets", "agents", "--agent-id", agent_id, "--roles", "swe", env_extra=env
    )


async def close(agent: Driver) -> None:
    """The client goes away: the stdio transport closes the server's stdin (and would signal
    the process only if it did not exit on its own within two seconds)."""
    await agent.__aexit__(None, None, None)
    await agent.client.transport.close()


@contextlib.asynccontextmanager
async def serving(project: Path, agent_id: str, lease: str | None = None) -> AsyncIterator[Driver]:
    agent = agent_server(project, agent_id, lease)
    await agent.__aenter__()
    try:
        yield agent
    finally:
        await close(agent)


@sync_to_async
def run_one_step(project_dir: Path, name: str) -> str:
    """Define and execute a one-step ``swe`` workflow (as a program on the REST API would)."""
    project = Project.objects.get(root_path=str(project_dir))
    defined = dag.dag_define(
        project=project, creator_id="boss", name=name, description="", steps=STEP
    )
    dag.dag_execute(project=project, workflow_id=defined.job.dir_name, triggering_agent_id="boss")
    return defined.job.dir_name


@sync_to_async
def agent_row(agent_id: str) -> Agent:
    return Agent.objects.get(agent_id=agent_id)


async def handed_to_b_while_waiting(
    project_dir: Path, a_leaves: Callable[[Driver], Awaitable[None]], lease: str | None = None
) -> dict:
    """A takes a step; B waits for one; A leaves (``a_leaves``): B's assignment."""
    a = agent_server(project_dir, "a", lease)
    await a.__aenter__()
    try:
        workflow_id = await run_one_step(project_dir, "First")
        [held] = (await a.call("await_assignment", {"agent_id": "a", "timeout_s": WAIT}))[
            "assignments"
        ]
        assert (held["workflow_id"], held["step_id"]) == (workflow_id, "build")
        async with serving(project_dir, "b", lease) as b:
            waiting = asyncio.create_task(
                b.call("await_assignment", {"agent_id": "b", "timeout_s": WAIT})
            )
            await asyncio.sleep(0.5)  # b is in its wait
            await a_leaves(a)
            answer = await waiting
            assert answer["timed_out"] is False, "the step A held never reached B"
            [step] = answer["assignments"]
            assert (step["workflow_id"], step["step_id"]) == (workflow_id, "build")
            return answer
    finally:
        with contextlib.suppress(Exception):
            await close(a)


async def test_a_clean_exit_hands_the_held_step_on_at_once_and_later_steps_skip_it(
    project_dir: Path,
):
    first = await handed_to_b_while_waiting(project_dir, close)
    left = await agent_row("a")
    assert (left.holder, left.lease_until, left.left_at is not None) == ("", None, True)
    handed = await sync_to_async(
        lambda: [e.payload for e in Event.objects.filter(kind=Event.Kind.DAG_STEP_HANDED_ON)]
    )()
    # A's step went to B; B's server has exited cleanly since, so the step was handed on again.
    assert [(p["step_id"], p["from_agent_id"]) for p in handed] == [("build", "a"), ("build", "b")]

    # A step defined after A left goes to B, waiting, although A registered first (idle
    # longest, it would have been chosen while it counted as responsive).
    async with serving(project_dir, "b") as b:
        # B's new server holds its step again; it is done.
        [held] = first["assignments"]
        done = {"workflow_id": held["workflow_id"], "step_id": "build", "agent_id": "b"}
        await b.call("report_step_completion", done)
        waiting = asyncio.create_task(
            b.call("await_assignment", {"agent_id": "b", "timeout_s": WAIT})
        )
        await asyncio.sleep(0.5)
        second = await run_one_step(project_dir, "Second")
        answer = await waiting
        assert answer["timed_out"] is False
        assert [(s["workflow_id"], s["step_id"]) for s in answer["assignments"]] == [
            (second, "build")
        ]

    # The agents page: A gone, B gone too now (its server exited as well), never responsive.
    @sync_to_async
    def agents_page() -> str:
        watcher = client_for(make_user(username="wanda", groups=("Watchers",)))
        return watcher.get("/agents/").content.decode()

    page = await agents_page()
    assert 'data-agent-id="a" data-responsive="false" data-state="gone"' in page
    assert "gone <span" in page


async def test_sigterm_is_a_clean_exit(project_dir: Path):
    async def terminate(a: Driver) -> None:
        os.kill((await agent_row("a")).pid or 0, signal.SIGTERM)

    await handed_to_b_while_waiting(project_dir, terminate)
    left = await agent_row("a")
    assert (left.holder, left.lease_until, left.left_at is not None) == ("", None, True)


async def test_a_crashed_agent_loses_its_step_when_its_lease_runs_out(project_dir: Path):
    async def kill(a: Driver) -> None:
        os.kill((await agent_row("a")).pid or 0, signal.SIGKILL)

    # A lease of 3 s, renewed every second by each server's heartbeat.
    await handed_to_b_while_waiting(project_dir, kill, lease="3")
    crashed = await agent_row("a")
    # No clean exit: silent, not gone; its lease simply ran out.
    assert crashed.left_at is None
    assert crashed.lease_until is not None
