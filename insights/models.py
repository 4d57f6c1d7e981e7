"""Insight tallies: counts kept per day (and, for step times, per month) as work happens, so
that the insights pages read a few thousand summed rows instead of every session, run and
event of a year.

Written only by ``insights.tallies`` (a projection on the engine's one event writer, run in
the transaction that writes the event), rebuilt from the rows by ``manage.py insights_rebuild``.
Every read sums them, so two rows with the same key (possible only for a key with a NULL
agent) still add up right. DAG executions, counted as the sessions they are, are left out when
read: they have their own tab. Days are UTC days, as everywhere in the insights.

The tables were made when the tallies lived in ``workflows`` and keep their names.
"""

from __future__ import annotations

from django.db import models

from workflows.models import Agent, CopiedFromSession


class SessionTally(CopiedFromSession):
    """DeepWork sessions started on one day in one workflow, and how many of them have since
    been completed or aborted (the rest are active)."""

    day = models.DateField()
    started = models.IntegerField(default=0, db_default=0)
    completed = models.IntegerField(default=0, db_default=0)
    aborted = models.IntegerField(default=0, db_default=0)

    class Meta:
        db_table = "workflows_sessiontally"
        constraints = [
            # Leads with the day: it is also the index the date range reads.
            models.UniqueConstraint(
                fields=["day", "project", "generation", "job", "job_name", "workflow_name"],
                name="wf_sessiontally_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.job_name}/{self.workflow_name}: {self.started} started"


class Period(models.TextChoices):
    """A tally row counts one day, or one month (kept beside the days so that a long range
    reads a dozen month rows instead of hundreds of day rows)."""

    DAY = "day", "Day"
    MONTH = "month", "Month"


class PeriodTally(CopiedFromSession):
    """A tally row of one day, or of one month (a range reads the month rows of its whole
    months and the day rows of the days at its edges)."""

    Period = Period

    period = models.CharField(max_length=8, choices=Period.choices)
    # The day, or the first day of the month.
    period_start = models.DateField()

    class Meta:
        abstract = True
        constraints = [
            models.CheckConstraint(
                condition=models.Q(period__in=["day", "month"]),
                name="wf_%(class)s_period_valid",
            ),
        ]


class AgentTally(PeriodTally):
    """One agent's steps finished, failed review rounds and aborted sessions in one workflow,
    on one day or in one month."""

    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    steps_finished = models.IntegerField(default=0, db_default=0)
    reviews_failed = models.IntegerField(default=0, db_default=0)
    sessions_aborted = models.IntegerField(default=0, db_default=0)

    class Meta:
        db_table = "workflows_agenttally"
        constraints = [
            *PeriodTally.Meta.constraints,
            models.UniqueConstraint(
                fields=[
                    "period",
                    "period_start",
                    "project",
                    "agent",
                    "generation",
                    "job",
                    "job_name",
                    "workflow_name",
                ],
                name="wf_agenttally_key",
            ),
        ]
        indexes = [
            # The days of the few agents a chart draws one by one.
            models.Index(
                fields=["period", "agent", "period_start"], name="wf_agenttally_agent_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.period} {self.period_start} agent {self.agent_id}: {self.steps_finished}"


class StepTimeTally(PeriodTally):
    """How many runs of one step, completed in one day or one month, took a time that falls in
    one bucket of the duration histogram (``insights.histograms``). A range reads the month
    rows of its whole months and the day rows of the days at its edges."""

    step_id = models.CharField(max_length=255)
    entry_index = models.IntegerField()
    bucket = models.IntegerField()
    runs = models.IntegerField(default=0, db_default=0)

    class Meta:
        db_table = "workflows_steptimetally"
        constraints = [
            *PeriodTally.Meta.constraints,
            # Leads with the period and its start: the index the range reads.
            models.UniqueConstraint(
                fields=[
                    "period",
                    "period_start",
                    "project",
                    "generation",
                    "job",
                    "job_name",
                    "workflow_name",
                    "step_id",
                    "entry_index",
                    "bucket",
                ],
                name="wf_steptimetally_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.period} {self.period_start} {self.step_id} bucket {self.bucket}"
