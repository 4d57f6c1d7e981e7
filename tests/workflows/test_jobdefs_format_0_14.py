"""Both job.yml formats through one parser: told apart first, each with its own rules."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.demo14 import DEMO14_JOB
from workflows.jobdefs.base import JobParseError
from workflows.jobdefs.format_0_14 import is_format as is_014_format
from workflows.jobdefs.parse import job_to_dict, parse_job_text, runtime_workflow

FAIL = "Job definition validation failed: Validation error at "


def _parse(data: dict[str, Any] | str, tmp_path: Path):
    text = data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)
    return parse_job_text(text, job_dir=tmp_path, yml_path=tmp_path / "job.yml")


def _demo() -> dict[str, Any]:
    return yaml.safe_load(DEMO14_JOB)


def test_format_detection_follows_the_root_keys() -> None:
    assert is_014_format({"workflows": {}})
    assert is_014_format({"step_arguments": []})
    assert not is_014_format({"workflows": [], "version": "1"})
    assert not is_014_format({"steps": []})
    assert not is_014_format({})


def test_a_valid_014_job_lands_in_the_shared_representation(tmp_path: Path) -> None:
    job = _parse(DEMO14_JOB, tmp_path)
    assert job.format == "0.14"
    assert [w.name for w in job.workflows] == ["main", "helper", "plain"]
    assert [w.steps for w in job.workflows] == [
        ("gather", "judge", "nested"),
        ("help",),
        ("one", "two"),
    ]
    gather = job.step("gather")
    assert gather is not None
    assert [(o.name, o.type, o.required) for o in gather.outputs] == [
        ("notes.md", "file_path", True),
        ("data.json", "file_path", True),
    ]
    stored = job_to_dict(job)
    main = runtime_workflow(stored, "main")
    assert main.common_info == "Shared 0.14 context.\n"
    assert main.post_workflow_instructions == "Open a pull request."
    first = main.steps[0]
    assert [(a.name, a.type) for a in first.inputs] == [("topic", "string")]
    notes = first.outputs[0]
    # The output's own review first, then the argument's default review.
    assert [suffix for suffix, _ in notes.reviews] == ["", "_arg"]
    assert first.outputs[1].json_schema == {"type": "object", "required": ["title"]}
    assert first.process_requirements == (("sources", "The notes MUST cite their sources."),)
    assert main.steps[2].sub_workflow == ("helper", None)
    assert runtime_workflow(stored, "helper").agent == "general-purpose"


def test_a_step_name_in_two_workflows_gets_two_rows(tmp_path: Path) -> None:
    data = _demo()
    data["workflows"]["plain"]["steps"][0]["name"] = "gather"
    job = _parse(data, tmp_path)
    assert [w.steps for w in job.workflows][2] == ("plain.gather", "two")
    assert job.step("plain.gather") is not None
    assert job.step("main.gather") is not None
    assert runtime_workflow(job_to_dict(job), "plain").steps[0].name == "gather"


def _broken(mutate) -> dict[str, Any]:
    data = copy.deepcopy(_demo())
    mutate(data)
    return data


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            _broken(
                lambda d: d["workflows"]["main"]["steps"].append(
                    {"name": "gather", "instructions": "x"}
                )
            ),
            "Workflow 'main' has duplicate step name 'gather'",
            id="duplicate-step",
        ),
        pytest.param(
            _broken(lambda d: d["workflows"]["plain"]["steps"][0].update(inputs={"ghost": {}})),
            "Workflow 'plain' step 'one' references non-existent step_argument 'ghost' in inputs",
            id="unknown-input",
        ),
        pytest.param(
            _broken(lambda d: d["workflows"]["plain"]["steps"][0].update(outputs={"ghost": {}})),
            "Workflow 'plain' step 'one' references non-existent step_argument 'ghost' in outputs",
            id="unknown-output",
        ),
        pytest.param(
            _broken(
                lambda d: d["workflows"]["plain"]["steps"][0].update(
                    sub_workflow={"workflow_name": "nope"}
                )
            ),
            "Workflow 'plain' step 'one' references non-existent workflow 'nope'",
            id="unknown-sub-workflow",
        ),
        pytest.param(
            _broken(
                lambda d: d["workflows"]["plain"]["steps"][0].update(
                    sub_workflow={"workflow_name": "helper"}
                )
            ),
            "Workflow 'plain' step 'one' has both 'instructions' and 'sub_workflow' — must "
            "have exactly one",
            id="both",
        ),
        pytest.param(
            _broken(lambda d: d["workflows"]["plain"]["steps"][0].pop("instructions")),
            "Workflow 'plain' step 'one' has neither 'instructions' nor 'sub_workflow' — must "
            "have exactly one",
            id="neither",
        ),
        pytest.param(
            _broken(lambda d: d.update(version="1.0")),
            FAIL + "root: Additional properties are not allowed ('version' was unexpected)",
            id="version-key",
        ),
        pytest.param(
            {"name": "x", "summary": "s", "step_arguments": [], "workflows": {}},
            FAIL + "workflows: {} should be non-empty",
            id="no-workflows",
        ),
        pytest.param(
            _broken(lambda d: d["workflows"].update(W=d["workflows"]["plain"])),
            FAIL + "workflows: 'W' does not match any of the regexes: '^[a-z][a-z0-9_]*$'",
            id="capital-workflow",
        ),
        pytest.param(
            _broken(lambda d: d["step_arguments"][2].update(json_schema={"type": "nonsense"})),
            FAIL + "step_arguments -> 2 -> json_schema: the JSON schema of 'data.json' is "
            "invalid at type: 'nonsense' is not valid under any of the given schemas",
            id="invalid-json-schema",
        ),
    ],
)
def test_014_rules_and_texts(tmp_path: Path, data: dict[str, Any], expected: str) -> None:
    with pytest.raises(JobParseError) as info:
        _parse(data, tmp_path)
    assert str(info.value) == expected


def test_step_arguments_without_workflows_is_judged_as_014(tmp_path: Path) -> None:
    with pytest.raises(JobParseError) as info:
        _parse({"name": "x", "summary": "s", "step_arguments": []}, tmp_path)
    assert str(info.value) == FAIL + "root: 'workflows' is a required property"


def test_a_091_job_is_still_judged_by_091_rules(tmp_path: Path) -> None:
    with pytest.raises(JobParseError) as info:
        _parse({"name": "x", "summary": "s", "steps": []}, tmp_path)
    assert str(info.value) == FAIL + "root: 'version' is a required property"
