"""How this process runs: from a clone or installed, and what its entry point started it to do.

``deepwork-server mcp`` and ``manage.py mcpserve`` serve agents only: they call
``serve_mcp_only()`` before Django reads its settings, and the settings then load the lean app
registry. The flag lives in this process, not in the environment, so that nothing the server
starts (a reviewer, the migration child, a shell an agent opens) inherits it.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

# The folder holding the apps: a clone's checkout, or site-packages when installed.
BASE_DIR = Path(__file__).resolve().parent.parent

_serving_mcp = False


def serve_mcp_only() -> None:
    """Mark this process as an MCP server; call before Django reads its settings."""
    global _serving_mcp
    _serving_mcp = True


def serving_mcp() -> bool:
    return _serving_mcp


def running_from_clone() -> bool:
    """Whether this code runs from a checkout (``make run``, ``pip install -e``), not from an
    installed wheel: only a checkout has manage.py and pyproject.toml beside the apps."""
    return (BASE_DIR / "manage.py").is_file() and (BASE_DIR / "pyproject.toml").is_file()


def manage_command() -> str:
    """How a person at the shell runs a management command of this install."""
    return "python manage.py" if running_from_clone() else "deepwork-server manage"


def server_version() -> str:
    """This install's version, as its package metadata gives it (a clone installed with
    ``pip install -e`` has metadata too)."""
    try:
        return importlib.metadata.version("deepwork-server")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0+unknown"
