"""Admin: review verdicts and human rulings, read-only; rule on a failed review through the
services (the same actions as on step runs)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet

from reviews.models import HumanDecision, ReviewResult
from workflows.admin import ReadOnlyAdmin, ReviewDecisionActions, SessionSearch, admin_link
from workflows.models import StepRun


@admin.register(ReviewResult)
class ReviewResultAdmin(SessionSearch, ReviewDecisionActions, ReadOnlyAdmin):
    change_select_related = ("session", "step_run__session")
    list_display = [
        "id",
        "session_link",
        "step_run_link",
        "attempt",
        "run_each",
        "target_file",
        "passed",
        "reviewer_kind",
        "reviewer",
        "created_at",
    ]
    list_display_links = ["id"]
    list_filter = ["passed", "reviewer_kind", "session__project", "created_at"]
    # str(review) labels each row's checkbox and reads the step run's session.
    list_select_related = ["session", "step_run__session"]
    search_fields = ["step_run__step_id", "run_each", "target_file"]
    search_help_text = "A session id (exactly), or a step id, review or file name."
    ordering = ["-id"]
    show_full_result_count = False
    actions = ["override_reviews", "request_changes"]

    @admin.display(description="session", ordering="session")
    def session_link(self, obj: ReviewResult) -> str:
        return admin_link(obj.session, obj.session.session_id)

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


class DecisionStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("pending", "Waiting for the agent"), ("delivered", "Delivered or replaced")]

    def queryset(self, request, queryset):
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

    @admin.display(description="step run", ordering="step_run")
    def step_run_link(self, obj: HumanDecision) -> str:
        return admin_link(obj.step_run, obj.step_run.step_id)

    @admin.display(description="session")
    def session_link(self, obj: HumanDecision) -> str:
        session = obj.step_run.session
        return admin_link(session, session.session_id)
