"""Agent identities: which process owns which stack.

Every ``mcpserve`` process holds one agent while it runs. Without ``--agent-id`` a new process
adopts an agent whose holding process is gone, so an agent whose server restarted finds its
stack again; two processes alive at the same time never share an agent by accident.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from workflows import events, limits
from workflows.errors import InvalidInput
from workflows.models import Agent, Event, Project, WorkflowSession

logger = logging.getLogger(__name__)

# A holder on another machine counts as gone once its heartbeat is this old.
HEARTBEAT_STALE_AFTER = timedelta(seconds=90)
# A reconnection of an agent this soon after its last "Agent connected" record is not recorded.
RECONNECT_WINDOW = timedelta(minutes=10)
# How many orphaned agents a starting process considers for adoption.
ADOPTION_CANDIDATES = 20


def _process_start_ticks(pid: int) -> str:
    """The kernel's start time of ``pid``: tells a live holder from a recycled pid (Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("ascii", "replace")
    except OSError:
        return ""
    # Field 22 (starttime) follows the parenthesised command name, which may hold spaces.
    return stat.rsplit(")", 1)[-1].split()[19]


@dataclass(frozen=True)
class ProcessHolder:
    """The claim one running server puts on its agent."""

    hostname: str
    pid: int
    start_ticks: str
    token: str

    @classmethod
    def for_this_process(cls) -> ProcessHolder:
        pid = os.getpid()
        return cls(
            hostname=socket.gethostname(),
            pid=pid,
            start_ticks=_process_start_ticks(pid),
            token=secrets.token_hex(4),
        )

    @property
    def key(self) -> str:
        return f"{self.hostname}:{self.pid}:{self.start_ticks}:{self.token}"


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
        return not recorded_ticks or _process_start_ticks(agent.pid) == recorded_ticks
    now = now or timezone.now()
    return agent.heartbeat_at is not None and now - agent.heartbeat_at < HEARTBEAT_STALE_AFTER


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
        heartbeat_at=timezone.now(),
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
                heartbeat_at=timezone.now(),
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
                    heartbeat_at=timezone.now(),
                )
                _connected(project, agent, adopted=False)
            return agent
        except IntegrityError:
            continue
    raise RuntimeError("could not allocate a unique agent id")


def agent_heartbeat(*, agent: Agent, holder: ProcessHolder) -> bool:
    """Record that the holder is alive; False if another process has taken the agent over."""
    return bool(
        Agent.objects.filter(pk=agent.pk, holder=holder.key).update(heartbeat_at=timezone.now())
    )


def agent_release(*, agent: Agent, holder: ProcessHolder) -> None:
    """Let go of the agent on a clean shutdown, so the next process adopts it at once."""
    Agent.objects.filter(pk=agent.pk, holder=holder.key).update(holder="")


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
