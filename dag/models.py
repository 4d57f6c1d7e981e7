"""The DAG scheduler keeps its workflows in the engine's tables (a defined workflow is a ``Job``,
its execution a ``WorkflowSession``, its steps ``StepRun`` rows). ``DagRun`` is a proxy of the
execution, with no table of its own: it gives the scheduler a content type to hang its own
permissions on, so people completing human steps need no other context's permission."""

from __future__ import annotations

from workflows.models import WorkflowSession


class DagRun(WorkflowSession):
    """A DAG workflow's one execution, as the scheduler's permissions name it."""

    class Meta:
        proxy = True
        verbose_name = "DAG run"
        permissions = [
            ("decide_human_step", "Can complete or fail a DAG step assigned to people"),
        ]
