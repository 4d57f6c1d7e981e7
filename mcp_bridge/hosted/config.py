"""How ``/mcp`` serves: read once per process from settings or the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass

from django.conf import settings

from mcp_bridge.toolsets import parse_toolsets
from reviews.gate import REVIEW_TIMEOUT_SECONDS


def setting(name: str, default: str) -> str:
    """A Django setting if defined, else the environment variable of the same name."""
    value = getattr(settings, name, None)
    if value is None:
        value = os.environ.get(name) or default
    return str(value)


@dataclass(frozen=True)
class HostedConfig:
    """How ``/mcp`` serves: read once per process from settings or the environment."""

    toolsets: tuple[str, ...]
    allowed_hosts: tuple[str, ...]
    allowed_origins: tuple[str, ...]
    recheck_seconds: float
    external_runner: str | None
    external_runner_cmd: str | None
    quality_gate_timeout: int

    @classmethod
    def from_settings(cls) -> HostedConfig:
        return cls(
            toolsets=parse_toolsets(setting("DEEPWORK_MCP_TOOLSETS", "deepwork")),
            allowed_hosts=tuple(hosts_of(settings.ALLOWED_HOSTS)),
            allowed_origins=tuple(getattr(settings, "CSRF_TRUSTED_ORIGINS", ())),
            recheck_seconds=float(setting("DEEPWORK_MCP_RECHECK_SECONDS", "5")),
            external_runner=setting("DEEPWORK_MCP_EXTERNAL_RUNNER", "") or None,
            external_runner_cmd=setting("DEEPWORK_MCP_EXTERNAL_RUNNER_CMD", "") or None,
            quality_gate_timeout=int(
                setting("DEEPWORK_MCP_QUALITY_GATE_TIMEOUT", str(REVIEW_TIMEOUT_SECONDS))
            ),
        )


def hosts_of(django_hosts: list[str]) -> list[str]:
    """Django's ``ALLOWED_HOSTS`` as the guard's patterns: ``.example.com`` is the domain and
    every name under it; ``*`` allows any host."""
    hosts: list[str] = []
    for host in django_hosts:
        if host.startswith("."):
            hosts += [host[1:], f"*{host}"]
        else:
            hosts.append(host)
    return hosts
