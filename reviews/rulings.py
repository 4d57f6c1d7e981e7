"""A person's rulings on a step (override, request changes), recorded when given and delivered
to the agent's next hand-in; and the review round every verdict is numbered by.

A review round is one hand-in of a step run on which a verdict was recorded, whoever gave it
(an external reviewer, the agent's own review, a person). Rounds count from 1 per step run,
in every reviewer kind, so "how many rounds did this run take" reads the same from any
verdict. The round is not the quality attempt: attempts are what DeepWork's cap counts (a
person's ruling or a self-review's reason uses none), rounds are what the insights count.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from reviews.models import HumanDecision, ReviewResult, copied_from
from workflows import events, limits, rows
from workflows.errors import Conflict, InvalidInput
from workflows.events import User
from workflows.models import Agent, Event, Project, StepRun, WorkflowSession


def pending_decisions(run_ids: Iterable[int]) -> dict[str, HumanDecision]:
    """The rulings on these runs that the agent has not seen yet, newest per kind."""
    ids = list(run_ids)
    if not ids:
        return {}
    pending: dict[str, HumanDecision] = {}
    # Every hand-in asks: written out (``workflows.rows``), one shape per number of runs.
    for decision in rows.select_models(
        HumanDecision,
        where=f"step_run_id IN ({', '.join(['%s'] * len(ids))}) AND consumed_at IS NULL",
        params=ids,
        order_by="id",
    ):
        pending[decision.kind] = decision
    return pending


def next_rounds(run_ids: Iterable[int]) -> dict[int, int]:
    """Each run's round for the verdicts being recorded now: one past the highest recorded.

    Call it inside the transaction that records them: the runs are locked first, so two
    hand-ins recording at once take consecutive rounds instead of the same one.
    """
    ids = sorted(set(run_ids))
    list(StepRun.objects.select_for_update().filter(pk__in=ids).order_by("pk").values("pk"))
    highest = dict(
        ReviewResult.objects.filter(step_run_id__in=ids)
        .values("step_run")
        .annotate(top=Max("attempt"))
        .values_list("step_run", "top")
    )
    return {pk: (highest.get(pk) or 0) + 1 for pk in ids}


def changes_deliver(
    *, decision: HumanDecision, project: Project, session: WorkflowSession, agent: Agent
) -> str | None:
    """Hand a person's requested changes to the agent, or None when another hand-in took them.

    One transaction claims the ruling, records it as the person's failing verdict and writes
    ``changes_delivered``, so a crash leaves the request either pending or delivered and
    recorded. It uses no quality attempt: the person, not a review, sent the work back.
    """
    with transaction.atomic():
        claimed = HumanDecision.objects.filter(pk=decision.pk, consumed_at__isnull=True).update(
            consumed_at=timezone.now()
        )
        if not claimed:
            return None
        feedback = f"Changes requested by {decision.decided_by_name}: {decision.reason}"
        step_id = StepRun.objects.values_list("step_id", flat=True).get(pk=decision.step_run_id)
        ReviewResult.objects.create(
            step_run_id=decision.step_run_id,
            session=session,
            **copied_from(session),
            step_id=step_id,
            attempt=next_rounds([decision.step_run_id])[decision.step_run_id],
            run_each="step",
            passed=False,
            feedback=feedback,
            reviewer_kind=ReviewResult.Reviewer.HUMAN,
            reviewer=decision.decided_by_name,
        )
        events.event_record(
            kind=Event.Kind.CHANGES_DELIVERED,
            project=project,
            session=session,
            agent=agent,
            payload=events.ChangesDelivered(decision=decision.pk),
        )
    return feedback


def override_deliver(
    *, decision: HumanDecision, project: Project, session: WorkflowSession, agent: Agent
) -> None:
    """Mark a person's override as seen by the agent, with ``override_delivered``. Called in
    the advancing transaction: a hand-in that loses the race leaves the override pending."""
    delivered = HumanDecision.objects.filter(pk=decision.pk, consumed_at__isnull=True).update(
        consumed_at=timezone.now()
    )
    if delivered:
        events.event_record(
            kind=Event.Kind.OVERRIDE_DELIVERED,
            project=project,
            session=session,
            agent=agent,
            payload=events.OverrideDelivered(decision=decision.pk),
        )


def _decide(
    *, step_run: StepRun, kind: str, by: User, via: str, reason: str, field: str
) -> HumanDecision:
    if not reason or not reason.strip():
        raise InvalidInput("A reason is required so the agent and the team know why")
    limits.DECISION_REASON.check(field, reason)
    with transaction.atomic():
        run = StepRun.objects.select_related("session__project", "session__agent").get(
            pk=step_run.pk
        )
        if run.status != StepRun.Status.ACTIVE:
            raise Conflict(
                f"Step '{run.step_id}' of session '{run.session.session_id}' is {run.status}; "
                "only the current step can be overridden or sent back"
            )
        # A newer ruling replaces one the agent has not seen yet.
        HumanDecision.objects.filter(step_run=run, consumed_at__isnull=True).update(
            consumed_at=timezone.now()
        )
        decision = HumanDecision.objects.create(
            step_run=run,
            kind=kind,
            decided_by=by,
            decided_by_name=by.get_username(),
            via=via[:160],
            reason=reason.strip(),
        )
        is_override = kind == HumanDecision.Kind.OVERRIDE
        events.event_record(
            kind=Event.Kind.REVIEW_OVERRIDDEN if is_override else Event.Kind.CHANGES_REQUESTED,
            project=run.session.project,
            session=run.session,
            agent=run.session.agent,
            by=by,
            via=via,
            payload=(events.ReviewOverridden if is_override else events.ChangesRequested)(
                step_id=run.step_id, reason=decision.reason
            ),
        )
    return decision


def review_override(*, step_run: StepRun, reason: str, by: User, via: str) -> HumanDecision:
    """A person passes the step's review; the agent's next ``finished_step`` advances.
    ``via`` is the credential they ruled through (the dashboard, the admin, an API token)."""
    return _decide(
        step_run=step_run,
        kind=HumanDecision.Kind.OVERRIDE,
        by=by,
        via=via,
        reason=reason,
        field="reason",
    )


def review_request_changes(
    *, step_run: StepRun, feedback: str, by: User, via: str
) -> HumanDecision:
    """A person sends the step back; the agent's next ``finished_step`` gets the feedback.
    ``via`` as for ``review_override``."""
    return _decide(
        step_run=step_run,
        kind=HumanDecision.Kind.REQUEST_CHANGES,
        by=by,
        via=via,
        reason=feedback,
        field="feedback",
    )
