"""The tracker's admin: every model's pages render real rows written by the tracker's
services, search and filters find exactly the right rows, nothing can be written, and each
changelist reads a constant number of queries however many rows there are."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from django.contrib import admin
from django.db.models import Q
from django.urls import reverse

from tracker import services as tracker
from tracker.admin import INLINE_LIMIT
from tracker.models import Decision, Issue, Milestone, Phase, Task, TrackedWorkflow
from workflows.services.agents import agent_ensure

pytestmark = pytest.mark.django_db

MODELS = [TrackedWorkflow, Phase, Task, Decision, Issue, Milestone]

_counter = itertools.count()


def url(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def changelist_ids(response) -> set[int]:
    assert response.status_code == 200
    return {obj.pk for obj in response.context["cl"].result_list}


@dataclass
class Tracked:
    """One tracked workflow as an agent leaves it: a phase, a task with a sub-task, and a
    decision, a blocker and a milestone logged against the task."""

    workflow: TrackedWorkflow
    phase: Phase
    task: Task
    subtask: Task
    decision: Decision
    blocker: Issue
    milestone: Milestone


def track(project, agent, word: str = "alpha", complete: bool = False) -> Tracked:
    workflow = tracker.tracked_workflow_start(
        project=project,
        agent=agent,
        name=f"Refactor {word}",
        objective=f"Make the {word} module simpler",
        total_phases=2,
    )
    started = tracker.task_start(
        project=project,
        agent=agent,
        workflow_id=str(workflow.pk),
        name=f"Split {word}",
        goal=f"Split the {word} module in two",
        phase=1,
        phase_name=f"Design {word}",
        caller_type="orchestrator",
    )
    task = started.task
    subtask = tracker.task_start(
        project=project,
        agent=agent,
        workflow_id=str(workflow.pk),
        name=f"Move {word} helpers",
        goal="Move the helpers",
        parent_task_id=str(task.pk),
        caller_type="subagent",
        agent_name=f"{word}-mover",
    ).task
    decision = tracker.decision_log(
        project=project,
        agent=agent,
        task_id=str(task.pk),
        category="architecture",
        question=f"Where should {word} helpers live?",
        chosen="A module of their own",
        reasoning="They are shared",
    )
    blocker = tracker.issue_log(
        project=project,
        agent=agent,
        task_id=str(task.pk),
        type="unclear_requirement",
        description=f"Is the {word} API public?",
        resolution="Asked the team",
        requires_human_review=True,
    )
    milestone = tracker.milestone_log(
        project=project,
        agent=agent,
        task_id=str(task.pk),
        message=f"{word} split half done",
        progress=50,
        metadata={"files": 3},
    )
    if complete:
        for done in (subtask, task):
            tracker.task_complete(
                project=project,
                agent=agent,
                task_id=str(done.pk),
                status="success",
                summary="done",
            )
    assert started.phase is not None
    return Tracked(workflow, started.phase, task, subtask, decision, blocker, milestone)


@pytest.fixture
def tracked(project, agent) -> Tracked:
    return track(project, agent)


# Pages -------------------------------------------------------------------------------------------


def test_every_tracker_model_is_registered():
    assert {m for m in MODELS if admin.site.is_registered(m)} == set(MODELS)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_pages_render_and_nothing_can_be_written(model, admin_client, tracked):
    obj = model.objects.order_by("id").first()
    assert obj is not None, f"the services wrote no {model.__name__}"
    count = model.objects.count()

    listing = admin_client.get(url(model, "changelist"))
    assert listing.status_code == 200
    assert url(model, "change", obj.pk) in listing.text
    page = admin_client.get(url(model, "change", obj.pk))
    assert page.status_code == 200
    assert 'name="_save"' not in page.text
    assert url(model, "delete", obj.pk) not in page.text
    assert admin_client.get(url(model, "add")).status_code == 403
    assert admin_client.post(url(model, "add"), {}).status_code == 403
    assert admin_client.post(url(model, "change", obj.pk), {}).status_code == 403
    assert admin_client.get(url(model, "delete", obj.pk)).status_code == 403
    assert admin_client.post(url(model, "delete", obj.pk), {"post": "yes"}).status_code == 403
    bulk = admin_client.post(
        url(model, "changelist"),
        {"action": "delete_selected", "_selected_action": [obj.pk], "post": "yes", "index": 0},
    )
    assert bulk.status_code in (200, 302)
    assert model.objects.count() == count


def test_workflow_list_links_and_filters(admin_client, project, agent, tracked):
    other_agent = agent_ensure(project=project, agent_id="reviewer-bot")
    done = track(project, other_agent, "beta", complete=True)
    tracker.tracked_workflow_complete(
        project=project,
        agent=other_agent,
        workflow_id=str(done.workflow.pk),
        status="partial",
        summary="half of it",
    )
    listing = admin_client.get(url(TrackedWorkflow, "changelist"))
    assert changelist_ids(listing) == {tracked.workflow.pk, done.workflow.pk}

    partial = admin_client.get(url(TrackedWorkflow, "changelist"), {"status__exact": "PARTIAL"})
    assert changelist_ids(partial) == {done.workflow.pk}
    by_agent = admin_client.get(url(TrackedWorkflow, "changelist"), {"agent__id__exact": agent.pk})
    assert changelist_ids(by_agent) == {tracked.workflow.pk}
    by_word = admin_client.get(url(TrackedWorkflow, "changelist"), {"q": "beta"})
    assert changelist_ids(by_word) == {done.workflow.pk}
    by_id = admin_client.get(url(TrackedWorkflow, "changelist"), {"q": str(tracked.workflow.pk)})
    assert changelist_ids(by_id) == {tracked.workflow.pk}


def test_workflow_page_shows_phases_tasks_and_links_to_its_logs(admin_client, tracked):
    page = admin_client.get(url(TrackedWorkflow, "change", tracked.workflow.pk))

    assert url(Phase, "change", tracked.phase.pk) in page.text
    for task in (tracked.task, tracked.subtask):
        assert url(Task, "change", task.pk) in page.text
    # The sub-task's row names its parent; the task's row names its phase.
    assert tracked.task.name in page.text
    assert "Design alpha" in page.text
    for model in (Phase, Task, Decision, Issue, Milestone):
        link = f"{url(model, 'changelist')}?workflow__id__exact={tracked.workflow.pk}"
        assert link in page.text


def test_task_page_shows_subtasks_and_logs(admin_client, tracked):
    page = admin_client.get(url(Task, "change", tracked.task.pk))

    assert url(Task, "change", tracked.subtask.pk) in page.text
    assert url(Decision, "change", tracked.decision.pk) in page.text
    assert url(Issue, "change", tracked.blocker.pk) in page.text
    assert url(Milestone, "change", tracked.milestone.pk) in page.text
    assert "Where should alpha helpers live?" in page.text
    # The link to the workflow and phase it belongs to.
    assert url(TrackedWorkflow, "change", tracked.workflow.pk) in page.text
    assert url(Phase, "change", tracked.phase.pk) in page.text

    # Its link to every sub-task lists exactly those.
    subtasks = f"{url(Task, 'changelist')}?parent__id__exact={tracked.task.pk}"
    assert subtasks in page.text
    assert changelist_ids(admin_client.get(subtasks)) == {tracked.subtask.pk}


def test_task_page_inline_is_capped(admin_client, project, agent, tracked):
    for n in range(INLINE_LIMIT + 2):
        tracker.milestone_log(
            project=project, agent=agent, task_id=str(tracked.task.pk), message=f"step {n}"
        )
    page = admin_client.get(url(Task, "change", tracked.task.pk))
    (milestones,) = [f for f in page.context["inline_admin_formsets"] if f.opts.model is Milestone]
    assert len(list(milestones)) == INLINE_LIMIT
    # The first ones, oldest first; the full list is one link away.
    assert url(Milestone, "change", tracked.milestone.pk) in page.text
    assert f"{url(Milestone, 'changelist')}?task__id__exact={tracked.task.pk}" in page.text


def test_phase_search_and_filter(admin_client, project, agent, tracked):
    other = track(project, agent, "beta")
    tracker.phase_complete(project=project, agent=agent, phase_id=str(other.phase.pk))
    phases = url(Phase, "changelist")

    assert changelist_ids(admin_client.get(phases, {"q": "Design beta"})) == {other.phase.pk}
    by_workflow = admin_client.get(phases, {"q": str(tracked.workflow.pk)})
    assert changelist_ids(by_workflow) == {tracked.phase.pk}
    completed = admin_client.get(phases, {"status__exact": "COMPLETED"})
    assert changelist_ids(completed) == {other.phase.pk}


def test_task_search_and_filters(admin_client, project, agent, tracked):
    other = track(project, agent, "beta", complete=True)
    tasks = url(Task, "changelist")

    by_goal = admin_client.get(tasks, {"q": "beta module"})
    assert changelist_ids(by_goal) == {other.task.pk}
    # An id finds the task with that id and the tasks of the workflow with that id.
    wanted = tracked.subtask.pk
    by_id = admin_client.get(tasks, {"q": str(wanted)})
    assert changelist_ids(by_id) == set(
        Task.objects.filter(Q(pk=wanted) | Q(workflow_id=wanted)).values_list("pk", flat=True)
    )
    assert tracked.subtask.pk in changelist_ids(by_id)
    success = admin_client.get(tasks, {"status__exact": "SUCCESS"})
    assert changelist_ids(success) == {other.task.pk, other.subtask.pk}
    subagents = admin_client.get(tasks, {"caller_type__exact": "SUBAGENT"})
    assert changelist_ids(subagents) == {tracked.subtask.pk, other.subtask.pk}
    listing = admin_client.get(tasks, {"caller_type__exact": "SUBAGENT"})
    # The sub-task's row links its parent.
    assert url(Task, "change", tracked.task.pk) in listing.text


def test_decision_search_and_filter(admin_client, project, agent, tracked):
    other = track(project, agent, "beta")
    workaround = tracker.decision_log(
        project=project,
        agent=agent,
        task_id=str(other.task.pk),
        category="workaround",
        question="Pin the parser?",
        chosen="Pin it",
        reasoning="The new one breaks",
    )
    decisions = url(Decision, "changelist")

    found = admin_client.get(decisions, {"q": "beta helpers"})
    assert changelist_ids(found) == {other.decision.pk}
    by_task = admin_client.get(decisions, {"task__id__exact": other.task.pk})
    assert changelist_ids(by_task) == {other.decision.pk, workaround.pk}
    filtered = admin_client.get(decisions, {"category__exact": "WORKAROUND"})
    assert changelist_ids(filtered) == {workaround.pk}


def test_issue_filters_blockers_and_resolved(admin_client, project, agent, admin_user, tracked):
    other = track(project, agent, "beta")
    bug = tracker.issue_log(
        project=project,
        agent=agent,
        task_id=str(other.task.pk),
        type="bug_encountered",
        description="The beta tests are flaky",
        resolution="Retried",
    )
    tracker.blocker_resolve(
        issue_id=other.blocker.pk, by=admin_user, resolution="It is public", via="admin"
    )
    issues = url(Issue, "changelist")

    blockers = admin_client.get(issues, {"requires_human_review__exact": "1"})
    assert changelist_ids(blockers) == {tracked.blocker.pk, other.blocker.pk}
    resolved = admin_client.get(issues, {"resolved": "yes"})
    assert changelist_ids(resolved) == {other.blocker.pk}
    assert admin_user.get_username() in resolved.text
    open_blockers = admin_client.get(
        issues, {"resolved": "no", "requires_human_review__exact": "1"}
    )
    assert changelist_ids(open_blockers) == {tracked.blocker.pk}
    bugs = admin_client.get(issues, {"type__exact": "BUG"})
    assert changelist_ids(bugs) == {bug.pk}
    by_answer = admin_client.get(issues, {"q": "It is public"})
    assert changelist_ids(by_answer) == {other.blocker.pk}


def test_milestone_search_and_filter(admin_client, project, agent, tracked):
    other_agent = agent_ensure(project=project, agent_id="reviewer-bot")
    other = track(project, other_agent, "beta")
    milestones = url(Milestone, "changelist")

    found = admin_client.get(milestones, {"q": "beta split"})
    assert changelist_ids(found) == {other.milestone.pk}
    by_agent = admin_client.get(milestones, {"agent__id__exact": other_agent.pk})
    assert changelist_ids(by_agent) == {other.milestone.pk}
    by_workflow = admin_client.get(milestones, {"q": str(tracked.workflow.pk)})
    assert tracked.milestone.pk in changelist_ids(by_workflow)


# Query counts ------------------------------------------------------------------------------------

# Every page starts with the same two: the login session and its user. Then, per changelist:
#   project filter choices | agent filter choices | COUNT of the filtered rows | the page of rows
#   with the project, agent, workflow, phase, parent task or task (and resolver) joined.
# None counts its whole table (show_full_result_count = False), none has a date hierarchy.
CHANGELISTS = {
    "tracker_trackedworkflow": 6,
    "tracker_phase": 6,
    "tracker_task": 6,
    "tracker_decision": 6,
    "tracker_issue": 6,
    "tracker_milestone": 6,
}


def grow(project, admin_user, rounds: int) -> None:
    """More of everything, through the services: agents, workflows, tasks, logs, answers."""
    for _ in range(rounds):
        n = next(_counter)
        agent = agent_ensure(project=project, agent_id=f"named-{n}")
        tracked = track(project, agent, f"word{n}", complete=n % 2 == 0)
        tracker.blocker_resolve(
            issue_id=tracked.blocker.pk, by=admin_user, resolution="yes", via="admin"
        )


@pytest.mark.parametrize(("name", "expected"), CHANGELISTS.items(), ids=list(CHANGELISTS))
def test_changelist_query_count_is_constant(
    name, expected, admin_client, admin_user, project, django_assert_num_queries
):
    url = reverse(f"admin:{name}_changelist")
    grow(project, admin_user, 2)
    admin_client.get(url)  # the first request of a login refreshes its session

    with django_assert_num_queries(expected):
        few = admin_client.get(url)
    grow(project, admin_user, 18)
    with django_assert_num_queries(expected):
        many = admin_client.get(url)

    assert len(few.context["cl"].result_list) >= 2
    assert len(many.context["cl"].result_list) >= 20


def test_change_page_query_counts_are_constant(
    admin_client, admin_user, project, agent, django_assert_num_queries
):
    small = track(project, agent, "small")
    big = track(project, agent, "big")
    for n in range(5):
        tracker.task_start(
            project=project,
            agent=agent,
            workflow_id=str(big.workflow.pk),
            name=f"extra {n}",
            goal="more",
            phase=2,
            parent_task_id=str(big.task.pk),
        )
        tracker.decision_log(
            project=project,
            agent=agent,
            task_id=str(big.task.pk),
            category="other",
            question=f"q{n}",
            chosen="c",
            reasoning="r",
        )
        tracker.milestone_log(
            project=project, agent=agent, task_id=str(big.task.pk), message=f"m{n}"
        )
    tracker.blocker_resolve(issue_id=big.blocker.pk, by=admin_user, resolution="ok", via="admin")

    def page(model, obj) -> None:
        assert admin_client.get(url(model, "change", obj.pk)).status_code == 200

    page(TrackedWorkflow, small.workflow)
    # the workflow with its project and agent; its phases; its tasks with phase and parent
    for tracked in (small, big):
        with django_assert_num_queries(2 + 3):
            page(TrackedWorkflow, tracked.workflow)
    # the task with what it links to; its sub-tasks; decisions; issues (with the resolver);
    # milestones
    for tracked in (small, big):
        with django_assert_num_queries(2 + 5):
            page(Task, tracked.task)
