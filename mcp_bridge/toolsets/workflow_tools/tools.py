"""A published workflow as an MCP tool: its description, search hint, metadata, and its
arguments checked against the workflow's input schema (FastMCP does not validate a hand-written
one)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fastmcp.exceptions import ToolError
from fastmcp.tools import Tool
from fastmcp.tools.base import ToolResult
from mcp.types import ToolAnnotations
from pydantic import PrivateAttr

from mcp_bridge.toolsets import hints
from mcp_bridge.toolsets.calls import refusal_error
from mcp_bridge.toolsets.workflow_tools.settings import SEARCH_HINT_CHARS, SEARCH_HINT_META
from workflow_tools.dag_source import DAG_SOURCE_KEY
from workflow_tools.selectors import DEEPWORK_SOURCE_KEY
from workflow_tools.sources import (
    PublishedWorkflow,
    WorkflowSource,
    arguments_problem,
    input_validator,
)
from workflows import json_schemas


class WorkflowTool(Tool):
    """A published workflow as a tool; ``run`` validates, then hands over to the provider."""

    _workflow: PublishedWorkflow = PrivateAttr()
    _source: WorkflowSource = PrivateAttr()
    _runner: Callable[[WorkflowTool, dict[str, Any]], Any] = PrivateAttr()
    _validator: Any = PrivateAttr(default=None)
    # Its entry of a tools/list answer, per protocol version, made once (see ``wire_tools``).
    _wire: dict[str, dict[str, Any]] = PrivateAttr(default_factory=dict)

    def validate_arguments(self, arguments: dict[str, Any]) -> None:
        if self._validator is None:
            try:
                self._validator = input_validator(self.parameters)
            except json_schemas.SchemaProblem as exc:
                raise ToolError(
                    f"Cannot check the arguments of {self.name}: its inputSchema is refused: "
                    f"{exc.message}"
                ) from None
        problem = arguments_problem(self.name, self._validator, arguments)
        if problem:
            raise refusal_error(problem)

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        self.validate_arguments(arguments)
        result: ToolResult = await self._runner(self, arguments)
        return result


def describe(workflow: PublishedWorkflow, source: WorkflowSource, timeout: float) -> str:
    if source.key == DEEPWORK_SOURCE_KEY:
        how = (
            "Starts this DeepWork workflow for you and answers its first step, as "
            "start_workflow does; continue with finished_step."
        )
    elif source.key == DAG_SOURCE_KEY:
        how = (
            "Executes this multi-agent workflow (it runs once) as execute_workflow does, with "
            "you as the triggering agent; its steps are handed to agents by role. "
            + (
                f"Answers each step's result when all are done (waiting at most {timeout:g} s, "
                "with progress notifications; after that the run keeps going and the error "
                "gives its run_id)."
                if workflow.execution_type == "sync"
                else "Answers a run_id at once; follow it with get_workflow_status."
            )
        )
    elif workflow.execution_type == "sync":
        how = (
            f"Runs the workflow at {source.label} and answers its result when it is done "
            f"(at most {timeout:g} s), with progress notifications."
        )
    else:
        how = (
            f"Starts the workflow at {source.label} and answers a run_id at once; follow it "
            "with get_workflow_status."
        )
    return (
        f"{workflow.description}\n\n{how}\n(Workflow ID: {workflow.id}; category: "
        f"{workflow.category}; version: {workflow.version}; execution: "
        f"{workflow.execution_type})"
    )


def workflow_hints(workflow: PublishedWorkflow, source: WorkflowSource) -> ToolAnnotations:
    """A workflow tool's annotations, titled with the workflow's name. Each call starts a new
    run. A project's DeepWork or DAG workflow runs here; what a remote one does is its
    source's business, so it is declared as able to do anything."""
    title = workflow.name[:200]
    if source.key in (DEEPWORK_SOURCE_KEY, DAG_SOURCE_KEY):
        return hints.writes(title)
    return hints.writes(title, destructive=True, open_world=True)


def search_hint(workflow: PublishedWorkflow) -> str:
    """A few words a client's tool search can match a deferred workflow tool by: the words of
    its id and name (once each), its category and the first line of its description, on one
    line and short, whatever the source sent."""
    words = dict.fromkeys(
        word.lower() for word in re.split(r"[\W_]+", f"{workflow.id} {workflow.name}") if word
    )
    summary = next((line for line in workflow.description.splitlines() if line.strip()), "")
    text = " ".join(f"{' '.join(words)} workflow ({workflow.category}): {summary}".split())
    if len(text) > SEARCH_HINT_CHARS:
        text = text[: SEARCH_HINT_CHARS + 1].rsplit(" ", 1)[0]
    return text


def workflow_meta(workflow: PublishedWorkflow, source: WorkflowSource) -> dict[str, Any]:
    """A workflow tool's ``_meta``: where it comes from, and its search hint."""
    return {
        "workflow_id": workflow.id,
        "source": source.key,
        SEARCH_HINT_META: search_hint(workflow),
    }
