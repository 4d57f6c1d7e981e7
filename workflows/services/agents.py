"""Agent identities: which process owns which stack.

Every ``mcpserve`` process holds one agent while it runs. Without ``--agent-id`` a new process
adopts an agent whose holding process is gone, so an agent whose server restarted finds its
stack again; two processes alive at the same time never share an agent by accident.

Liveness is a lease, the way work queues hold claims: ``agent_heartbeat`` renews an agent's
lease for as long as its renewer chooses (a running ``mcpserve`` briefly and often, a hosted
agent's requests for longer), and the agent is responsive, and gets DAG steps, while it runs
(``workflows.liveness.is_responsive``). ``agent_release`` ends it on a clean exit. The DAG scheduler
builds on both (``dag_agent_renew``, ``dag_agent_leave``) to hand steps out right after, so a
step held by an agent that left goes to another one at once.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from workflows import events, limits
from workflows.errors import InvalidInput
from workflows.liveness import (
    ProcessHolder,
    is_responsive,
    lease_end,
    process_lease_seconds,
    process_start_ticks,
)
from workflows.models import Agent, Event, Project, WorkflowSession

logger = logging.getLogger(__name__)

# A reconnection of an agent this soon after its last "Agent connected" record is not recorded.
RECONNECT_WINDOW = timedelta(minutes=10)
# How many orphaned agents a starting process considers for adoption.
ADOPTION_CANDIDATES = 20


def holder_is_alive(agent: Agent, *, now: datetime | None = None) -> bool:
    """Whether the process recorded as holding ``agent`` still runs."""
    if not agent.holder:
        return False
    if agent.hostname == socket.gethostname() and agent.pid:
        recorded_ticks = agent.holder.split(":")[2] if agent.holder.count(":") >= 3 else ""
        try:
            os.kill(agent.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not recorded_ticks or process_start_ticks(agent.pid) == recorded_ticks
    # On another machine: alive while the lease its heartbeat renews runs.
    return is_responsive(agent.lease_until, now)


def _renewed(seconds: float) -> dict[str, Any]:
    """The fields a lease renewal of ``seconds`` writes: alive now, and not gone."""
    now = timezone.now()
    return {"heartbeat_at": now, "lease_until": lease_end(seconds, now), "left_at": None}


def _connected(project: Project, agent: Agent, *, adopted: bool) -> None:
    # Short-lived clients (a CLI call each) reconnect the same agent again and again: one
    # record per agent and window is what a person reading the timeline wants.
    recently = Event.objects.filter(
        kind=Event.Kind.AGENT_CONNECTED,
        created_at__gte=timezone.now() - RECONNECT_WINDOW,
        agent=agent,
    )
    if adopted and recently.exists():
        return
    events.event_record(
        kind=Event.Kind.AGENT_CONNECTED,
        project=project,
        agent=agent,
        payload=events.AgentConnected(agent_id=agent.agent_id, adopted=adopted),
    )


def _take(agent: Agent, holder: ProcessHolder, *, expected_holder: str) -> bool:
    taken = Agent.objects.filter(pk=agent.pk, holder=expected_holder).update(
        holder=holder.key,
        hostname=holder.hostname,
        pid=holder.pid,
        **_renewed(process_lease_seconds()),
    )
    if taken:
        agent.holder, agent.hostname, agent.pid = holder.key, holder.hostname, holder.pid
    return bool(taken)


def agent_claim(*, project: Project, holder: ProcessHolder, agent_id: str | None = None) -> Agent:
    """Give the calling process its agent: the named one, an orphan to adopt, or a new one."""
    if agent_id:
        with transaction.atomic():
            agent, created = Agent.objects.get_or_create(
                project=project, agent_id=agent_id, defaults={"explicit": True}
            )
            if not created and agent.holder and holder_is_alive(agent):
                logger.warning(
                    "Agent %s is also held by a running process (%s); both now share its stack",
                    agent_id,
                    agent.holder,
                )
            Agent.objects.filter(pk=agent.pk).update(
                holder=holder.key,
                hostname=holder.hostname,
                pid=holder.pid,
                **_renewed(process_lease_seconds()),
            )
            agent.holder = holder.key
            _connected(project, agent, adopted=not created)
        return agent

    active = WorkflowSession.objects.filter(agent=OuterRef("pk"), status="active")
    candidates = (
        Agent.objects.filter(project=project, explicit=False)
        .annotate(has_active=Exists(active))
        .order_by("-has_active", "-heartbeat_at", "-id")[:ADOPTION_CANDIDATES]
    )
    for candidate in candidates:
        if holder_is_alive(candidate):
            continue
        # The take and its event commit together: no adopted agent without its record.
        with transaction.atomic():
            taken = _take(candidate, holder, expected_holder=candidate.holder)
            if taken:
                _connected(project, candidate, adopted=True)
        if taken:
            logger.info("Adopted agent %s left by a process that is gone", candidate.agent_id)
            return candidate

    for _ in range(5):
        try:
            with transaction.atomic():
                agent = Agent.objects.create(
                    project=project,
                    agent_id=f"agent-{secrets.token_hex(4)}",
                    holder=holder.key,
                    hostname=holder.hostname,
                    pid=holder.pid,
                    **_renewed(process_lease_seconds()),
                )
                _connected(project, agent, adopted=False)
            return agent
        except IntegrityError:
            continue
    raise RuntimeError("could not allocate a unique agent id")


def agent_heartbeat(
    *,
    agent: Agent,
    lease_seconds: float,
    holder: ProcessHolder | None = None,
) -> Agent | None:
    """Renew ``agent``'s lease for ``lease_seconds`` from now: the agent as stored now, or None
    when ``holder`` (a process renewing the agent it holds) no longer holds it. The DAG
    scheduler builds on this (``dag_agent_renew`` also hands out waiting steps)."""
    rows = Agent.objects.filter(pk=agent.pk)
    if holder is not None:
        rows = rows.filter(holder=holder.key)
    if not rows.update(**_renewed(lease_seconds)):
        return None
    return Agent.objects.select_related("project").get(pk=agent.pk)


def agent_release(*, agent: Agent, holder: ProcessHolder) -> bool:
    """Let go of the agent on a clean exit: the next process adopts it at once and its lease
    ends (it is gone, not silent); ``dag_agent_leave`` also hands on the DAG steps it held.
    False when ``holder`` no longer held it (another process took it over and keeps it)."""
    now = timezone.now()
    released = Agent.objects.filter(pk=agent.pk, holder=holder.key).update(
        holder="", lease_until=None, left_at=now
    )
    return bool(released)


def agent_id_clean(agent_id: str) -> str:
    """A caller-chosen agent id, stripped; refused unless 1 to 128 characters."""
    agent_id = agent_id.strip()
    if not agent_id or len(agent_id) > 128:
        raise InvalidInput("agent_id must be 1 to 128 characters")
    limits.AGENT_ID.check("agent_id", agent_id)
    return agent_id


def agent_ensure(*, project: Project, agent_id: str) -> Agent:
    """The named agent, created if new, for a program driving sessions over the REST API.

    No process holds it, and being explicit it is never adopted by an ``mcpserve`` process.
    """
    agent_id = agent_id_clean(agent_id)
    # The first connection and its event commit together (or, inside a caller's transaction,
    # roll back with it).
    with transaction.atomic():
        agent, created = Agent.objects.get_or_create(
            project=project, agent_id=agent_id, defaults={"explicit": True}
        )
        if created:
            _connected(project, agent, adopted=False)
    return agent
