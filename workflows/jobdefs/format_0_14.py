"""DeepWork 0.14's job.yml format: typed ``step_arguments`` and ``workflows`` as a map.

A 0.14 job is a different document from a 0.9.1 one: ``step_arguments`` (typed, with optional
``json_schema`` and default ``review``), and ``workflows`` as a map whose steps are written
inline (``instructions``, or ``sub_workflow`` delegating to another workflow), with
``inputs``/``outputs`` maps and ``process_requirements``. They are validated with their own
schema (``job014.schema.json``) and semantic checks, in 0.14's order and wording, and land in
the same ``JobDef`` the catalog stores for 0.9.1 jobs, keeping the whole normalised definition
the runtime view reads.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workflows.jobdefs.base import (
    DICT_FORMAT,
    MAX_STEPS,
    MAX_WORKFLOWS,
    JobDef,
    JobParseError,
    OutputSpec,
    RtArg,
    RtStep,
    RtWorkflow,
    StepDef,
    WorkflowDef,
)

SCHEMA_PATH = Path(__file__).with_name("job014.schema.json")
FORMAT = "0.14"
NAME_PATTERN = "^[a-z][a-z0-9_]*$"


def is_format(data: Mapping[str, Any]) -> bool:
    """Whether a parsed job.yml root is written in 0.14's format: ``workflows`` as a mapping,
    or any ``step_arguments``."""
    return isinstance(data.get("workflows"), dict) or "step_arguments" in data


def is_stored(definition: Mapping[str, Any]) -> bool:
    return definition.get("job_format") == FORMAT


@functools.cache
def _validator() -> Any:
    from workflows import json_schemas

    return json_schemas.validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def _validate_schema(data: Mapping[str, Any]) -> None:
    from workflows import json_schemas

    error = json_schemas.best_error(_validator(), data)
    if error is None:
        return
    loc = " -> ".join(str(part) for part in error.path) if error.path else "root"
    raise JobParseError(
        f"Job definition validation failed: Validation error at {loc}: {error.message}"
    )


def _check_counts(data: Mapping[str, Any]) -> None:
    workflows = data.get("workflows")
    if isinstance(workflows, dict):
        if len(workflows) > MAX_WORKFLOWS:
            raise JobParseError(
                "Job definition validation failed: Validation error at workflows: "
                f"{len(workflows)} workflows given; a job may define at most {MAX_WORKFLOWS}"
            )
        steps = sum(
            len(wf["steps"])
            for wf in workflows.values()
            if isinstance(wf, dict) and isinstance(wf.get("steps"), list)
        )
        if steps > MAX_STEPS:
            raise JobParseError(
                "Job definition validation failed: Validation error at workflows: "
                f"{steps} steps given; a job may define at most {MAX_STEPS}"
            )


def _check_semantics(data: Mapping[str, Any]) -> None:
    """0.14's four checks, first failure wins, in its order."""
    arguments = {arg["name"] for arg in data["step_arguments"]}
    workflows: Mapping[str, Any] = data["workflows"]
    for wf_name, wf in workflows.items():
        seen: set[str] = set()
        for step in wf["steps"]:
            if step["name"] in seen:
                raise JobParseError(
                    f"Workflow '{wf_name}' has duplicate step name '{step['name']}'"
                )
            seen.add(step["name"])
    for wf_name, wf in workflows.items():
        for step in wf["steps"]:
            for kind in ("inputs", "outputs"):
                for arg in step.get(kind, {}) or {}:
                    if arg not in arguments:
                        raise JobParseError(
                            f"Workflow '{wf_name}' step '{step['name']}' references "
                            f"non-existent step_argument '{arg}' in {kind}"
                        )
    for wf_name, wf in workflows.items():
        for step in wf["steps"]:
            sub = step.get("sub_workflow")
            if sub and "workflow_job" not in sub and sub["workflow_name"] not in workflows:
                raise JobParseError(
                    f"Workflow '{wf_name}' step '{step['name']}' references non-existent "
                    f"workflow '{sub['workflow_name']}'"
                )
    for wf_name, wf in workflows.items():
        for step in wf["steps"]:
            has_instructions, has_sub = "instructions" in step, "sub_workflow" in step
            if has_instructions == has_sub:
                which = (
                    "both 'instructions' and 'sub_workflow'"
                    if has_instructions
                    else "neither 'instructions' nor 'sub_workflow'"
                )
                raise JobParseError(
                    f"Workflow '{wf_name}' step '{step['name']}' has {which} — must have "
                    "exactly one"
                )


def _check_json_schemas(data: Mapping[str, Any]) -> None:
    # 0.14 only finds a broken json_schema when an output is checked against it; a job whose
    # schema can never validate anything is reported when it loads instead. So is one whose
    # $ref leaves it or loops: checking an output must never fetch a URL or recurse forever.
    from workflows import json_schemas

    for index, arg in enumerate(data["step_arguments"]):
        schema = arg.get("json_schema")
        if schema is None:
            continue
        try:
            json_schemas.check(schema)
        except json_schemas.SchemaProblem as exc:
            loc = " -> ".join(str(p) for p in exc.path) if exc.path else "json_schema"
            raise JobParseError(
                "Job definition validation failed: Validation error at step_arguments -> "
                f"{index} -> json_schema: the JSON schema of '{arg['name']}' is invalid at "
                f"{loc}: {exc.message}"
            ) from exc


def build_job(data: Mapping[str, Any], *, job_dir: Path) -> JobDef:
    """A schema- and semantics-checked 0.14 document as the catalog's ``JobDef``."""
    _check_counts(data)
    _validate_schema(data)
    _check_semantics(data)
    _check_json_schemas(data)
    arguments: dict[str, Mapping[str, Any]] = {}
    for arg in data["step_arguments"]:
        # No uniqueness check in 0.14: the first argument of a name wins on lookup.
        arguments.setdefault(arg["name"], arg)

    name_count: dict[str, int] = {}
    for wf in data["workflows"].values():
        for step in wf["steps"]:
            name_count[step["name"]] = name_count.get(step["name"], 0) + 1

    def step_key(wf_name: str, step_name: str) -> str:
        # Step rows are unique per job; a name used in two workflows is two different steps.
        return step_name if name_count[step_name] == 1 else f"{wf_name}.{step_name}"

    steps: list[StepDef] = []
    workflows: list[WorkflowDef] = []
    wf_dicts: list[dict[str, Any]] = []
    step_dicts: list[dict[str, Any]] = []
    for wf_name, wf in data["workflows"].items():
        keys = []
        wf_steps = []
        for step in wf["steps"]:
            key = step_key(wf_name, step["name"])
            keys.append(key)
            outputs = [
                {
                    "name": str(out_name),
                    "required": (spec or {}).get("required", True),
                    "review": (spec or {}).get("review"),
                }
                for out_name, spec in (step.get("outputs") or {}).items()
            ]
            inputs = [
                {"name": str(in_name), "required": (spec or {}).get("required", True)}
                for in_name, spec in (step.get("inputs") or {}).items()
            ]
            step_dict = {
                "id": key,
                "name": step["name"],
                "workflow": wf_name,
                "instructions": step.get("instructions"),
                "sub_workflow": step.get("sub_workflow"),
                "inputs": inputs,
                "outputs": outputs,
                "process_requirements": [
                    [str(k), v] for k, v in (step.get("process_requirements") or {}).items()
                ],
            }
            step_dicts.append(step_dict)
            wf_steps.append(step_dict)
            steps.append(
                StepDef(
                    id=key,
                    name=step["name"],
                    description="",
                    instructions_file="",
                    outputs=tuple(
                        OutputSpec(
                            name=out["name"],
                            type=arguments[out["name"]]["type"],
                            description=arguments[out["name"]]["description"],
                            required=out["required"],
                        )
                        for out in outputs
                    ),
                )
            )
        workflows.append(
            WorkflowDef(
                name=wf_name,
                summary=wf["summary"],
                entries=tuple((key,) for key in keys),
                concurrent=tuple(False for _ in keys),
            )
        )
        wf_dicts.append(
            {
                "name": wf_name,
                "summary": wf["summary"],
                "agent": wf.get("agent"),
                "common_info": wf.get("common_job_info_provided_to_all_steps_at_runtime", ""),
                "post_workflow_instructions": wf.get("post_workflow_instructions"),
                "steps": [s["id"] for s in wf_steps],
            }
        )
    format_data = {
        "step_arguments": [
            {
                "name": arg["name"],
                "description": arg["description"],
                "type": arg["type"],
                "review": arg.get("review"),
                "json_schema": arg.get("json_schema"),
            }
            for arg in data["step_arguments"]
        ],
        "workflows": wf_dicts,
        "steps": step_dicts,
    }
    return JobDef(
        name=data["name"],
        version="",
        summary=data["summary"],
        common_info="",
        steps=tuple(steps),
        workflows=tuple(workflows),
        job_dir=str(job_dir),
        format=FORMAT,
        format_data=format_data,
    )


def job_to_dict(job: JobDef) -> dict[str, Any]:
    """The stored form of a 0.14 job: everything ``runtime_workflow`` needs, order kept in
    lists (``jsonb`` does not keep key order)."""
    assert job.format_data is not None
    return {
        "format": DICT_FORMAT,
        "job_format": FORMAT,
        "name": job.name,
        "version": job.version,
        "summary": job.summary,
        "common_info": job.common_info,
        "job_dir": job.job_dir,
        **job.format_data,
    }


# --- the runtime view ------------------------------------------------------------------------


def runtime_view(definition: Mapping[str, Any], workflow_name: str) -> RtWorkflow:
    arguments: dict[str, Mapping[str, Any]] = {}
    for arg in definition["step_arguments"]:
        arguments.setdefault(arg["name"], arg)
    steps = {s["id"]: s for s in definition["steps"]}
    wf = next(w for w in definition["workflows"] if w["name"] == workflow_name)

    def rt_arg(name: str, required: bool, own_review: Any = None) -> RtArg:
        arg = arguments[name]
        blocks = [block for block in (own_review, arg.get("review")) if block]
        # Rule names follow position, as in 0.14: the first block is unsuffixed, the second
        # (the argument's, when the output has its own) gets "_arg".
        reviews = [("" if i == 0 else "_arg", block) for i, block in enumerate(blocks)]
        return RtArg(
            name=name,
            type=arg["type"],
            description=arg["description"],
            required=required,
            json_schema=arg.get("json_schema"),
            reviews=tuple(reviews),
        )

    rt_steps = []
    for key in wf["steps"]:
        step = steps[key]
        sub = step.get("sub_workflow")
        rt_steps.append(
            RtStep(
                key=key,
                name=step["name"],
                instructions=step.get("instructions"),
                instructions_file=None,
                sub_workflow=(sub["workflow_name"], sub.get("workflow_job")) if sub else None,
                inputs=tuple(rt_arg(i["name"], i["required"]) for i in step["inputs"]),
                outputs=tuple(
                    rt_arg(o["name"], o["required"], o.get("review")) for o in step["outputs"]
                ),
                process_requirements=tuple((k, v) for k, v in step["process_requirements"]),
            )
        )
    return RtWorkflow(
        job_name=definition["name"],
        name=wf["name"],
        summary=wf["summary"],
        agent=wf.get("agent"),
        common_info=wf.get("common_info") or "",
        post_workflow_instructions=wf.get("post_workflow_instructions"),
        steps=tuple(rt_steps),
    )
