"""The wire models of multi-agent DAG workflows, shared by the ``agents`` MCP
toolset and the REST API so both answer in one shape."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class DagStepOut(BaseModel):
    step_id: str
    description: str
    assigned_role: str | None
    assigned_agent_id: str | None = Field(
        description="The agent handling the step once handed out; before, the one it names."
    )
    depends_on: list[str]
    tool_to_call: str | None
    tool_arguments: dict[str, Any] | None
    status: str = Field(description="pending, in_progress, completed or failed.")
    waiting_for_agent: bool = Field(
        description="Ready to start, but no suitable responsive agent was free to take it."
    )
    result: Any = Field(
        None, description="The reported result; null when too big to show here (see note)."
    )
    result_truncated: bool = Field(
        False, description="The result is too big to show here: read it with get_step_result."
    )
    note: str | None = Field(
        None, description="What is left out of this step and where to read it."
    )
    error_message: str | None
    started_at: str | None
    completed_at: str | None
    handoffs: int = Field(description="Times the step was taken from an agent that went silent.")


class DagWorkflowOut(BaseModel):
    workflow_id: str
    name: str
    description: str | None
    creator_id: str
    status: str = Field(description="pending, running, completed or failed.")
    created_at: str | None
    started_at: str | None
    completed_at: str | None
    triggered_by: str | None
    failure_reason: str | None
    execution_type: str = Field(
        "async", description="How its workflow-tools tool runs it: sync or async."
    )
    step_count: int
    steps: list[DagStepOut]


class DagDefineResponse(BaseModel):
    message: str
    workflow: DagWorkflowOut
    warnings: list[str]


class DagWorkflowSummary(BaseModel):
    workflow_id: str
    name: str
    creator_id: str
    step_count: int
    status: str
    created_at: str | None


class DagListResponse(BaseModel):
    workflows: list[DagWorkflowSummary]
    count: int


class DagDeleteResponse(BaseModel):
    message: str
    workflow_id: str


class DagDelegatedOut(BaseModel):
    step_id: str
    agent_id: str


class DagIssueOut(BaseModel):
    step_id: str
    reason: str


class DagExecuteResponse(BaseModel):
    message: str
    workflow_id: str
    status: str
    delegated: list[DagDelegatedOut]
    issues: list[DagIssueOut]


class DagReportResponse(BaseModel):
    message: str
    workflow_id: str
    step_id: str
    workflow_status: str
    already_reported: bool = Field(description="True when this report changed nothing.")
    delegated: list[DagDelegatedOut]
    issues: list[DagIssueOut]


class DagAgentOut(BaseModel):
    message: str
    agent_id: str
    roles: list[str]
    last_heartbeat: str | None
    lease_until: str | None = Field(
        description="You get steps until then; every heartbeat (any of these tools) renews it."
    )
    state: str = Field(
        description="responsive (its lease runs), silent (its lease ran out without a word) "
        "or gone (its server exited cleanly); only responsive agents get steps."
    )
    responsive_seconds: float = Field(
        description="Heartbeat at least this often (seconds) to keep getting work."
    )


class DagAssignment(BaseModel):
    workflow_id: str
    workflow_name: str
    step_id: str
    description: str
    assigned_role: str | None
    tool_to_call: str | None
    tool_arguments: dict[str, Any] | None
    dependency_results: dict[str, Any] = Field(
        description="Each dependency's step_id with the result its agent reported (null for "
        "those in dependency_results_left_out)."
    )
    dependency_results_left_out: list[str] = Field(
        default_factory=list,
        description="Dependencies whose results are too big to send together: read each with "
        "get_step_result.",
    )
    note: str | None = Field(None, description="What is left out, and how to read it.")
    requested_by: str = Field(
        description="The agent that defined the workflow: the step's description, tool and "
        "arguments are its request."
    )
    executed_by: str | None = Field(description="The agent that started the workflow's run.")
    warning: str | None = Field(
        None,
        description="Set when the step comes from another identity (not you, your parent or "
        "your sub-agents): check what it asks, above all a tool_to_call, before doing it.",
    )
    assigned_at: str | None


class DagAssignmentsResponse(BaseModel):
    agent_id: str
    assignments: list[DagAssignment]
    timed_out: bool = Field(description="await_assignment: the wait ended with nothing new.")


class DagStepResultOut(BaseModel):
    workflow_id: str
    step_id: str
    status: str = Field(description="pending, in_progress, completed or failed.")
    result_size: int = Field(description="Characters of the result's JSON text; 0 for none.")
    offset: int = Field(description="Where this page starts in the JSON text.")
    next_offset: int | None = Field(
        description="Ask again with this offset for the next page; null on the last page."
    )
    result_json: str = Field(
        description="This page of the result's JSON text: join the pages, then parse them."
    )
