"""DeepWork 0.14 conformance over stdio: ``mcpserve --generation 0.14|both`` and a real client.

Written from the checks of the 0.14 digest (§7), on a project holding both job formats: the
0.14-format ``demo14`` (workflows main, helper, plain) and the 0.9.1-format ``demo`` and
``nested`` jobs. Where this server differs from 0.14.0 on purpose (start inputs reach every
step that declares them, also after ``go_to_step``), the test says so.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.driver import Driver
from tests.support.demo14 import write_demo14
from workflows.models import Agent, StepRun, WorkflowSession

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

TOOLS_014 = [
    "get_workflows",
    "start_workflow",
    "finished_step",
    "abort_workflow",
    "go_to_step",
    "register_session_job",
    "get_session_job",
    "get_named_schemas",
    "get_review_instructions",
    "get_configured_reviews",
    "mark_review_as_passed",
]
GATHER_OUTPUTS = {"notes.md": "notes.md", "data.json": "data.json"}
SESSION_REQUIRED = {
    "error": "session_id is required. Pass CLAUDE_CODE_SESSION_ID on Claude Code, or the "
    "session_id returned by start_workflow on other platforms."
}


def fail(tool: str, text: str) -> str:
    return f"Error calling tool '{tool}': {text}"


@pytest.fixture
def project(demo_project: Path) -> Path:
    write_demo14(demo_project)
    return demo_project


def start_args(workflow: str = "main", **extra: object) -> dict[str, object]:
    return {"goal": "conformance", "job_name": "demo14", "workflow_name": workflow, **extra}


async def call_text(agent: Driver, tool: str, args: dict[str, object]) -> str:
    """A string tool's answer (the review tools)."""
    result = await agent.client.call_tool(tool, args, raise_on_error=False)
    assert not result.is_error, result.content[0].text
    return result.content[0].text


def task_ids(feedback: str) -> list[str]:
    return re.findall(r'prompt: "@\.deepwork/tmp/review_instructions/(.+)\.md"', feedback)


async def test_014_tools_list_and_discovery(project: Path) -> None:
    async with Driver(project, "--generation", "0.14") as agent:
        tools = await agent.client.list_tools()
        assert [tool.name for tool in tools] == TOOLS_014
        by_name = {tool.name: tool.input_schema for tool in tools}
        assert by_name["start_workflow"]["required"] == ["goal", "job_name", "workflow_name"]
        assert list(by_name["start_workflow"]["properties"]) == [
            "goal",
            "job_name",
            "workflow_name",
            "session_id",
            "inputs",
            "agent_id",
        ]
        assert by_name["finished_step"]["required"] == ["outputs"]
        assert list(by_name["finished_step"]["properties"]) == [
            "outputs",
            "session_id",
            "work_summary",
            "quality_review_override_reason",
            "agent_id",
        ]
        assert all(schema["additionalProperties"] is False for schema in by_name.values())

        listed = await agent.call("get_workflows")
        assert listed["errors"] == []  # both formats load
        jobs = {job["name"]: job for job in listed["jobs"]}
        assert {"demo", "nested", "demo14"} <= set(jobs)
        invocations = {w["name"]: w["how_to_invoke"] for w in jobs["demo14"]["workflows"]}
        assert invocations["helper"].startswith(
            'Invoke as an Agent using subagent_type="general-purpose"'
        )
        assert invocations["main"].startswith(
            "Call `mcp__plugin_deepwork_deepwork__start_workflow` "
        )

        # Review ids: 0.14's texts, never an error result (check 25).
        assert await call_text(agent, "mark_review_as_passed", {"review_id": ""}) == (
            "Validation error: review_id must not be empty."
        )
        for bad in ("../x", "/x", "a/b"):
            assert await call_text(agent, "mark_review_as_passed", {"review_id": bad}) == (
                "Validation error: review_id must not contain path traversal sequences."
            )
        assert not (project / ".deepwork/tmp/review_instructions").exists()

        # 0.9.1's parameters are refused by a 0.14 server (check 23).
        error = await agent.call_error("start_workflow", start_args(instance_id="x"))
        assert error.startswith("1 validation error for call[start_workflow]")
        assert "Unexpected keyword argument" in error
        error = await agent.call_error(
            "finished_step", {"outputs": {}, "session_id": "S", "notes": "n"}
        )
        assert "Unexpected keyword argument" in error


async def test_014_session_ids_and_lookup_errors(project: Path) -> None:
    async with Driver(project, "--generation", "0.14") as agent:
        assert await agent.call_error("start_workflow", start_args()) == fail(
            "start_workflow",
            "session_id is required on Claude Code. Pass CLAUDE_CODE_SESSION_ID from startup "
            "context.",
        )
        assert await agent.call_error(
            "start_workflow", {**start_args(), "job_name": "nope", "session_id": "S"}
        ) == fail("start_workflow", "Job not found: nope")
        assert await agent.call_error("start_workflow", start_args("zzz", session_id="S")) == fail(
            "start_workflow",
            "Workflow 'zzz' not found in job 'demo14'. Available workflows: main, helper, plain",
        )
        # A session id with path characters is refused and changes nothing.
        error = await agent.call_error("start_workflow", start_args(session_id="../x"))
        assert "session_id must be 1 to 100 characters" in error
        for tool in ("finished_step", "abort_workflow", "go_to_step"):
            args = {"finished_step": {"outputs": {}}, "abort_workflow": {"explanation": "x"}}
            answer = await agent.call(tool, args.get(tool, {"step_id": "gather"}))
            assert answer == SESSION_REQUIRED
        # A single-workflow 0.9.1-format job starts whatever workflow name is given.
        started = await agent.call(
            "start_workflow",
            {"goal": "g", "job_name": "nested", "workflow_name": "anything", "session_id": "N"},
        )
        assert started["stack"] == [{"workflow": "nested/only", "step": "first"}]
        assert started["begin_step"]["step_expected_outputs"][0]["type"] == "file_path"
    assert await WorkflowSession.objects.acount() == 1

    async with Driver(project, "--generation", "0.14", "--platform", "gemini") as agent:
        started = await agent.call("start_workflow", start_args("plain"))
        assert re.fullmatch(r"[0-9a-f]{32}", started["begin_step"]["session_id"])


async def test_014_walk_with_reviews_inputs_go_to_step_and_nesting(project: Path) -> None:
    async with Driver(project, "--generation", "0.14") as agent:
        started = await agent.call(
            "start_workflow", start_args(session_id="S", inputs={"topic": "cats"})
        )
        assert started["important_note"].startswith("IMPORTANT: If, given the info")
        step = started["begin_step"]
        assert step["session_id"] == "S"
        assert step["step_inputs"] == [
            {
                "name": "topic",
                "type": "string",
                "description": "What the notes are about",
                "value": "cats",
                "required": True,
            }
        ]
        assert step["step_instructions"] == (
            "## Inputs\n\n- **topic** (required): cats\n\nGather notes on the topic."
        )
        assert step["common_job_info"] == "Shared 0.14 context.\n"
        assert started["stack"] == [{"workflow": "demo14/main", "step": "gather"}]

        # Output validation, in 0.14's order and texts.
        assert await agent.call_error("finished_step", {"outputs": {}, "session_id": "S"}) == fail(
            "finished_step",
            "Missing required outputs: data.json, notes.md. All required outputs must be provided.",
        )
        error = await agent.call_error(
            "finished_step", {"outputs": {**GATHER_OUTPUTS, "bogus": "x"}, "session_id": "S"}
        )
        assert error == fail(
            "finished_step", "Unknown output names: bogus. Declared outputs: data.json, notes.md"
        )
        error = await agent.call_error(
            "finished_step",
            {"outputs": {**GATHER_OUTPUTS, "notes.md": "absent.md"}, "session_id": "S"},
        )
        assert error == fail("finished_step", "Output 'notes.md': file not found at 'absent.md'")

        # json_schema: needs_work, no reviews built.
        (project / "data.json").write_text('{"nottitle": 1}')
        answer = await agent.call(
            "finished_step", {"outputs": GATHER_OUTPUTS, "session_id": "S", "work_summary": "w"}
        )
        assert answer["status"] == "needs_work"
        assert answer["feedback"].startswith("JSON schema validation failed:")
        assert "'title' is a required property" in answer["feedback"]
        assert [answer[k] for k in ("begin_step", "summary", "all_outputs")] == [None] * 3
        assert answer["stack"] == [{"workflow": "demo14/main", "step": "gather"}]
        (project / "data.json").write_text('{"title": "t"}')

        # Reviews: the output's own, the argument's, and process quality with a summary.
        args = {"outputs": GATHER_OUTPUTS, "session_id": "S", "work_summary": "cited all"}
        answer = await agent.call("finished_step", args)
        feedback = answer["feedback"]
        assert feedback.startswith("Quality reviews are required before this step can advance.")
        assert re.findall(r"description: (.+)", feedback) == [
            "Review demo14/step_gather_output_notes.md",
            "Review demo14/step_gather_output_notes.md_arg",
            "Review demo14/step_gather_process_quality",
        ]
        assert feedback.count("subagent_type: deepwork:reviewer") == 3
        ids = task_ids(feedback)
        for review_id in ids:
            assert (project / f".deepwork/tmp/review_instructions/{review_id}.md").is_file()
        assert task_ids((await agent.call("finished_step", args))["feedback"]) == ids
        # No work_summary: no process review.
        no_summary = await agent.call("finished_step", {**args, "work_summary": None})
        assert len(task_ids(no_summary["feedback"])) == 2
        # An empty override reason skips nothing.
        empty = await agent.call("finished_step", {**args, "quality_review_override_reason": ""})
        assert empty["status"] == "needs_work"

        for review_id in ids:
            assert await call_text(agent, "mark_review_as_passed", {"review_id": review_id}) == (
                f"Review '{review_id}' marked as passed."
            )
        answer = await agent.call("finished_step", args)
        assert answer["status"] == "next_step"
        judge = answer["begin_step"]
        assert judge["step_id"] == "judge"
        # 0.14.0 loses start inputs after the first step; this server keeps them.
        assert [(i["name"], i["value"]) for i in judge["step_inputs"]] == [
            ("topic", "cats"),
            ("notes.md", "notes.md"),
        ]
        assert "- **notes.md** (required): `notes.md`" in judge["step_instructions"]

        # A string output's review is an inline task.
        error = await agent.call_error(
            "finished_step", {"outputs": {"verdict": ["a"]}, "session_id": "S"}
        )
        assert error == fail(
            "finished_step", "Output 'verdict' is type 'string' and must be a string, got list"
        )
        answer = await agent.call(
            "finished_step", {"outputs": {"verdict": "Fine."}, "session_id": "S"}
        )
        (inline_id,) = task_ids(answer["feedback"])
        assert re.fullmatch(r"step_judge_output_verdict--inline--[0-9a-f]{12}", inline_id)
        text = (project / f".deepwork/tmp/review_instructions/{inline_id}.md").read_text()
        assert text.startswith("# Review: step_judge_output_verdict — inline content")
        assert "## Content to Review\n\nFine." in text

        # go_to_step: forward refused, unknown named, back invalidates; inputs stay.
        assert await agent.call_error(
            "go_to_step", {"step_id": "nested", "session_id": "S"}
        ) == fail(
            "go_to_step",
            "Cannot go forward to step 'nested' (index 2 > current 1). Use finished_step to "
            "advance forward.",
        )
        assert await agent.call_error("go_to_step", {"step_id": "zz", "session_id": "S"}) == fail(
            "go_to_step",
            "Step 'zz' not found in workflow 'main'. Available steps: gather, judge, nested",
        )
        back = await agent.call("go_to_step", {"step_id": "gather", "session_id": "S"})
        assert back["invalidated_steps"] == ["gather", "judge", "nested"]
        assert back["begin_step"]["step_inputs"][0]["value"] == "cats"
        # Reviews already passed for unchanged content are not asked for again.
        answer = await agent.call("finished_step", args)
        assert answer["begin_step"]["step_id"] == "judge"
        answer = await agent.call(
            "finished_step",
            {
                "outputs": {"verdict": "Fine."},
                "session_id": "S",
                "quality_review_override_reason": "ok",
            },
        )
        nested = answer["begin_step"]
        assert nested["step_instructions"] == (
            "This step delegates to a sub-workflow. Call `start_workflow` with "
            'job_name="demo14" and workflow_name="helper", then follow the instructions it '
            "returns until the sub-workflow completes."
        )

        sub = await agent.call("start_workflow", start_args("helper", session_id="S"))
        assert len(sub["stack"]) == 2
        done = await agent.call("finished_step", {"outputs": {}, "session_id": "S"})
        assert done["status"] == "workflow_complete"
        assert done["summary"] == "Workflow 'helper' completed successfully!"
        assert done["stack"] == [{"workflow": "demo14/main", "step": "nested"}]
        done = await agent.call("finished_step", {"outputs": {}, "session_id": "S"})
        assert done["all_outputs"] == {**GATHER_OUTPUTS, "verdict": "Fine."}
        assert done["post_workflow_instructions"] == "Open a pull request."
        assert done["stack"] == []

        error = await agent.call_error("finished_step", {"outputs": {}, "session_id": "S"})
        assert error.startswith(
            fail("finished_step", "No active workflow session. Provide the session_id from")
        )
        for tool, extra in (
            ("abort_workflow", {"explanation": "x"}),
            ("go_to_step", {"step_id": "gather"}),
        ):
            assert await agent.call_error(tool, {**extra, "session_id": "S"}) == fail(
                tool, "No active workflow session. Use start_workflow to begin a workflow."
            )
    statuses = [
        s async for s in WorkflowSession.objects.order_by("id").values_list("status", flat=True)
    ]
    assert statuses == ["completed", "completed"]
    summary = await StepRun.objects.filter(step_id="gather", status="completed").aget()
    assert summary.notes == "cited all"


async def test_014_agent_stacks_restart_and_session_jobs(project: Path) -> None:
    async with Driver(project, "--generation", "0.14") as agent:
        await agent.call("start_workflow", start_args("plain", session_id="S"))
        second = await agent.call(
            "start_workflow", start_args("plain", session_id="S", agent_id="ag1")
        )
        assert second["stack"] == [
            {"workflow": "demo14/plain", "step": "one"},
            {"workflow": "demo14/plain", "step": "one"},
        ]
        aborted = await agent.call(
            "abort_workflow", {"explanation": "done", "session_id": "S", "agent_id": "ag1"}
        )
        assert aborted["resumed_workflow"] is None
        assert aborted["stack"] == [{"workflow": "demo14/plain", "step": "one"}]
        error = await agent.call_error(
            "finished_step", {"outputs": {}, "session_id": "S", "agent_id": "ag1"}
        )
        assert "No active workflow session. Provide the session_id" in error

        yaml_text = (
            (project / ".deepwork/jobs/demo14/job.yml")
            .read_text()
            .replace("name: demo14", "name: tmpjob")
        )
        registered = await agent.call(
            "register_session_job",
            {"job_name": "tmpjob", "job_definition_yaml": yaml_text, "session_id": "S5"},
        )
        assert registered["status"] == "registered"
        assert "session-S5/jobs/tmpjob" in registered["job_dir"]
        fetched = await agent.call("get_session_job", {"job_name": "tmpjob", "session_id": "S5"})
        assert fetched["job_definition_yaml"] == yaml_text
        assert await agent.call_error(
            "start_workflow", {**start_args("plain"), "job_name": "tmpjob", "session_id": "S6"}
        ) == fail("start_workflow", "Job not found: tmpjob")
        started = await agent.call(
            "start_workflow", {**start_args("plain"), "job_name": "tmpjob", "session_id": "S5"}
        )
        assert started["stack"] == [{"workflow": "tmpjob/plain", "step": "one"}]
        assert await agent.call(
            "register_session_job",
            {"job_name": "Bad-Name", "job_definition_yaml": yaml_text, "session_id": "S5"},
        ) == {"error": "Invalid job name 'Bad-Name': must match ^[a-z][a-z0-9_]*$"}
        bad_yaml = await agent.call(
            "register_session_job",
            {"job_name": "other", "job_definition_yaml": "a: [", "session_id": "S5"},
        )
        assert bad_yaml["error"].startswith("Invalid YAML syntax: ")
        assert await agent.call("get_session_job", {"job_name": "other", "session_id": "S5"}) == {
            "error": "Session job 'other' not found for session 'S5'."
        }

    # A new server process continues the stored stack (state is in the database).
    async with Driver(project, "--generation", "0.14") as agent:
        answer = await agent.call("finished_step", {"outputs": {}, "session_id": "S"})
        assert answer["begin_step"]["step_id"] == "two"
        assert answer["stack"] == [{"workflow": "demo14/plain", "step": "two"}]


async def test_both_mode_serves_each_session_in_its_generation(project: Path) -> None:
    async with Driver(project) as agent:  # --generation both is the default
        names = [tool.name for tool in await agent.client.list_tools()]
        assert names[:8] == TOOLS_014[:5] + TOOLS_014[5:8]
        schema = {t.name: t.input_schema for t in await agent.client.list_tools()}
        assert {"instance_id", "session_id", "inputs", "agent_id"} <= set(
            schema["start_workflow"]["properties"]
        )
        assert {"notes", "work_summary", "agent_id", "session_id"} <= set(
            schema["finished_step"]["properties"]
        )

        # A 0.9.1 client: 0.9.1's shape (8-hex id, no important_note).
        legacy = await agent.call(
            "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "main"}
        )
        assert re.fullmatch(r"[0-9a-f]{8}", legacy["begin_step"]["session_id"])
        assert "important_note" not in legacy
        # A 0.14 start while that 0.9.1 workflow is active is refused, not nested.
        error = await agent.call_error("start_workflow", start_args(session_id="S"))
        assert "cannot nest inside it" in error
        step = await agent.call("finished_step", {"outputs": {"notes.md": "notes.md"}})
        assert step["begin_step"]["step_id"] == "part_a"
        await agent.call("abort_workflow", {"explanation": "switching"})

        started = await agent.call(
            "start_workflow", start_args("plain", session_id="S", inputs={"topic": "t"})
        )
        assert started["important_note"].startswith("IMPORTANT")
        assert started["begin_step"]["session_id"] == "S"
        # A 0.9.1-style start while the 0.14 stack is active is refused too.
        error = await agent.call_error(
            "start_workflow", {"goal": "g", "job_name": "demo", "workflow_name": "main"}
        )
        assert "cannot nest inside it" in error
        # `notes` is accepted as 0.14's work_summary on a 0.14 session.
        answer = await agent.call("finished_step", {"outputs": {}, "session_id": "S", "notes": "n"})
        assert answer["status"] == "next_step"
        assert list(answer) == [
            "status",
            "feedback",
            "begin_step",
            "summary",
            "all_outputs",
            "post_workflow_instructions",
            "stack",
        ]
        # Refused as an error on this server (0.14.0 itself answers the text as a result).
        assert await agent.call_error(
            "finished_step", {"outputs": {}, "work_summary": "w"}
        ) == fail("finished_step", SESSION_REQUIRED["error"])

        # Rebinding after lost context, and a dry run that changes nothing.
        active = await agent.call("get_active_workflow", {"session_id": "S"})
        assert (active["generation"], active["step_number"], active["total_steps"]) == (
            "0.14",
            2,
            2,
        )
        assert active["completed_steps"] == ["one"]
        assert active["current_step"]["step_instructions"] == "Step two."
        assert active["goal"] == "conformance"
        dry = await agent.call(
            "validate_step_outputs", {"outputs": {"bogus": "x"}, "session_id": "S"}
        )
        assert dry == {
            "valid": False,
            "step_id": "two",
            "errors": ["Unknown output names: bogus. Declared outputs: "],
        }
        valid = await agent.call("validate_step_outputs", {"outputs": {}, "session_id": "S"})
        assert valid["valid"]
        done = await agent.call("finished_step", {"outputs": {}, "session_id": "S"})
        assert done["status"] == "workflow_complete"

        # The same two tools for a 0.9.1 session.
        legacy = await agent.call(
            "start_workflow", {"goal": "g2", "job_name": "demo", "workflow_name": "main"}
        )
        active = await agent.call("get_active_workflow")
        assert (active["generation"], active["session_id"]) == (
            "0.9",
            legacy["begin_step"]["session_id"],
        )
        assert (active["step_number"], active["total_steps"], active["completed_steps"]) == (
            1,
            3,
            [],
        )
        dry = await agent.call("validate_step_outputs", {"outputs": {}})
        assert dry["errors"] == [
            "Missing required outputs: notes.md. All required outputs must be provided."
        ]
        # After its workflow completed, a 0.14 stack still answers in 0.14's words.
        error = await agent.call_error("finished_step", {"outputs": {}, "session_id": "S"})
        assert "No active workflow session. Provide the session_id" in error
        error = await agent.call_error("get_active_workflow", {"agent_id": "a"})
        assert error.endswith("agent_id needs the session_id of its conversation")
    generations = [
        g async for g in WorkflowSession.objects.order_by("id").values_list("generation", flat=True)
    ]
    assert generations == ["0.9", "0.14", "0.9"]
    assert await Agent.objects.filter(agent_id="dw14:S").aexists()


async def test_014_instructions_and_issue_detected(project: Path) -> None:
    async with Driver(project, "--generation", "0.14") as agent:
        instructions = agent.client.initialize_result.instructions
        assert instructions.startswith("## Available Workflows")
        assert "- **demo14** (main, helper, plain): A 0.14-format demo job" in instructions
        assert "- **demo** (main, quick): A demo job" in instructions  # 0.9.1 format: no issue
        listed = await agent.call("get_workflows")
        assert "issue_detected" not in listed

    broken = project / ".deepwork/jobs/broken"
    broken.mkdir()
    (broken / "job.yml").write_text("")
    async with Driver(project, "--generation", "0.14") as agent:
        instructions = agent.client.initialize_result.instructions
        assert instructions.startswith(
            "## **IMPORTANT: ISSUE DETECTED**\n\nSuggest repairing this immediately to the user."
        )
        assert f"The file to fix is {broken}/job.yml." in instructions
        listed = await agent.call("get_workflows")
        (error,) = listed["errors"]
        assert error["error"].endswith('workflow_name "repair".')
        assert listed["issue_detected"].startswith("\n\n---\n**IMPORTANT: ISSUE DETECTED.**")
        started = await agent.call("start_workflow", start_args("plain", session_id="I"))
        assert list(started)[-1] == "issue_detected"
        # Soft session_id errors carry no banner.
        assert await agent.call("finished_step", {"outputs": {}}) == SESSION_REQUIRED
