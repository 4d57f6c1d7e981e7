"""Reads of review results and human decisions, for every interface.

Here rather than in ``workflows.selectors`` because they read this app's models, and
``workflows`` does not import ``reviews``.
"""

from __future__ import annotations

from django.db.models import Prefetch

from reviews.models import HumanDecision, ReviewResult
from workflows.errors import NotFound
from workflows.models import StepRun, WorkflowSession


def session_with_reviews(*, session_id: str) -> WorkflowSession:
    """One session with its project, agent and parent, and its step runs in the order they
    started, each with its review results and human decisions: four queries. A run's start
    snapshot (up to thousands of paths, for the comparison only) is not read."""
    session = (
        WorkflowSession.objects.select_related("project", "agent", "parent")
        .prefetch_related(
            Prefetch("runs", queryset=StepRun.objects.defer("files_snapshot").order_by("id")),
            Prefetch("runs__reviews", queryset=ReviewResult.objects.order_by("id")),
            Prefetch("runs__decisions", queryset=HumanDecision.objects.order_by("id")),
        )
        .filter(session_id=session_id)
        .first()
    )
    if session is None:
        raise NotFound(f"Session '{session_id}' not found")
    return session
