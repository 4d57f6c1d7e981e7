"""Wire models of the published-workflows endpoints (the workflow list and its runs)."""

from __future__ import annotations

from typing import Any, Literal

from ninja import Schema
from pydantic import Field

from api.schemas import AgentId, Name


class PublishedWorkflowOut(Schema):
    """One workflow of a published-workflows list."""

    id: str
    name: str
    description: str
    category: str
    version: str
    inputSchema: dict[str, Any]  # noqa: N815  (the list's wire name)
    executionType: Literal["sync", "async"]  # noqa: N815
    metadata: dict[str, Any]


class PublishedWorkflowList(Schema):
    count: int
    results: list[PublishedWorkflowOut]


class RunStartIn(Schema):
    workflow_id: Name = Field(description="The workflow's `id` as the list gives it.")
    input: dict[str, Any] = Field(
        default_factory=dict, description="Arguments matching the workflow's inputSchema."
    )
    agent_id: AgentId | None = Field(
        None, description="The agent whose stack the run joins; defaults to 'api:<username>'."
    )


class RunStartedOut(Schema):
    run_id: str
    workflow_id: str
    status: Literal["RUNNING", "COMPLETED", "FAILED", "CANCELLED"]
    result: Any = Field(description="What the start answered: a DeepWork workflow's first step.")


class RunStatusOut(Schema):
    run_id: str
    workflow_id: str
    status: Literal["RUNNING", "COMPLETED", "FAILED", "CANCELLED"]
    progress: dict[str, Any] | None
    result: Any
    error: str | None
    started_at: str | None
    ended_at: str | None


class RunCancelIn(Schema):
    reason: str = Field(min_length=1, max_length=10000, description="Why the run is cancelled.")
