"""An agent driving one DeepWork generation through the in-process MCP server, and a person
ruling on its steps through the services the dashboard, the admin and REST call.

The same job is written in each generation's format: a reviewed ``draft`` step, then an
unreviewed ``final`` one. Each generation's server reviews the way DeepWork does by default:
0.9 asks the agent for a self-review (one instructions file, then a hand-in with a reason),
0.14 hands it review tasks that sub-agents clear with ``mark_review_as_passed``.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from fastmcp import Client

from mcp_bridge.server import create_server
from reviews.models import ReviewResult
from tests.support.factories import write_job
from workflows.models import Event, StepRun, WorkflowSession

JOB_09 = textwrap.dedent(
    """\
    name: gated
    version: "1.0.0"
    summary: "A reviewed draft, then the final text"
    common_job_info_provided_to_all_steps_at_runtime: "Context"
    workflows:
      - name: main
        summary: "Draft, then final"
        steps: [draft, final]
    steps:
      - id: draft
        name: "Draft"
        description: "Write a draft"
        instructions_file: steps/draft.md
        outputs:
          draft.md: {type: file, description: "The draft", required: true}
        reviews:
          - run_each: draft.md
            quality_criteria: {"Complete": "The draft covers the topic."}
      - id: final
        name: "Final"
        description: "Finish"
        instructions_file: steps/final.md
        outputs:
          final.md: {type: file, description: "Final", required: true}
        reviews: []
    """
)

JOB_014 = textwrap.dedent(
    """\
    name: gated
    summary: "A reviewed draft, then the final text"
    step_arguments:
      - name: draft.md
        description: "The draft"
        type: file_path
        review:
          strategy: individual
          instructions: "The draft covers the topic."
      - name: final.md
        description: "Final"
        type: file_path
    workflows:
      main:
        summary: "Draft, then final"
        steps:
          - name: draft
            instructions: "Write a draft."
            outputs:
              draft.md: {}
          - name: final
            instructions: "Finish."
            outputs:
              final.md: {}
    """
)

DRAFT = {"draft.md": "draft.md"}
CONVERSATION = "conv-1"
# Events about the engine's own bookkeeping (connections, catalog scans, the files a step
# changed, recorded in the background), which no ruling touches and whose order is not the
# engine's to keep.
BOOKKEEPING = [
    Event.Kind.AGENT_CONNECTED,
    Event.Kind.CATALOG_SYNCED,
    Event.Kind.STEP_FILES_RECORDED,
]


@dataclass
class Driver:
    """One agent of ``generation`` on the in-process server, as its client calls it."""

    generation: str
    client: Client
    project_dir: Path

    def _session(self) -> dict[str, str]:
        return {"session_id": CONVERSATION} if self.generation == "0.14" else {}

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[bool, Any]:
        result = await self.client.call_tool(tool, args, raise_on_error=False)
        text = result.content[0].text
        if result.is_error or not text.startswith("{"):
            return result.is_error, text
        return False, json.loads(text)

    async def start(self) -> None:
        error, answer = await self.call(
            "start_workflow",
            {"goal": "g", "job_name": "gated", "workflow_name": "main", **self._session()},
        )
        assert not error, answer

    async def finish(self, outputs: dict[str, str], reason: str | None = None) -> Any:
        args: dict[str, Any] = {"outputs": outputs, **self._session()}
        if reason is not None:
            args["quality_review_override_reason"] = reason
        # An error comes back as its text, an answer as its dict.
        return (await self.call("finished_step", args))[1]

    async def finish_ok(self, outputs: dict[str, str], reason: str | None = None) -> dict:
        answer = await self.finish(outputs, reason)
        assert isinstance(answer, dict), answer
        return answer

    async def run_asked_reviews(self, answer: dict) -> None:
        """Do what the self-review request asks before handing in again: under 0.14 every task
        is run by a sub-agent that marks it passed; under 0.9 the agent reviews itself and
        says so with a reason on its next hand-in (``hand_in_reviewed``)."""
        if self.generation == "0.14":
            for review_id in re.findall(r'review_instructions/(\S+)\.md"', answer["feedback"]):
                error, said = await self.call("mark_review_as_passed", {"review_id": review_id})
                assert not error, said

    async def hand_in_reviewed(self, outputs: dict[str, str]) -> dict:
        reason = "Self-review passed: all criteria met" if self.generation == "0.9" else None
        return await self.finish_ok(outputs, reason)

    async def go_to_step(self, step_id: str) -> dict:
        error, answer = await self.call("go_to_step", {"step_id": step_id, **self._session()})
        assert not error, answer
        return answer

    async def abort(self, explanation: str) -> dict:
        error, answer = await self.call(
            "abort_workflow", {"explanation": explanation, **self._session()}
        )
        assert not error, answer
        return answer


@pytest.fixture(params=["0.9", "0.14"])
def generation(request: pytest.FixtureRequest) -> str:
    return request.param


async def _driven(project_dir: Path, generation: str, **server: Any):
    write_job(project_dir, "gated", JOB_09 if generation == "0.9" else JOB_014, ["draft", "final"])
    (project_dir / "draft.md").write_text("The draft.\n")
    (project_dir / "final.md").write_text("The final text.\n")
    async with Client(create_server(project_dir, generation=generation, **server)) as client:
        yield Driver(generation, client, project_dir)


@pytest.fixture
async def driver(project_dir: Path, generation: str, db):
    async for each in _driven(project_dir, generation):
        yield each


@pytest.fixture
async def ungated_driver(project_dir: Path, generation: str, db):
    """The same agent on a server that runs no reviews (``--no-quality-gate``)."""
    async for each in _driven(project_dir, generation, enable_quality_gate=False):
        yield each


@pytest.fixture
def person(db):
    return get_user_model().objects.create_user("rita", password="x")


@sync_to_async
def current_run() -> StepRun:
    return StepRun.objects.select_related("session").get(status=StepRun.Status.ACTIVE)


@sync_to_async
def session_kinds() -> list[str]:
    """The kinds of every event of the agent's sessions, oldest first."""
    return list(
        Event.objects.filter(session__isnull=False)
        .exclude(kind__in=BOOKKEEPING)
        .order_by("id")
        .values_list("kind", flat=True)
    )


@sync_to_async
def verdicts() -> list[tuple[str, str, int, bool]]:
    """Every stored verdict as (step, reviewer kind, round, passed), oldest first."""
    return list(
        ReviewResult.objects.order_by("id").values_list(
            "step_id", "reviewer_kind", "attempt", "passed"
        )
    )


@sync_to_async
def attempts() -> list[tuple[str, str, int]]:
    """Every step run as (step, status, quality attempts), oldest first."""
    return list(StepRun.objects.order_by("id").values_list("step_id", "status", "quality_attempts"))


@sync_to_async
def the_session() -> WorkflowSession:
    return WorkflowSession.objects.select_related("project", "agent").get()
