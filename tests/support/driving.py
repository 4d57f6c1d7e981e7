"""Starting a workflow and finishing a step synchronously, without the quality gate: how tests
drive sessions along.

Answers as the ``finished_step`` tool does, in the DeepWork dialect's wire model.

Production hands in through ``reviews.services.step_finish_gated``; tests that only need a
session moved on (or a seam between validation and the advance) use this.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reviews.services import step_finish_gated
from workflows.dialects import deepwork
from workflows.models import Agent, Project
from workflows.schemas import FinishedStepResponse, StartWorkflowResponse
from workflows.services.catalog import Catalog
from workflows.services.sessions import StepCheckpoint, step_advance, step_checkpoint

# Judges the checkpoint: None lets it pass, an answer stops it (e.g. ``needs_work``).
QualityGate = Callable[[StepCheckpoint], FinishedStepResponse | None]


def workflow_start(
    project: Project, agent: Agent, job: str = "demo", workflow: str = "main"
) -> StartWorkflowResponse:
    """``start_workflow`` of ``job``'s ``workflow`` (the demo project's by default), as the tool
    answers it."""
    return deepwork.start_workflow(
        project=project,
        agent=agent,
        catalog=Catalog(project).view(),
        job_name=job,
        workflow_name=workflow,
        goal="g",
    )


def step_finish(
    *,
    project: Project,
    agent: Agent,
    outputs: dict[str, str | list[str]],
    notes: str | None = None,
    session_id: str | None = None,
    quality_gate: QualityGate | None = None,
) -> FinishedStepResponse:
    """Validate the hand-in, let ``quality_gate`` judge it, then advance the session."""
    checkpoint = step_checkpoint(
        project=project, agent=agent, outputs=outputs, notes=notes, session_id=session_id
    )
    if quality_gate is not None:
        verdict = quality_gate(checkpoint)
        if verdict is not None:
            return verdict
    return deepwork.finished_step(step_advance(checkpoint=checkpoint))


async def finished_step(**kwargs: Any) -> FinishedStepResponse:
    """``step_finish_gated`` (same arguments) answered as the ``finished_step`` tool and the REST
    finish answer it."""
    return deepwork.finished_step(await step_finish_gated(**kwargs))
