"""job.yml parsing: the model, 0.9.1's exact error texts, and the JSON round trip.

Pure tests (no database); run with `-p no:django`. Expected error strings are written out in
full on purpose: they are the wire contract with agents.
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from workflows.files import read_regular_file
from workflows.jobdefs.base import (
    DICT_FORMAT,
    MAX_FILE_BYTES,
    FileInput,
    JobDef,
    JobParseError,
    OutputSpec,
    ReviewSpec,
    StepDef,
    UserParameterInput,
    WorkflowDef,
)
from workflows.jobdefs.parse import job_to_dict, parse_job_bytes, parse_job_text

SCHEMA_FAIL = "Job definition validation failed: Validation error at "


def _step(step_id: str, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": step_id,
        "name": step_id.title(),
        "description": f"Does {step_id}",
        "instructions_file": f"steps/{step_id}.md",
        "outputs": {f"{step_id}.md": {"type": "file", "description": "Out", "required": True}},
        "reviews": [],
    }
    data.update(extra)
    return data


def _job(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "demo_job",
        "version": "1.0.0",
        "summary": "Demo",
        "common_job_info_provided_to_all_steps_at_runtime": "Shared context",
        "workflows": [
            {"name": "main", "summary": "Main flow", "steps": ["gather", ["part_a", "part_b"]]}
        ],
        "steps": [
            _step("gather", inputs=[{"name": "topic", "description": "What to gather"}]),
            _step("part_a"),
            _step("part_b"),
        ],
    }
    data.update(overrides)
    return data


def _write(job_dir: Path, data: dict[str, Any] | str | bytes) -> Path:
    job_dir.mkdir(parents=True, exist_ok=True)
    path = job_dir / "job.yml"
    if isinstance(data, bytes):
        path.write_bytes(data)
    elif isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return job_dir


def parse_job_dir(job_dir: Path) -> JobDef:
    """Parse ``<job_dir>/job.yml`` as the catalog does (a bounded read, then the bytes), with
    0.9.1's wording for a folder that is missing or holds no job.yml.

    A test helper: the catalog only ever lists folders that hold a job.yml.
    """
    if not job_dir.exists():
        raise JobParseError(f"Job directory does not exist: {job_dir}")
    if not job_dir.is_dir():
        raise JobParseError(f"Job path is not a directory: {job_dir}")
    yml_path = job_dir / "job.yml"
    if not yml_path.exists():
        raise JobParseError(f"job.yml not found in {job_dir}")
    raw = read_regular_file(yml_path, limit=MAX_FILE_BYTES + 1)
    return parse_job_bytes(raw, job_dir=job_dir, yml_path=yml_path)


def _parse(data: dict[str, Any]) -> JobDef:
    return parse_job_text(
        yaml.safe_dump(data, sort_keys=False),
        job_dir=Path("/jobs/demo_job"),
        yml_path=Path("/jobs/demo_job/job.yml"),
    )


def _error(data: dict[str, Any]) -> str:
    with pytest.raises(JobParseError) as info:
        _parse(data)
    return str(info.value)


# --- valid jobs --------------------------------------------------------------------------------


def test_minimal_job_with_concurrent_workflow(tmp_path: Path) -> None:
    job = parse_job_dir(_write(tmp_path / "demo_job", _job()))

    assert job.name == "demo_job"
    assert job.version == "1.0.0"
    assert job.summary == "Demo"
    assert job.common_info == "Shared context"
    assert job.job_dir == str(tmp_path / "demo_job")
    assert [s.id for s in job.steps] == ["gather", "part_a", "part_b"]

    workflow = job.workflow("main")
    assert workflow is not None
    assert workflow.entries == (("gather",), ("part_a", "part_b"))
    assert workflow.concurrent == (False, True)
    assert workflow.steps == ("gather", "part_a", "part_b")
    assert job.workflow("nope") is None

    gather = job.step("gather")
    assert gather is not None
    assert gather.inputs == (UserParameterInput(name="topic", description="What to gather"),)
    assert gather.outputs == (
        OutputSpec(name="gather.md", type="file", description="Out", required=True),
    )
    assert gather.dependencies == ()
    assert gather.hooks == {}
    assert (gather.exposed, gather.hidden, gather.agent) == (False, False, None)
    assert job.step("nope") is None


def test_outputs_keep_yaml_order() -> None:
    outputs = {
        name: {"type": "files", "description": name, "required": False}
        for name in ["z.md", "job.yml", ".deepwork/tmp/a.md", "m"]
    }
    job = _parse(_job(steps=[_step("gather", outputs=outputs)], workflows=[]))
    assert [o.name for o in job.steps[0].outputs] == ["z.md", "job.yml", ".deepwork/tmp/a.md", "m"]


def test_optional_step_fields_are_parsed() -> None:
    step = _step(
        "gather",
        exposed=True,
        hidden=True,
        agent="general-purpose",
        reviews=[
            {
                "run_each": "gather.md",
                "quality_criteria": {"Complete": "All sections are filled in.", "Short": "Brief."},
                "additional_review_guidance": "Read job.yml for context.",
            },
            {"run_each": "step", "quality_criteria": {"Done": "It is done."}},
        ],
    )
    parsed = _parse(_job(steps=[step], workflows=[])).steps[0]
    assert (parsed.exposed, parsed.hidden, parsed.agent) == (True, True, "general-purpose")
    assert parsed.reviews == (
        ReviewSpec(
            run_each="gather.md",
            quality_criteria={"Complete": "All sections are filled in.", "Short": "Brief."},
            additional_review_guidance="Read job.yml for context.",
        ),
        ReviewSpec(run_each="step", quality_criteria={"Done": "It is done."}),
    )
    assert list(parsed.reviews[0].quality_criteria) == ["Complete", "Short"]


def test_stop_hooks_are_appended_to_after_agent() -> None:
    step = _step(
        "gather",
        hooks={"before_tool": [{"script": "hooks/check.sh"}], "after_agent": [{"prompt": "one"}]},
        stop_hooks=[{"prompt_file": "hooks/two.md"}, {"prompt": "three"}],
    )
    hooks = _parse(_job(steps=[step], workflows=[])).steps[0].hooks
    assert hooks == {
        "before_tool": ({"script": "hooks/check.sh"},),
        "after_agent": ({"prompt": "one"}, {"prompt_file": "hooks/two.md"}, {"prompt": "three"}),
    }


def test_stop_hooks_alone_create_after_agent() -> None:
    step = _step("gather", stop_hooks=[{"prompt": "check"}])
    assert _parse(_job(steps=[step], workflows=[])).steps[0].hooks == {
        "after_agent": ({"prompt": "check"},)
    }


def test_one_element_list_entry_is_concurrent() -> None:
    job = _parse(
        _job(workflows=[{"name": "main", "summary": "s", "steps": [["gather"], "part_a"]}])
    )
    workflow = job.workflows[0]
    assert workflow.entries == (("gather",), ("part_a",))
    assert workflow.concurrent == (True, False)
    assert workflow.steps == ("gather", "part_a")


def test_file_inputs_with_dependencies() -> None:
    steps = [
        _step("gather"),
        _step(
            "wrap_up",
            inputs=[{"file": "gather.md", "from_step": "gather"}],
            dependencies=["gather"],
        ),
    ]
    job = _parse(_job(steps=steps, workflows=[{"name": "w", "summary": "s", "steps": ["gather"]}]))
    wrap_up = job.step("wrap_up")
    assert wrap_up is not None
    assert wrap_up.inputs == (FileInput(file="gather.md", from_step="gather"),)
    assert wrap_up.dependencies == ("gather",)


def test_orphan_steps_only_warn(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="workflows.jobdefs.format_0_9"):
        job = _parse(_job(workflows=[]))
    assert job.workflows == ()
    assert "gather, part_a, part_b" in caplog.text


def test_outputs_may_be_empty_and_reviews_may_be_empty() -> None:
    job = _parse(_job(steps=[_step("errata", outputs={})], workflows=[]))
    assert job.steps[0].outputs == ()
    assert job.steps[0].reviews == ()


# --- §1.9 load errors --------------------------------------------------------------------------


def test_missing_directory(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(JobParseError) as info:
        parse_job_dir(missing)
    assert str(info.value) == f"Job directory does not exist: {missing}"


def test_path_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(JobParseError) as info:
        parse_job_dir(path)
    assert str(info.value) == f"Job path is not a directory: {path}"


def test_missing_job_yml(tmp_path: Path) -> None:
    with pytest.raises(JobParseError) as info:
        parse_job_dir(tmp_path)
    assert str(info.value) == f"job.yml not found in {tmp_path}"


def test_invalid_yaml_names_the_file(tmp_path: Path) -> None:
    job_dir = _write(tmp_path / "bad", "name: demo\nsteps: [\n")
    with pytest.raises(JobParseError) as info:
        parse_job_dir(job_dir)
    yml = job_dir / "job.yml"
    assert str(info.value) == (
        f"Failed to load job.yml: Failed to parse YAML file {yml}: while parsing a flow node\n"
        "expected the node content, but found '<stream end>'\n"
        f'  in "{yml}", line 3, column 1'
    )


def test_yaml_root_is_a_list(tmp_path: Path) -> None:
    with pytest.raises(JobParseError) as info:
        parse_job_dir(_write(tmp_path / "j", "- a\n- b\n"))
    assert (
        str(info.value) == "Failed to load job.yml: YAML file must contain a dictionary, got list"
    )


def test_yaml_root_is_a_scalar(tmp_path: Path) -> None:
    with pytest.raises(JobParseError) as info:
        parse_job_dir(_write(tmp_path / "j", "hello\n"))
    assert str(info.value) == "Failed to load job.yml: YAML file must contain a dictionary, got str"


@pytest.mark.parametrize("text", ["", "# only a comment\n", "null\n"])
def test_empty_job_yml_says_it_is_empty(tmp_path: Path, text: str) -> None:
    with pytest.raises(JobParseError) as info:
        parse_job_dir(_write(tmp_path / "j", text))
    assert str(info.value) == "job.yml is empty"


def test_non_utf8_job_yml_is_a_parse_error(tmp_path: Path) -> None:
    job_dir = _write(tmp_path / "j", b"name: caf\xe9\n")
    with pytest.raises(JobParseError) as info:
        parse_job_dir(job_dir)
    assert str(info.value) == (
        f"Failed to load job.yml: {job_dir / 'job.yml'} is not valid UTF-8: 'utf-8' codec "
        "can't decode byte 0xe9 in position 9: invalid continuation byte"
    )


# --- schema errors -----------------------------------------------------------------------------


def _without(data: dict[str, Any], key: str) -> dict[str, Any]:
    data = copy.deepcopy(data)
    del data[key]
    return data


def _with_step_field(key: str, value: Any) -> dict[str, Any]:
    data = _job()
    data["steps"][0][key] = value
    return data


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            _without(_job(), "summary"), "root: 'summary' is a required property", id="no-summary"
        ),
        pytest.param(
            {"name": "Bad-Name", "version": "1.0", "steps": [{"id": "x", "outputs": []}]},
            "root: 'summary' is a required property",
            id="fixture-invalid-job",
        ),
        pytest.param(
            _job(name="Bad-Name"),
            "name: 'Bad-Name' does not match '^[a-z][a-z0-9_]*$'",
            id="name-pattern",
        ),
        pytest.param(
            _job(version="1.0"),
            "version: '1.0' does not match '^\\\\d+\\\\.\\\\d+\\\\.\\\\d+$'",
            id="version-not-semver",
        ),
        pytest.param(
            _job(version=1.0), "version: 1.0 is not of type 'string'", id="version-unquoted"
        ),
        pytest.param(
            _job(summary="x" * 201),
            f"summary: '{'x' * 201}' is too long",
            id="summary-too-long",
        ),
        pytest.param(
            _job(description="Old field"),
            "root: Additional properties are not allowed ('description' was unexpected)",
            id="unknown-top-level-key",
        ),
        pytest.param(_job(steps=[]), "steps: [] should be non-empty", id="no-steps"),
        pytest.param(
            _with_step_field("outputs", ["gather.md"]),
            "steps -> 0 -> outputs: ['gather.md'] is not of type 'object'",
            id="outputs-as-list",
        ),
        pytest.param(
            _with_step_field("outputs", {"x": {"type": "file", "description": "d"}}),
            "steps -> 0 -> outputs -> x: 'required' is a required property",
            id="output-without-required",
        ),
        pytest.param(
            _with_step_field(
                "inputs", [{"name": "a", "description": "b", "file": "c", "from_step": "d"}]
            ),
            "steps -> 0 -> inputs -> 0: {'name': 'a', 'description': 'b', 'file': 'c', "
            "'from_step': 'd'} is not valid under any of the given schemas",
            id="mixed-input-variants",
        ),
        pytest.param(
            _with_step_field("hooks", {"after_agent": [{"prompt": "a", "script": "b"}]}),
            "steps -> 0 -> hooks -> after_agent -> 0: {'prompt': 'a', 'script': 'b'} is not "
            "valid under any of the given schemas",
            id="hook-action-two-keys",
        ),
        pytest.param(
            _with_step_field("hooks", {"on_exit": []}),
            "steps -> 0 -> hooks: Additional properties are not allowed ('on_exit' was unexpected)",
            id="unknown-hook-event",
        ),
        pytest.param(
            _with_step_field("reviews", [{"run_each": "step", "quality_criteria": {}}]),
            "steps -> 0 -> reviews -> 0 -> quality_criteria: {} should be non-empty",
            id="empty-criteria",
        ),
        # best_match descends into the entry's oneOf, whose paths are relative: 0.9.1 says
        # "root" here, and so do we.
        pytest.param(
            _job(workflows=[{"name": "main", "summary": "s", "steps": [[]]}]),
            "root: [] should be non-empty",
            id="empty-concurrent-group",
        ),
    ],
)
def test_schema_errors(data: dict[str, Any], expected: str) -> None:
    assert _error(data) == SCHEMA_FAIL + expected


# --- §1.8 semantic errors ----------------------------------------------------------------------


def test_missing_dependency() -> None:
    steps = [_step("gather", dependencies=["ghost"])]
    assert _error(_job(steps=steps, workflows=[])) == (
        "Step 'gather' depends on non-existent step 'ghost'"
    )


def test_missing_dependency_beats_an_earlier_cycle() -> None:
    steps = [_step("a", dependencies=["a"]), _step("b", dependencies=["ghost"])]
    assert _error(_job(steps=steps, workflows=[])) == (
        "Step 'b' depends on non-existent step 'ghost'"
    )


def test_self_dependency_is_a_cycle() -> None:
    steps = [_step("a", dependencies=["a"])]
    assert _error(_job(steps=steps, workflows=[])) == (
        "Circular dependency detected involving step 'a'"
    )


def test_cycle_is_reported_at_the_step_the_search_started_from() -> None:
    # `entry` is not in the cycle, but the search from it is the one that finds b <-> c.
    steps = [
        _step("leaf"),
        _step("entry", dependencies=["leaf", "b"]),
        _step("b", dependencies=["c"]),
        _step("c", dependencies=["b"]),
    ]
    assert _error(_job(steps=steps, workflows=[])) == (
        "Circular dependency detected involving step 'entry'"
    )


def test_long_dependency_chain_does_not_recurse() -> None:
    ids = [f"s{i}" for i in range(3000)]
    steps = [_step(ids[0])] + [
        _step(ids[i], dependencies=[ids[i - 1]], outputs={}) for i in range(1, len(ids))
    ]
    assert len(_parse(_job(steps=steps, workflows=[])).steps) == 3000


def test_file_input_from_missing_step() -> None:
    steps = [_step("a", inputs=[{"file": "x.md", "from_step": "ghost"}])]
    assert _error(_job(steps=steps, workflows=[])) == (
        "Step 'a' references non-existent step 'ghost' in file input"
    )


def test_file_input_not_in_dependencies() -> None:
    steps = [_step("a"), _step("b", inputs=[{"file": "a.md", "from_step": "a"}])]
    assert _error(_job(steps=steps, workflows=[])) == (
        "Step 'b' has file input from 'a' but 'a' is not in dependencies"
    )


def test_file_input_name_is_not_checked_against_outputs() -> None:
    steps = [
        _step("a"),
        _step("b", inputs=[{"file": "not_an_output", "from_step": "a"}], dependencies=["a"]),
    ]
    _parse(_job(steps=steps, workflows=[]))


def test_review_of_unknown_output_lists_sorted_outputs() -> None:
    outputs = {
        name: {"type": "file", "description": "d", "required": True} for name in ["z.md", "b.md"]
    }
    review = {"run_each": "nope.md", "quality_criteria": {"Ok": "It is ok."}}
    steps = [_step("a", outputs=outputs, reviews=[review])]
    assert _error(_job(steps=steps, workflows=[])) == (
        "Step 'a' has review with run_each='nope.md' but no output with that name. "
        "Valid values: 'step', b.md, z.md"
    )


def test_review_of_step_without_outputs() -> None:
    review = {"run_each": "report.md", "quality_criteria": {"Ok": "It is ok."}}
    steps = [_step("a", outputs={}, reviews=[review])]
    assert _error(_job(steps=steps, workflows=[])) == (
        "Step 'a' has review with run_each='report.md' but no output with that name. "
        "Valid values: 'step', (no outputs)"
    )


def test_duplicate_workflow_name() -> None:
    workflows = [
        {"name": "main", "summary": "s", "steps": ["gather"]},
        {"name": "main", "summary": "s", "steps": ["part_a"]},
    ]
    assert _error(_job(workflows=workflows)) == "Duplicate workflow name: 'main'"


def test_workflow_references_missing_step() -> None:
    workflows = [{"name": "main", "summary": "s", "steps": ["gather", ["part_a", "ghost"]]}]
    assert _error(_job(workflows=workflows)) == (
        "Workflow 'main' references non-existent step 'ghost'"
    )


def test_workflow_duplicate_step_across_concurrent_group() -> None:
    workflows = [{"name": "main", "summary": "s", "steps": ["gather", ["part_a", "gather"]]}]
    assert _error(_job(workflows=workflows)) == "Workflow 'main' contains duplicate step 'gather'"


def test_workflow_missing_step_beats_an_earlier_duplicate() -> None:
    workflows = [{"name": "main", "summary": "s", "steps": ["gather", "gather", "ghost"]}]
    assert _error(_job(workflows=workflows)) == (
        "Workflow 'main' references non-existent step 'ghost'"
    )


def test_workflow_checks_run_one_workflow_at_a_time() -> None:
    workflows = [
        {"name": "first", "summary": "s", "steps": ["ghost"]},
        {"name": "first", "summary": "s", "steps": ["gather"]},
    ]
    assert _error(_job(workflows=workflows)) == (
        "Workflow 'first' references non-existent step 'ghost'"
    )


def test_step_may_appear_in_several_workflows() -> None:
    workflows = [
        {"name": "one", "summary": "s", "steps": ["gather"]},
        {"name": "two", "summary": "s", "steps": ["gather", "part_a", "part_b"]},
    ]
    assert [w.name for w in _parse(_job(workflows=workflows)).workflows] == ["one", "two"]


def _broken_everywhere() -> dict[str, Any]:
    """A job with one fault of every §1.8 kind, each in a later step than the next kind's."""
    bad_review = {"run_each": "nope", "quality_criteria": {"Ok": "ok"}}
    steps = [
        _step("w", reviews=[bad_review]),
        _step("f", inputs=[{"file": "x", "from_step": "w"}]),
        _step("d", dependencies=["ghost"]),
    ]
    workflows = [{"name": "main", "summary": "s", "steps": ["phantom"]}]
    return _job(steps=steps, workflows=workflows)


def test_semantic_checks_run_in_0_9_1_order() -> None:
    data = _broken_everywhere()
    assert _error(data) == "Step 'd' depends on non-existent step 'ghost'"

    del data["steps"][2]["dependencies"]
    assert _error(data) == "Step 'f' has file input from 'w' but 'w' is not in dependencies"

    data["steps"][1]["dependencies"] = ["w"]
    assert _error(data) == (
        "Step 'w' has review with run_each='nope' but no output with that name. "
        "Valid values: 'step', w.md"
    )

    data["steps"][0]["reviews"] = []
    assert _error(data) == "Workflow 'main' references non-existent step 'phantom'"

    data["workflows"][0]["steps"] = ["w", "f", "d"]
    _parse(data)


# --- JSON round trip ---------------------------------------------------------------------------


def _rich_job() -> JobDef:
    steps = [
        _step(
            "gather",
            inputs=[{"name": "topic", "description": "What"}],
            outputs={
                name: {"type": "file", "description": name, "required": True}
                for name in ["z.md", "a.md", "job.yml"]
            },
            reviews=[
                {
                    "run_each": "z.md",
                    "quality_criteria": {"Zeta": "z", "Alpha": "a"},
                    "additional_review_guidance": "Look around.",
                },
                {"run_each": "step", "quality_criteria": {"Done": "yes"}},
            ],
            hooks={"before_prompt": [{"prompt": "p"}], "after_agent": [{"script": "s.sh"}]},
            stop_hooks=[{"prompt_file": "old.md"}],
            exposed=True,
            hidden=True,
            agent="general-purpose",
        ),
        _step("part_a", inputs=[{"file": "z.md", "from_step": "gather"}], dependencies=["gather"]),
        _step("part_b", outputs={}),
    ]
    workflows = [
        {"name": "main", "summary": "Main", "steps": ["gather", ["part_a", "part_b"]]},
        {"name": "solo", "summary": "Solo", "steps": [["part_b"]]},
    ]
    return _parse(_job(steps=steps, workflows=workflows))


def job_from_dict(data: dict[str, Any]) -> JobDef:
    """Rebuild a JobDef from ``job_to_dict`` output: proof that the stored dict loses nothing.

    A test helper: the server reads the stored rows, never this dict back into a JobDef.
    """
    if data.get("format") != DICT_FORMAT:
        raise ValueError(f"Unsupported job dict format: {data.get('format')!r}")
    return JobDef(
        name=data["name"],
        version=data["version"],
        summary=data["summary"],
        common_info=data["common_info"],
        steps=tuple(_step_from_dict(s) for s in data["steps"]),
        workflows=tuple(
            WorkflowDef(
                name=w["name"],
                summary=w["summary"],
                entries=tuple(tuple(e) for e in w["entries"]),
                concurrent=tuple(w["concurrent"]),
            )
            for w in data["workflows"]
        ),
        job_dir=data["job_dir"],
    )


def _step_from_dict(data: dict[str, Any]) -> StepDef:
    return StepDef(
        id=data["id"],
        name=data["name"],
        description=data["description"],
        instructions_file=data["instructions_file"],
        inputs=tuple(
            FileInput(file=i["file"], from_step=i["from_step"])
            if "file" in i
            else UserParameterInput(name=i["name"], description=i["description"])
            for i in data["inputs"]
        ),
        outputs=tuple(
            OutputSpec(
                name=o["name"], type=o["type"], description=o["description"], required=o["required"]
            )
            for o in data["outputs"]
        ),
        reviews=tuple(
            ReviewSpec(
                run_each=r["run_each"],
                quality_criteria=dict(r["quality_criteria"]),
                additional_review_guidance=r["additional_review_guidance"],
            )
            for r in data["reviews"]
        ),
        dependencies=tuple(data["dependencies"]),
        hooks={event: tuple(dict(a) for a in actions) for event, actions in data["hooks"]},
        exposed=data["exposed"],
        hidden=data["hidden"],
        agent=data["agent"],
    )


def test_round_trip_is_equal() -> None:
    job = _rich_job()
    assert job_from_dict(job_to_dict(job)) == job


def test_round_trip_survives_json_with_reordered_keys() -> None:
    # jsonb reorders object keys; anything order-sensitive must survive that.
    job = _rich_job()
    stored = json.loads(json.dumps(job_to_dict(job), sort_keys=True))
    restored = job_from_dict(stored)
    assert restored == job
    gather = restored.steps[0]
    assert [o.name for o in gather.outputs] == ["z.md", "a.md", "job.yml"]
    assert list(gather.reviews[0].quality_criteria) == ["Zeta", "Alpha"]
    assert list(gather.hooks) == ["before_prompt", "after_agent"]


def test_from_dict_rejects_unknown_format() -> None:
    data = job_to_dict(_rich_job())
    assert data["format"] == DICT_FORMAT
    data["format"] = 99
    with pytest.raises(ValueError, match="Unsupported job dict format: 99"):
        job_from_dict(data)
