"""Admin: review verdicts and human rulings, read-only; rule on a step's review through the
services, from its step runs or from its failed reviews.

The step run's admin is registered here rather than in ``workflows``: its page is where a human
reads a step's reviews and rules on them, and ``workflows`` knows nothing of reviews.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import admin
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpRequest

from reviews.models import HumanDecision, ReviewResult
from reviews.rulings import review_override, review_request_changes
from workflows.admin_base import (
    AdminAction,
    ReadOnlyAdmin,
    ReadOnlyInline,
    ReasonCall,
    ReasonPage,
    SessionSearch,
    admin_link,
    plural,
    reason_action,
    session_column,
)
from workflows.events import VIA_ADMIN
from workflows.models import StepRun

OVERRIDE = ReasonPage(
    title="Override the review of the selected step runs (pass them)",
    intro="The selected step runs (or the step runs of the selected reviews) pass their quality "
    "review on the agent's next finished_step, whatever the reviewers said.",
    help_text="Why the step passes; the agent and the team see this.",
    submit="Override the reviews",
)
REQUEST_CHANGES = ReasonPage(
    title="Request changes on the selected step runs",
    intro="The agent's next finished_step on the selected step runs (or the step runs of the "
    "selected reviews) answers needs_work with this feedback.",
    label="Feedback",
    help_text="What the agent must change.",
    submit="Request changes",
)


def ruling(page: ReasonPage, done: Callable[[int], str]) -> Callable[[ReasonCall], AdminAction]:
    """An action ruling on the step runs of the selection, for those who may decide reviews."""
    return reason_action(
        page,
        permission="decide_review",
        objects=lambda modeladmin, queryset: modeladmin.step_runs_of(queryset),
        done=done,
    )


class ReviewRulingAdmin(SessionSearch, ReadOnlyAdmin):
    """Rule on step runs' reviews: override (pass) or request changes. The agent gets the ruling
    on its next ``finished_step``. Each admin maps its selection to step runs."""

    actions = ["override_reviews", "request_changes"]
    ordering = ["-id"]
    show_full_result_count = False
    session_link = session_column()

    def step_runs_of(self, queryset: QuerySet) -> QuerySet[StepRun]:
        raise NotImplementedError

    def has_decide_review_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("reviews.decide_review")

    @ruling(OVERRIDE, done=lambda n: f"Overrode the review of {plural(n, 'step run')}.")
    def override_reviews(self, run: StepRun, reason: str, by: User) -> None:
        review_override(step_run=run, reason=reason, by=by, via=VIA_ADMIN)

    @ruling(REQUEST_CHANGES, done=lambda n: f"Requested changes on {plural(n, 'step run')}.")
    def request_changes(self, run: StepRun, feedback: str, by: User) -> None:
        review_request_changes(step_run=run, feedback=feedback, by=by, via=VIA_ADMIN)


# A step run and its reviews -----------------------------------------------------------------------


# What a review was of, who gave it and what they said, in the step run's inline and the list.
VERDICT = ["attempt", "run_each", "target_file", "passed", "reviewer_kind", "reviewer"]


class ReviewResultInline(ReadOnlyInline):
    model = ReviewResult
    fields = [
        *VERDICT,
        "feedback",
        "criteria_results",
        "override_reason",
        "error",
        "created_at",
    ]
    ordering = ["id"]
    select_related = ("step_run__session",)


class HumanDecisionInline(ReadOnlyInline):
    model = HumanDecision
    fields = ["kind", "decided_by_name", "reason", "created_at", "consumed_at"]
    ordering = ["id"]
    select_related = ("step_run__session",)


@admin.register(StepRun)
class StepRunAdmin(ReviewRulingAdmin):
    change_select_related = ("session", "step_def")
    list_display = [
        "__str__",
        "session_link",
        "step_id",
        "entry_index",
        "status",
        "quality_attempts",
        "started_at",
        "completed_at",
    ]
    list_filter = ["status", "session__project"]
    list_select_related = ["session"]
    search_fields = ["step_id__exact"]
    search_help_text = "A session id or a step id, exactly."
    inlines = [ReviewResultInline, HumanDecisionInline]

    def step_runs_of(self, queryset: QuerySet) -> QuerySet[StepRun]:
        return queryset


@admin.register(ReviewResult)
class ReviewResultAdmin(ReviewRulingAdmin):
    change_select_related = ("session", "step_run__session")
    list_display = ["id", "session_link", "step_run_link", *VERDICT, "created_at"]
    list_display_links = ["id"]
    list_filter = ["passed", "reviewer_kind", "session__project", "created_at"]
    # str(review) labels each row's checkbox and reads the step run's session.
    list_select_related = ["session", "step_run__session"]
    search_fields = ["step_run__step_id", "run_each", "target_file"]
    search_help_text = "A session id (exactly), or a step id, review or file name."

    @admin.display(description="step run", ordering="step_run")
    def step_run_link(self, obj: ReviewResult) -> str:
        return admin_link(obj.step_run, f"{obj.step_run.step_id} ({obj.step_run.status})")

    def step_runs_of(self, queryset: QuerySet) -> QuerySet[StepRun]:
        # Several failed reviews of one step run make one ruling on that run.
        return (
            StepRun.objects.filter(pk__in=queryset.values("step_run_id"))
            .select_related("session")
            .order_by("id")
        )


# Human rulings ------------------------------------------------------------------------------------


class DecisionStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("pending", "Waiting for the agent"), ("delivered", "Delivered or replaced")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "pending":
            return queryset.filter(consumed_at__isnull=True)
        if self.value() == "delivered":
            return queryset.filter(consumed_at__isnull=False)
        return queryset


@admin.register(HumanDecision)
class HumanDecisionAdmin(SessionSearch, ReadOnlyAdmin):
    change_select_related = ("step_run__session", "decided_by")
    list_display = [
        "id",
        "kind",
        "step_run_link",
        "session_link",
        "decided_by_name",
        "reason",
        "created_at",
        "consumed_at",
    ]
    list_display_links = ["id"]
    list_filter = ["kind", DecisionStateFilter]
    list_select_related = ["step_run__session"]
    session_lookup = "step_run__session_id"
    search_fields = ["decided_by_name", "reason"]
    search_help_text = "A session id (exactly), or who decided, or words of the reason."
    date_hierarchy = "created_at"
    ordering = ["-id"]
    show_full_result_count = False
    session_link = session_column("step_run.session", ordering=None)

    @admin.display(description="step run", ordering="step_run")
    def step_run_link(self, obj: HumanDecision) -> str:
        return admin_link(obj.step_run, obj.step_run.step_id)
