"""The quality gate through the real subprocess path, with a fake reviewer program."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User

from reviews.gate import ClaudeReviewer, CommandReviewer, GateConfig
from reviews.models import HumanDecision, ReviewResult
from reviews.rulings import review_override, review_request_changes
from reviews.services import GateFailed
from tests.support.driving import finished_step as finish
from tests.support.factories import make_user, write_job
from workflows.errors import Conflict, InvalidInput
from workflows.models import Event, StepRun, WorkflowSession
from workflows.services import sessions
from workflows.services.catalog import Catalog

pytestmark = pytest.mark.django_db(transaction=True)

FAKE = Path(__file__).with_name("fake_reviewer.py")


async def person(username: str) -> User:
    """A person who decides on reviews (decisions are always someone's)."""
    return await database_sync_to_async(make_user)(username=username)


GATE_JOB = textwrap.dedent(
    """\
    name: gated
    version: "1.0.0"
    summary: "Steps with reviews"
    common_job_info_provided_to_all_steps_at_runtime: "Context"
    workflows:
      - name: main
        summary: "Draft, pages, final"
        steps: [draft, pages, final]
    steps:
      - id: draft
        name: "Draft"
        description: "Write a draft"
        instructions_file: steps/draft.md
        outputs:
          draft.md: {type: file, description: "The draft", required: true}
        reviews:
          - run_each: step
            quality_criteria: {"Complete": "The draft covers the topic."}
      - id: pages
        name: "Pages"
        description: "Write pages"
        instructions_file: steps/pages.md
        outputs:
          pages: {type: files, description: "Pages", required: true}
        reviews:
          - run_each: pages
            quality_criteria: {"Readable": "The page reads well."}
            additional_review_guidance: "Compare with the draft."
      - id: final
        name: "Final"
        description: "Finish"
        instructions_file: steps/final.md
        inputs: [{file: draft.md, from_step: draft}]
        dependencies: [draft]
        outputs:
          final.md: {type: file, description: "Final", required: true}
        reviews:
          - run_each: final.md
            quality_criteria: {"Faithful": "The final text follows the draft."}
    """
)


async def reviews_name_their_steps() -> bool:
    """Every stored verdict carries its step run's step id (the insights group by it)."""
    pairs = [p async for p in ReviewResult.objects.values_list("step_id", "step_run__step_id")]
    return bool(pairs) and all(copied == step_id for copied, step_id in pairs)


def start_session(project_dir: Path, job_name: str):
    """Register the project, claim an agent and start ``job_name``'s main workflow."""
    from workflows.liveness import ProcessHolder
    from workflows.services.agents import agent_claim
    from workflows.services.projects import project_ensure

    project = project_ensure(root_path=project_dir)
    agent = agent_claim(project=project, holder=ProcessHolder.for_this_process())
    sessions.session_start(
        project=project,
        agent=agent,
        catalog=Catalog(project).view(),
        job_name=job_name,
        workflow_name="main",
        goal="g",
    )
    return project, agent


@pytest.fixture
def gated(project_dir: Path, db):
    write_job(project_dir, "gated", GATE_JOB, ["draft", "pages", "final"])
    (project_dir / "draft.md").write_text("DRAFT BODY\n")
    for n in range(4):
        (project_dir / f"page{n}.md").write_text(f"page {n}\n")
    (project_dir / "final.md").write_text("FINAL BODY\n")
    (project_dir / "image.bin").write_bytes(b"\x89PNG\x00\xff\xfe")
    return start_session(project_dir, "gated")


@pytest.fixture
def reviewer_env(monkeypatch, tmp_path):
    log = tmp_path / "reviews"
    monkeypatch.setenv("FAKE_REVIEW_LOG", str(log))

    def configure(mode: str = "pass", **extra: str) -> Path:
        monkeypatch.setenv("FAKE_REVIEW", mode)
        for key, value in extra.items():
            monkeypatch.setenv(key, value)
        return log

    return configure


def calls(log: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(log.glob("call-*.json"))]


def command_gate(**kwargs) -> GateConfig:
    return GateConfig(reviewer=CommandReviewer(f"{sys.executable} {FAKE}"), **kwargs)


async def hand_in(gated, gate, outputs, **kwargs):
    project, agent = gated
    return await finish(project=project, agent=agent, gate=gate, outputs=outputs, **kwargs)


async def current_step() -> tuple[str, int]:
    session = await WorkflowSession.objects.aget()
    return session.current_step_id, session.revision


async def test_passing_review_advances_and_is_stored(gated, reviewer_env):
    log = reviewer_env("pass")
    response = await hand_in(gated, command_gate(), {"draft.md": "draft.md"}, notes="my notes")

    assert response.status == "next_step"
    assert response.begin_step.step_id == "pages"
    result = await ReviewResult.objects.aget()
    assert result.passed
    assert result.attempt == 1
    assert result.reviewer_kind == "external"
    assert result.feedback == "Looks good"
    assert result.criteria_results == [{"criterion": "Complete", "passed": True, "feedback": None}]
    assert result.duration_ms is not None
    (call,) = calls(log)
    assert "- **Complete**: The draft covers the topic." in call["prompt"]
    assert "-------------------- draft.md --------------------\nDRAFT BODY\n" in call["prompt"]
    assert "==================== AUTHOR NOTES ====================\n\nmy notes" in call["prompt"]
    run = await StepRun.objects.aget(step_id="draft")
    assert run.quality_attempts == 0  # reset once the step passed


async def test_failing_then_passing(gated, reviewer_env):
    reviewer_env("fail_then_pass", FAKE_FAILS="1")
    first = await hand_in(gated, command_gate(), {"draft.md": "draft.md"})
    assert first.status == "needs_work"
    assert first.feedback == "Needs improvement"
    assert first.begin_step is None
    (failed,) = first.failed_reviews
    assert failed.model_dump() == {
        "review_run_each": "step",
        "target_file": None,
        "passed": False,
        "feedback": "Needs improvement",
        "criteria_results": [{"criterion": "Complete", "passed": False, "feedback": "Add more"}],
    }
    assert await current_step() == ("draft", 0)

    second = await hand_in(gated, command_gate(), {"draft.md": "draft.md"})
    assert second.status == "next_step"
    attempts = [
        r async for r in ReviewResult.objects.order_by("id").values_list("attempt", "passed")
    ]
    assert attempts == [(1, False), (2, True)]
    assert await reviews_name_their_steps()


async def test_failing_until_the_attempt_limit(gated, reviewer_env):
    reviewer_env("fail")
    gate = command_gate(max_attempts=3)
    for _ in range(2):
        assert (await hand_in(gated, gate, {"draft.md": "draft.md"})).status == "needs_work"
    with pytest.raises(GateFailed) as excinfo:
        await hand_in(gated, gate, {"draft.md": "draft.md"})
    assert str(excinfo.value) == (
        "Quality gate failed after 3 attempts. Feedback: Needs improvement"
    )
    assert await current_step() == ("draft", 0)
    assert await ReviewResult.objects.filter(passed=False).acount() == 3


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("timeout", "Reviewer command timed out after 1 seconds"),
        ("garbage", "Reviewer command printed invalid JSON"),
        ("crash", "Reviewer command failed with exit code 3:\nstderr: reviewer exploded"),
        ("error_wrapper", "Reviewer command returned error: rate limited"),
    ],
)
async def test_a_broken_reviewer_is_reported_and_changes_nothing(
    gated, reviewer_env, mode, message
):
    reviewer_env(mode)
    with pytest.raises(GateFailed) as excinfo:
        await hand_in(gated, command_gate(timeout=1), {"draft.md": "draft.md"})
    assert str(excinfo.value).startswith(message)
    assert await current_step() == ("draft", 0)
    stored = await ReviewResult.objects.aget()
    assert not stored.passed
    assert stored.error.startswith(message)
    assert (await StepRun.objects.aget(step_id="draft")).quality_attempts == 1


async def test_missing_reviewer_program(gated):
    gate = GateConfig(reviewer=CommandReviewer("/nonexistent/reviewer --flag"))
    with pytest.raises(
        GateFailed, match="Reviewer command could not run: command not found: /nonexistent"
    ):
        await hand_in(gated, gate, {"draft.md": "draft.md"})


async def test_each_file_of_a_files_output_gets_its_own_review(gated, reviewer_env):
    log = reviewer_env("pass")
    gate = command_gate()
    await hand_in(gated, gate, {"draft.md": "draft.md"})
    pages = [f"page{n}.md" for n in range(3)] + ["image.bin"]

    response = await hand_in(gated, gate, {"pages": pages})

    assert response.begin_step.step_id == "final"
    targets = [
        t
        async for t in ReviewResult.objects.filter(run_each="pages").values_list(
            "target_file", flat=True
        )
    ]
    assert sorted(targets) == sorted(pages)
    prompts = [c["prompt"] for c in calls(log)][1:]
    assert len(prompts) == 4
    assert all("Compare with the draft." in p for p in prompts)
    binary = next(p for p in prompts if "image.bin" in p)
    assert "[Binary file — not included in review. Read from: " in binary
    assert "\x89PNG" not in binary


async def test_the_payload_carries_the_inputs_from_earlier_steps(gated, reviewer_env):
    log = reviewer_env("pass")
    gate = command_gate()
    await hand_in(gated, gate, {"draft.md": "draft.md"})
    await hand_in(gated, gate, {"pages": ["page0.md"]})
    await hand_in(gated, gate, {"final.md": "final.md"})

    prompt = calls(log)[-1]["prompt"]
    inputs = prompt.index("==================== BEGIN INPUTS ====================")
    outputs = prompt.index("==================== BEGIN OUTPUTS ====================")
    assert inputs < prompt.index("DRAFT BODY") < outputs < prompt.index("FINAL BODY")
    assert "==================== END INPUTS ====================" in prompt


async def test_claude_runner_uses_deepworks_command_line(gated, reviewer_env, tmp_path):
    log = reviewer_env("pass", FAKE_WRAP="1")
    claude = tmp_path / "claude"
    claude.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    claude.chmod(0o755)
    gate = GateConfig(reviewer=ClaudeReviewer(command=str(claude)))

    response = await hand_in(gated, gate, {"draft.md": "draft.md"})

    assert response.status == "next_step"
    (call,) = calls(log)
    argv = call["argv"][1:]
    # DeepWork 0.9.1's command line, but the system prompt (it carries the author's notes)
    # comes in a file: argv cannot hold long notes or NUL.
    assert argv[:4] == ["--print", "--output-format", "json", "--system-prompt-file"]
    assert argv[5] == "--json-schema"
    assert json.loads(argv[6])["required"] == ["passed", "feedback"]
    assert argv[-2:] == ["-p", "--"]
    assert "- **Complete**" in call["system"]
    assert not await asyncio.to_thread(os.path.exists, argv[4])  # removed after the review
    assert call["prompt"].startswith("==================== BEGIN OUTPUTS")


def held(gate_dir: Path) -> int:
    """How many gated fake reviewers have read their input and wait to be let go."""
    return len(list(gate_dir.glob("arrived-*")))


async def arrivals(gate_dir: Path, count: int, task: asyncio.Task) -> None:
    """Wait until ``count`` gated fake reviewers are held."""
    for _ in range(3000):
        if held(gate_dir) >= count:
            return
        if task.done():
            task.result()
            pytest.fail(f"the hand-in ended with {held(gate_dir)} of {count} reviewers started")
        await asyncio.sleep(0.01)
    pytest.fail(f"only {held(gate_dir)} of {count} reviewers started within 30 s")


@pytest.fixture
def gate_dir(tmp_path):
    """The folder FAKE_GATE points at; every held reviewer is let go at the end, whatever
    happened."""
    folder = tmp_path / "gate"
    folder.mkdir()
    yield folder
    (folder / "release").touch()


async def test_independent_reviews_run_at_the_same_time(gated, reviewer_env, gate_dir):
    log = reviewer_env("pass")
    gate = command_gate()
    await hand_in(gated, gate, {"draft.md": "draft.md"})
    reviewer_env("pass", FAKE_GATE=str(gate_dir))
    pages = [f"page{n}.md" for n in range(4)]
    task = asyncio.create_task(hand_in(gated, gate, {"pages": pages}))

    await arrivals(gate_dir, 4, task)
    # Four reviewers hold their input and none has answered: all four are in flight at once.
    assert len(calls(log)) == 1
    assert not task.done()
    (gate_dir / "release").touch()

    assert (await task).begin_step.step_id == "final"
    assert len(calls(log)) == 5


async def test_an_abort_during_the_review_wins_cleanly(gated, reviewer_env, gate_dir):
    log = reviewer_env("pass", FAKE_GATE=str(gate_dir))
    project, agent = gated
    task = asyncio.create_task(hand_in(gated, command_gate(), {"draft.md": "draft.md"}))
    await arrivals(gate_dir, 1, task)
    # The review is running: the attempt is counted, no verdict is recorded yet.
    assert await ReviewResult.objects.acount() == 0
    assert await StepRun.objects.filter(quality_attempts=1).aexists()

    await database_sync_to_async(sessions.session_abort)(
        project=project, agent=agent, explanation="stop"
    )
    (gate_dir / "release").touch()

    with pytest.raises(Conflict, match="was aborted by another call"):
        await task
    session = await WorkflowSession.objects.aget()
    assert session.status == "aborted"
    assert not await StepRun.objects.filter(status="completed").aexists()
    assert len(calls(log)) == 1


async def test_human_override_passes_the_next_hand_in_without_a_review(gated, reviewer_env):
    log = reviewer_env("fail")
    gate = command_gate()
    assert (await hand_in(gated, gate, {"draft.md": "draft.md"})).status == "needs_work"
    run = await StepRun.objects.aget(step_id="draft")
    await database_sync_to_async(review_override)(
        step_run=run,
        by=await person("alice"),
        via="dashboard",
        reason="The draft is fine for a first pass",
    )

    response = await hand_in(gated, gate, {"draft.md": "draft.md"})

    assert response.status == "next_step"
    assert len(calls(log)) == 1  # the reviewer was not asked again
    decision = await HumanDecision.objects.aget()
    assert decision.consumed_at is not None
    kinds = [k async for k in Event.objects.order_by("id").values_list("kind", flat=True)]
    assert "review_overridden" in kinds
    assert "override_delivered" in kinds


async def test_human_request_changes_reaches_the_agent(gated, reviewer_env):
    log = reviewer_env("pass")
    run = await StepRun.objects.aget(step_id="draft")
    await database_sync_to_async(review_request_changes)(
        step_run=run, by=await person("bob"), via="dashboard", feedback="Cite your sources"
    )

    response = await hand_in(gated, command_gate(), {"draft.md": "draft.md"})

    assert response.status == "needs_work"
    assert response.feedback == "Changes requested by bob: Cite your sources"
    assert response.failed_reviews[0].feedback == "Changes requested by bob: Cite your sources"
    assert calls(log) == []
    stored = await ReviewResult.objects.aget()
    assert (stored.reviewer_kind, stored.reviewer, stored.passed) == ("human", "bob", False)
    assert await reviews_name_their_steps()
    # Delivered once: the next hand-in is reviewed normally.
    assert (await hand_in(gated, command_gate(), {"draft.md": "draft.md"})).status == "next_step"


async def test_human_decisions_need_a_reason_and_a_current_step(gated):
    run = await StepRun.objects.aget(step_id="draft")
    with pytest.raises(InvalidInput, match="A reason is required"):
        await database_sync_to_async(review_override)(
            step_run=run, by=await person("alice"), via="dashboard", reason=" "
        )
    await StepRun.objects.filter(pk=run.pk).aupdate(status="completed")
    with pytest.raises(Conflict, match="only the current step can be overridden"):
        await database_sync_to_async(review_override)(
            step_run=run, by=await person("a"), via="dashboard", reason="ok"
        )


async def test_self_review_mode_writes_instructions_and_accepts_an_override(gated):
    project, _ = gated
    gate = GateConfig(reviewer=None)
    response = await hand_in(gated, gate, {"draft.md": "draft.md"}, notes="I checked it")
    assert response.status == "needs_work"
    assert response.failed_reviews is None
    sid = (await WorkflowSession.objects.aget()).session_id
    written = (Path(project.root_path) / f".deepwork/tmp/quality_review_{sid}_draft.md").read_text()
    assert written.startswith("# Quality Review Instructions\n")
    assert "[1 file — listed, not included inline. Paths listed below." in written
    assert "- draft.md  (output: draft.md)" in written
    assert "DRAFT BODY" not in written
    assert "## Author Notes\n\nI checked it" in written
    for heading in ("## Criteria to Evaluate", "## Guidelines", "## Your Task"):
        assert heading in written

    done = await hand_in(
        gated, gate, {"draft.md": "draft.md"}, override_reason="Self-review passed"
    )
    assert done.status == "next_step"
    stored = await ReviewResult.objects.aget()
    assert (stored.reviewer_kind, stored.passed, stored.override_reason) == (
        "self",
        True,
        "Self-review passed",
    )
    assert await reviews_name_their_steps()


async def test_without_a_gate_reviewed_steps_advance(gated):
    response = await hand_in(gated, None, {"draft.md": "draft.md"})
    assert response.status == "next_step"
    assert not await ReviewResult.objects.aexists()


CONCURRENT_JOB = textwrap.dedent(
    """\
    name: pair
    version: "1.0.0"
    summary: "Two reviewed steps side by side"
    common_job_info_provided_to_all_steps_at_runtime: "Context"
    workflows:
      - name: main
        summary: "Both at once"
        steps: [[left, right]]
    steps:
      - id: left
        name: "Left"
        description: "Left half"
        instructions_file: steps/left.md
        outputs:
          left.md: {type: file, description: "Left", required: true}
        reviews:
          - run_each: step
            quality_criteria: {"Left ok": "The left half is complete."}
      - id: right
        name: "Right"
        description: "Right half"
        instructions_file: steps/right.md
        outputs:
          right.md: {type: file, description: "Right", required: true}
        reviews:
          - run_each: right.md
            quality_criteria: {"Right ok": "The right half is complete."}
    """
)


async def test_each_member_of_a_concurrent_entry_gets_its_own_reviews(
    project_dir, reviewer_env, db
):
    write_job(project_dir, "pair", CONCURRENT_JOB, ["left", "right"])
    (project_dir / "left.md").write_text("LEFT\n")
    (project_dir / "right.md").write_text("RIGHT FORCE_FAIL\n")

    log = reviewer_env("pass")
    gated_pair = await database_sync_to_async(start_session)(project_dir, "pair")
    response = await hand_in(
        gated_pair, command_gate(), {"left.md": "left.md", "right.md": "right.md"}
    )

    assert response.status == "needs_work"
    assert [r.review_run_each for r in response.failed_reviews] == ["right.md"]
    prompts = sorted(c["prompt"] for c in calls(log))
    assert len(prompts) == 2
    left = next(p for p in prompts if "Left ok" in p)
    right = next(p for p in prompts if "Right ok" in p)
    assert "LEFT" in left
    assert "RIGHT" not in left
    assert "RIGHT" in right
    assert "LEFT" not in right
    results = {
        (step_id, passed)
        async for step_id, passed in ReviewResult.objects.values_list("step_run__step_id", "passed")
    }
    assert results == {("left", True), ("right", False)}
    assert await reviews_name_their_steps()


def test_large_and_missing_files_get_placeholders_not_content(tmp_path):
    from reviews.gate import MAX_INLINE_BYTES, ReviewTask, build_payload

    (tmp_path / "huge.log").write_text("x" * (MAX_INLINE_BYTES + 1))
    task = ReviewTask(
        step_id="s",
        run_each="step",
        criteria={"c": "d"},
        guidance=None,
        outputs={"log": "huge.log", "gone": "missing.md"},
        target_file=None,
    )
    payload = build_payload(
        task=task, project_root=tmp_path, max_inline_files=5, notes=None, include_notes=True
    )
    assert f"[Large file ({MAX_INLINE_BYTES + 1} bytes) — not included in review." in payload
    assert "xxxx" not in payload
    assert "-------------------- missing.md --------------------\n[File not found]" in payload


def test_a_listing_says_why_its_files_are_not_inline(tmp_path):
    from reviews.gate import _section

    six = [(f"o{n}", f"f{n}.md") for n in range(6)]
    over = "\n".join(
        _section(title="T", files=six, label="output", project_root=tmp_path, max_inline_files=5)
    )
    assert "[6 files — too many to include inline. Paths listed below." in over
    one = "\n".join(
        _section(
            title="T", files=six[:1], label="output", project_root=tmp_path, max_inline_files=0
        )
    )
    assert "[1 file — listed, not included inline. Paths listed below." in one
