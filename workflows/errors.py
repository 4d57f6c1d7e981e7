"""Domain errors. Each carries the exact message an agent or API client needs.

Interfaces map them: MCP tools raise ``ToolError`` with the message, the REST API picks the HTTP
status from the class (400 invalid input, 404 unknown name, 409 lost race).
"""

from __future__ import annotations


def sentence(text: str) -> str:
    """``text`` ending in one full stop, to be followed by another sentence: what a person or
    another error wrote may end in one already, or in a question or exclamation mark."""
    text = text.rstrip()
    return text if text.endswith((".", "!", "?", "…")) else f"{text}."


class WorkflowError(Exception):
    """Base class: a request the engine refused, with a message fit to show the caller."""

    @property
    def message(self) -> str:
        return str(self)


class NotFound(WorkflowError):
    """An unknown job, workflow, step or session."""


class InvalidInput(WorkflowError):
    """Outputs, paths or arguments that break a rule."""


class JobBroken(WorkflowError):
    """The job exists but its definition or files cannot be used."""


class Conflict(WorkflowError):
    """Another call changed the session first; nothing was changed by this one."""


class ProjectUnavailable(WorkflowError):
    """The project's folder is not on this machine, so its catalog cannot be read here."""


class Forbidden(WorkflowError):
    """The caller is who it says, but may not do this (another project, another's agent)."""
