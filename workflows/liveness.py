"""Agent liveness: an agent is responsive, and may be handed work, while its lease runs.

Whoever renews a lease chooses its length: a running ``mcpserve`` briefly and often
(``process_lease_seconds``), an agent renewed only by its own calls for longer
(``responsive_seconds``). The engine's agent services renew and end leases; the DAG scheduler
reads them to choose who gets a step.
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils import timezone

if TYPE_CHECKING:
    # The ORM is imported where a filter is built: mcpserve reads this module (its holder, the
    # lease) before it loads Django.
    from django.db.models import Q

DEFAULT_RESPONSIVE_SECONDS = 300.0
DEFAULT_LEASE_SECONDS = 30.0


def responsive_seconds() -> float:
    """The lease of an agent renewed only by its own calls (hosted ``/mcp``, the agents tools
    naming another agent): it must outlast the work an agent does on a step between two calls
    (``DEEPWORK_AGENT_RESPONSIVE_SECONDS``; 300 s)."""
    return float(getattr(settings, "DEEPWORK_AGENT_RESPONSIVE_SECONDS", DEFAULT_RESPONSIVE_SECONDS))


def process_lease_seconds() -> float:
    """The lease of an agent a running ``mcpserve`` holds: its heartbeat thread renews it every
    third of it whatever the agent is doing, so a crash is noticed within seconds
    (``DEEPWORK_AGENT_LEASE_SECONDS``; 30 s, never longer than ``responsive_seconds``)."""
    lease = float(getattr(settings, "DEEPWORK_AGENT_LEASE_SECONDS", DEFAULT_LEASE_SECONDS))
    return min(lease, responsive_seconds())


def lease_end(seconds: float, now: datetime | None = None) -> datetime:
    """When a lease of ``seconds`` renewed ``now`` runs out."""
    return (now or timezone.now()) + timedelta(seconds=seconds)


# The one responsiveness rule: an agent is responsive, and gets DAG steps, while its lease runs
# (``Agent.lease_until`` in the future). Whoever renews a lease chooses its length; an agent that
# left cleanly has none.


def is_responsive(lease_until: datetime | None, now: datetime | None = None) -> bool:
    return lease_until is not None and lease_until > (now or timezone.now())


def responsive_q(now: datetime, prefix: str = "") -> Q:
    """``is_responsive`` as a filter on agents (``prefix``: the path to the agent, e.g.
    ``"assigned_agent__"``)."""
    from django.db.models import Q

    return Q(**{f"{prefix}lease_until__gt": now})


def unresponsive_q(now: datetime, prefix: str = "") -> Q:
    """The agents ``responsive_q`` leaves out (a lease that ran out, or none)."""
    from django.db.models import Q

    return Q(**{f"{prefix}lease_until__isnull": True}) | Q(**{f"{prefix}lease_until__lte": now})


def liveness(*, lease_until: datetime | None, left_at: datetime | None, now: datetime) -> str:
    """``responsive``; ``gone`` (it left cleanly: its process exited or was stopped); or
    ``silent`` (its lease ran out without a word: crashed, hung, or never renewed)."""
    if is_responsive(lease_until, now):
        return "responsive"
    return "gone" if left_at is not None else "silent"


def process_start_ticks(pid: int) -> str:
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
            start_ticks=process_start_ticks(pid),
            token=secrets.token_hex(4),
        )

    @property
    def key(self) -> str:
        return f"{self.hostname}:{self.pid}:{self.start_ticks}:{self.token}"
