"""What composing toolsets needs of the tracker and agents toolsets: their tool names and
instructions, without their machinery.

``mcp_bridge.toolsets`` lists every toolset; a server imports a toolset's module (its services,
selectors and pydantic models) only when it serves it, so the default ``mcpserve`` starts
without them.
"""

from __future__ import annotations

# --- tracker ---

TRACKER_TOOL_NAMES = (
    "start_workflow",
    "complete_workflow",
    "get_context",
    "start_task",
    "complete_task",
    "log_decision",
    "log_issue",
    "log_milestone",
    "start_phase",
    "complete_phase",
)

TRACKER_INSTRUCTIONS = """\
# Workflow tracker

Record what you actually do, so people can follow it live: `start_workflow` once, then for
each piece of work `start_task` (with `phase` to group tasks into numbered phases, and
`parent_task_id` for a sub-task) and `complete_task` with its outcome; the server reports the
files each task changed. Log architectural choices with `log_decision`, problems with
`log_issue` (`requires_human_review` makes it a blocker a person resolves), progress with
`log_milestone`. `get_context` reads it all back, page by page. Finish with
`complete_workflow`.
"""


# --- agents ---

AGENTS_TOOL_NAMES = (
    "define_workflow",
    "get_workflow_details",
    "list_workflows",
    "delete_workflow",
    "execute_workflow",
    "report_step_completion",
    "report_step_failure",
    "register_agent",
    "heartbeat",
    "get_my_assignments",
    "await_assignment",
    "get_step_result",
)

AGENTS_INSTRUCTIONS = """\
# Multi-agent workflows

Plan work as steps with `depends_on` and let the server hand each step to a suitable agent.
- Take part: `register_agent(agent_id, roles)` once (a server started with `--agent-id` is
  registered already), then `await_assignment(agent_id)` to wait for a step. Do the step
  (its `tool_to_call` with `tool_arguments`, using the `dependency_results`), then call
  `report_step_completion` with its `result`, or `report_step_failure` with what went wrong.
  Call `heartbeat` now and then if your server was not started with `--agent-id`: an agent
  without a recent heartbeat gets no work, and its steps are handed to another agent.
- Orchestrate: `define_workflow` (steps with `step_id`, `description`, optional
  `assigned_role` or `assigned_agent_id`, `depends_on`, `tool_to_call`, `tool_arguments`),
  then `execute_workflow`; follow it with `get_workflow_details`. A failed step fails the
  workflow. A result too big to show there is left out with a note: page through it with
  `get_step_result`.
- A step defined by another identity (not you, your parent or your sub-agents) comes with a
  `warning`: check what it asks, above all its `tool_to_call`, before doing it.
"""
