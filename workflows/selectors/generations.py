"""Reads that tell the two DeepWork tool generations apart (``mcpserve --generation both``)
and that refuse mixing their stacks."""

from __future__ import annotations

from collections.abc import Iterable

from workflows.errors import InvalidInput
from workflows.models import Agent, Job, Project, WorkflowSession
from workflows.selectors.sessions import stack_for_agent


def workflow_agents(*, job_pks: Iterable[int]) -> dict[tuple[int, str], str | None]:
    """(job pk, workflow name) -> the workflow's ``agent`` field, for 0.14-format jobs."""
    agents: dict[tuple[int, str], str | None] = {}
    for pk, definition in Job.objects.filter(pk__in=list(job_pks)).values_list("pk", "definition"):
        if definition.get("job_format") == "0.14":
            for wf in definition.get("workflows", ()):
                agents[(pk, wf["name"])] = wf.get("agent")
    return agents


def names_agent_session(*, project: Project, session_id: str | None) -> bool:
    """Whether a call means 0.9.1's path: no ``session_id``, or a 0.9.1 session's id."""
    return not session_id or (
        WorkflowSession.objects.filter(
            project=project,
            session_id=session_id,
            generation=WorkflowSession.Generation.DEEPWORK_091,
        ).exists()
    )


def names_conversation_stack(
    *, project: Project, session_id: str | None, stack_agent_key: str
) -> bool:
    """Whether ``session_id`` names a 0.14 stack (one that ever held a workflow; its agent row
    is ``stack_agent_key``) and no live 0.9.1 session has that id: 0.9.1 ids win, they are
    what a 0.9.1 client holds."""
    if not session_id:
        return False
    if WorkflowSession.objects.filter(
        project=project,
        session_id=session_id,
        generation=WorkflowSession.Generation.DEEPWORK_091,
        status=WorkflowSession.Status.ACTIVE,
    ).exists():
        return False
    return Agent.objects.filter(project=project, agent_id=stack_agent_key).exists()


def refuse_nesting_in_agent_stack(*, agent: Agent) -> None:
    """A 0.14-style start is refused while ``agent``'s 0.9.1 stack is not empty."""
    items = stack_for_agent(agent=agent)
    if items:
        top = items[-1]
        raise InvalidInput(
            f"A workflow was started the DeepWork 0.9.1 way on this server and is still "
            f"active ({top.job_name}/{top.workflow_name}, step {top.step_id}); a DeepWork "
            "0.14 workflow (with session_id, inputs or agent_id) cannot nest inside it. "
            "Finish or abort it first, or start this workflow without those parameters."
        )


def refuse_nesting_in_conversation_stacks(
    *, project: Project, stacks: Iterable[tuple[str, Agent | None]]
) -> None:
    """A 0.9.1-style start is refused while one of these 0.14 stacks (session_id, its agent
    row) has an active workflow."""
    for conversation, agent in stacks:
        items = stack_for_agent(agent=agent) if agent is not None else ()
        if items:
            top = items[-1]
            raise InvalidInput(
                f"A workflow was started the DeepWork 0.14 way on this server and is still "
                f"active (session_id '{conversation}': {top.job_name}/{top.workflow_name}); "
                "a DeepWork 0.9.1 workflow (with instance_id, or no session_id) cannot nest "
                "inside it. Pass session_id to start this workflow on that stack, or "
                "finish or abort it first."
            )
