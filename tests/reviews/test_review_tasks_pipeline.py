"""0.14's review pipeline on 0.14 sessions: tasks, passes, overrides and people's rulings are
stored as review results with who and why."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from reviews.deepreview.tools import mark_review_as_passed
from reviews.models import HumanDecision, ReviewResult
from reviews.rulings import review_override, review_request_changes
from reviews.services import step_finish_by_tasks
from tests.support.demo14 import write_demo14
from workflows.generations import Conversation, v0_14
from workflows.models import StepRun
from workflows.results import NeedsWork
from workflows.services import sessions

pytestmark = pytest.mark.django_db(transaction=True)

GATHER = {"notes.md": "notes.md", "data.json": "data.json"}


@pytest.fixture
def project014(project, demo_project):
    write_demo14(demo_project)
    return project


@pytest.fixture
def person():
    return get_user_model().objects.create_user("rita", password="x")


def reviews_name_their_steps() -> bool:
    """Every stored verdict carries its step run's step id (the insights group by it)."""
    pairs = list(ReviewResult.objects.values_list("step_id", "step_run__step_id"))
    return bool(pairs) and all(copied == step_id for copied, step_id in pairs)


def start(project, catalog):
    return sessions.session_start(
        project=project,
        catalog=catalog.view(),
        conversation=Conversation("S", None),
        job_name="demo14",
        workflow_name="main",
        goal="reviews",
        inputs={"topic": "cats"},
    )


def finish(project, override=None, summary="cited"):
    checkpoint = sessions.step_checkpoint(
        project=project, conversation=Conversation("S", None), outputs=GATHER, notes=summary
    )
    return step_finish_by_tasks(checkpoint=checkpoint, override_reason=override)


def test_tasks_then_passes_are_stored(project014, catalog, demo_project):
    start(project014, catalog)
    first = finish(project014)
    assert isinstance(first, NeedsWork)
    asked = list(ReviewResult.objects.order_by("id").values_list("run_each", "passed", "attempt"))
    assert len(asked) == 3
    assert {passed for _, passed, _ in asked} == {False}
    assert StepRun.objects.get(status="active").quality_attempts == 1
    for review_id, _, _ in asked:
        mark_review_as_passed(project_root=demo_project, review_id=review_id)
    second = finish(project014)
    assert isinstance(second, v0_14.Advanced)
    passes = ReviewResult.objects.filter(passed=True).values_list("run_each", "feedback")
    assert sorted(passes) == sorted(
        (review_id, "Marked as passed with mark_review_as_passed.") for review_id, _, _ in asked
    )
    assert reviews_name_their_steps()


def test_an_override_reason_skips_reviews_and_is_recorded(project014, catalog):
    start(project014, catalog)
    assert isinstance(finish(project014, override="reviewed by hand"), v0_14.Advanced)
    (result,) = ReviewResult.objects.all()
    assert (result.passed, result.override_reason, result.reviewer) == (
        True,
        "reviewed by hand",
        "dw14:S",
    )
    assert reviews_name_their_steps()


def test_a_schema_failure_is_recorded_and_changes_no_step(project014, catalog, demo_project):
    start(project014, catalog)
    (demo_project / "data.json").write_text("[1]")
    answer = finish(project014)
    assert isinstance(answer, NeedsWork)
    assert answer.failed[0].feedback.startswith("JSON schema validation failed:")
    assert ReviewResult.objects.get().run_each == "json_schema"
    assert reviews_name_their_steps()
    assert StepRun.objects.get(status="active").step_id == "gather"


def test_people_request_changes_and_override_on_014_steps(project014, catalog, person):
    start(project014, catalog)
    run = StepRun.objects.get(status="active")
    review_request_changes(
        step_run=run, feedback="Cite the 2024 paper.", by=person, via="dashboard"
    )
    answer = finish(project014, override="agent says fine")
    assert isinstance(answer, NeedsWork)
    assert answer.failed[0].feedback == "Changes requested by rita: Cite the 2024 paper."
    human = ReviewResult.objects.get(reviewer_kind="human")
    assert (human.reviewer, human.passed) == ("rita", False)
    assert reviews_name_their_steps()

    review_override(step_run=run, reason="Good enough for a draft.", by=person, via="dashboard")
    assert isinstance(finish(project014), v0_14.Advanced)
    assert HumanDecision.objects.filter(consumed_at__isnull=True).count() == 0


def test_the_process_review_lists_the_outputs_in_the_order_handed_in(
    project014, catalog, demo_project
):
    start(project014, catalog)
    (demo_project / "notes.md").write_text("notes\n")
    (demo_project / "data.json").write_text('{"title": "t"}\n')
    assert list(GATHER) == ["notes.md", "data.json"]  # not sorted: the point of this test

    assert isinstance(finish(project014), NeedsWork)

    (instructions,) = (demo_project / ".deepwork/tmp/review_instructions").glob(
        "step_gather_process_quality--*.md"
    )
    text = instructions.read_text()
    listed = text.split("## Files to Review\n\n", 1)[1].split("\n\n", 1)[0]
    assert listed == "- @notes.md\n- @data.json"
