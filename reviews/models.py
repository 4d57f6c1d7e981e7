"""Quality-gate verdicts and the human decisions that overrule them."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from workflows.models import CopiedFromSession, StepRun, WorkflowSession


class ReviewResult(CopiedFromSession):
    """One review of one attempt at a step: a reviewer's verdict, or an override of it."""

    class Reviewer(models.TextChoices):
        SELF = "self", "Agent self-review"
        EXTERNAL = "external", "External reviewer"
        HUMAN = "human", "Human"

    step_run = models.ForeignKey(
        StepRun,
        on_delete=models.CASCADE,
        related_name="reviews",
        db_index=False,  # rv_result_steprun_idx leads with it
    )
    session = models.ForeignKey(
        WorkflowSession,
        on_delete=models.CASCADE,
        related_name="reviews",
        db_index=False,  # rv_result_session_idx leads with it
    )
    # The step run's ``step_id`` (which never changes), kept here so that the insights group
    # verdicts by step without joining every review to the large step-run table.
    step_id = models.CharField(max_length=255)
    # With the session's project, generation, job and workflow (``CopiedFromSession``).
    attempt = models.IntegerField()
    run_each = models.CharField(max_length=255)
    target_file = models.CharField(max_length=1024, null=True, blank=True)
    passed = models.BooleanField()
    feedback = models.TextField(blank=True, default="")
    criteria_results = models.JSONField(default=list, blank=True)
    reviewer_kind = models.CharField(max_length=16, choices=Reviewer.choices)
    reviewer = models.CharField(
        max_length=255, blank=True, default="", help_text="The runner, command or person."
    )
    override_reason = models.TextField(null=True, blank=True)
    error = models.TextField(
        null=True, blank=True, help_text="What went wrong when the reviewer itself failed."
    )
    duration_ms = models.IntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        permissions = [
            ("decide_review", "Can override a review or request changes on a step"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(reviewer_kind__in=["self", "external", "human"]),
                name="reviews_reviewresult_reviewer_kind_valid",
            ),
            # A writer that forgets the copied step id fails loudly instead of leaving the
            # verdict out of the insights.
            models.CheckConstraint(
                condition=~Q(step_id=""), name="reviews_reviewresult_step_id_set"
            ),
        ]
        indexes = [
            # A session page lists every review attempt of every step run.
            models.Index(fields=["session", "id"], name="rv_result_session_idx"),
            models.Index(fields=["step_run", "attempt"], name="rv_result_steprun_idx"),
            # Insights: the verdicts given in a date range (pass rates, rounds, criteria,
            # reviewers' time), read from the index alone, without the wide feedback rows.
            models.Index(
                fields=[
                    "created_at",
                    "reviewer_kind",
                    "step_id",
                    "run_each",
                    "attempt",
                    "passed",
                    "step_run",
                    "duration_ms",
                ],
                name="rv_result_insights_idx",
            ),
        ]

    def __str__(self) -> str:
        verdict = "passed" if self.passed else "failed"
        return f"{self.step_run} attempt {self.attempt} {self.run_each}: {verdict}"


class HumanDecision(models.Model):
    """A person's ruling on a step, honoured by the agent's next ``finished_step``."""

    class Kind(models.TextChoices):
        OVERRIDE = "override", "Override the review (pass)"
        REQUEST_CHANGES = "request_changes", "Request changes"

    step_run = models.ForeignKey(StepRun, on_delete=models.CASCADE, related_name="decisions")
    kind = models.CharField(max_length=24, choices=Kind.choices)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    decided_by_name = models.CharField(max_length=150)
    # The credential the person ruled through: the dashboard, the admin, or which API token.
    via = models.CharField(max_length=160, blank=True, default="")
    reason = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    consumed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["override", "request_changes"]),
                name="reviews_humandecision_kind_valid",
            ),
            # One pending ruling per step run: a newer ruling replaces the older one.
            models.UniqueConstraint(
                fields=["step_run"],
                condition=Q(consumed_at__isnull=True),
                name="reviews_humandecision_one_pending_per_run",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} by {self.decided_by_name} on {self.step_run}"


copied_from = CopiedFromSession.copied_from
