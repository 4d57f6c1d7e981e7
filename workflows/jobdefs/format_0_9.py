"""DeepWork 0.9.1's job.yml format: a ``steps`` list, ``workflows`` as a list of entries.

Checked with its own schema (``job.schema.json``) and semantic checks, in 0.9.1's order and
wording. ``runtime_view`` reads a stored 0.9.1 job as the steps a session of the later
generation walks, the way DeepWork's own migration recipe maps it, so a 0.14 client can run
every job of the catalog.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from workflows.files import file_kind
from workflows.jobdefs.base import (
    DICT_FORMAT,
    MAX_STEPS,
    MAX_WORKFLOWS,
    FileInput,
    JobDef,
    JobParseError,
    OutputSpec,
    ReviewSpec,
    RtArg,
    RtStep,
    RtWorkflow,
    StepDef,
    StepInput,
    UserParameterInput,
    WorkflowDef,
)

logger = logging.getLogger(__name__)

SCHEMA_PATH = Path(__file__).with_name("job.schema.json")
FORMAT = "0.9.1"


def is_format(data: Mapping[str, Any]) -> bool:
    """Every document no later format claims, an empty file included, keeps the 0.9.1 rules
    this server always applied."""
    return True


def has_own_keys(data: Mapping[str, Any]) -> bool:
    """Whether a document carries a key only this format has (``version``, a ``steps`` list,
    the common job info): one written for it, whatever else is wrong with it."""
    return (
        "version" in data
        or isinstance(data.get("steps"), list)
        or "common_job_info_provided_to_all_steps_at_runtime" in data
    )


def is_stored(definition: Mapping[str, Any]) -> bool:
    """Every stored job no later format claims."""
    return True


@functools.cache
def _validator() -> Any:
    # Built once per process: syncing ~200 jobs would otherwise re-read and re-check the schema
    # 200 times. A concurrent first call may build it twice, which is harmless.
    # Imported here: jsonschema is only needed when a job.yml changed, not on every start-up.
    from workflows import json_schemas

    return json_schemas.validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def _check_counts(data: Mapping[str, Any]) -> None:
    # Before the schema: validating and storing are linear in these, and a job of 50,000 steps
    # is a mistake or an attack, not a workflow.
    for key, limit in (("steps", MAX_STEPS), ("workflows", MAX_WORKFLOWS)):
        items = data.get(key)
        if isinstance(items, list) and len(items) > limit:
            raise JobParseError(
                f"Job definition validation failed: Validation error at {key}: "
                f"{len(items)} {key} given; a job may define at most {limit}"
            )


def _validate_schema(data: Mapping[str, Any]) -> None:
    from workflows import json_schemas

    error = json_schemas.best_error(_validator(), data)
    if error is None:
        return
    # `path`, not `absolute_path`, as 0.9.1 did: when best_match descends into a oneOf the
    # chosen error's path is relative to that oneOf, so e.g. an empty concurrent group in a
    # workflow is reported "at root". Clients see that text, so the quirk is kept.
    loc = " -> ".join(str(part) for part in error.path) if error.path else "root"
    raise JobParseError(
        f"Job definition validation failed: Validation error at {loc}: {error.message}"
    )


# --- building the model (input is schema-valid, so keys and types can be trusted) -------------


def _build_job(data: Mapping[str, Any], job_dir: Path) -> JobDef:
    return JobDef(
        name=data["name"],
        version=data["version"],
        summary=data["summary"],
        common_info=data["common_job_info_provided_to_all_steps_at_runtime"],
        steps=tuple(_build_step(s) for s in data["steps"]),
        workflows=tuple(_build_workflow(w) for w in data.get("workflows", ())),
        job_dir=str(job_dir),
    )


def _build_step(data: Mapping[str, Any]) -> StepDef:
    hooks: dict[str, list[dict[str, str]]] = {
        event: [dict(action) for action in actions]
        for event, actions in data.get("hooks", {}).items()
    }
    if data.get("stop_hooks"):
        hooks.setdefault("after_agent", []).extend(dict(a) for a in data["stop_hooks"])
    return StepDef(
        id=data["id"],
        name=data["name"],
        description=data["description"],
        instructions_file=data["instructions_file"],
        inputs=tuple(_build_input(i) for i in data.get("inputs", ())),
        # YAML may hand back non-string keys (`1:`, `yes:`); finished_step can only ever name
        # outputs with strings, so normalise here rather than carry unmatchable names around.
        outputs=tuple(
            OutputSpec(
                name=str(name),
                type=spec["type"],
                description=spec["description"],
                required=spec["required"],
            )
            for name, spec in data["outputs"].items()
        ),
        reviews=tuple(
            ReviewSpec(
                run_each=r["run_each"],
                quality_criteria={str(k): v for k, v in r["quality_criteria"].items()},
                additional_review_guidance=r.get("additional_review_guidance"),
            )
            for r in data["reviews"]
        ),
        dependencies=tuple(data.get("dependencies", ())),
        hooks={event: tuple(actions) for event, actions in hooks.items()},
        exposed=data.get("exposed", False),
        hidden=data.get("hidden", False),
        agent=data.get("agent"),
    )


def _build_input(data: Mapping[str, Any]) -> StepInput:
    # The schema's oneOf guarantees exactly one variant's keys are present.
    if "file" in data:
        return FileInput(file=data["file"], from_step=data["from_step"])
    return UserParameterInput(name=data["name"], description=data["description"])


def _build_workflow(data: Mapping[str, Any]) -> WorkflowDef:
    raw_entries = data["steps"]
    return WorkflowDef(
        name=data["name"],
        summary=data["summary"],
        entries=tuple((e,) if isinstance(e, str) else tuple(e) for e in raw_entries),
        concurrent=tuple(not isinstance(e, str) for e in raw_entries),
    )


# --- semantic checks: first failure wins, in 0.9.1's order ----------------------------------


def _check_dependencies(steps: tuple[StepDef, ...]) -> None:
    known = {s.id for s in steps}
    # Every missing reference is reported before any cycle, whatever the step order.
    for step in steps:
        for dep in step.dependencies:
            if dep not in known:
                raise JobParseError(f"Step '{step.id}' depends on non-existent step '{dep}'")

    graph: dict[str, tuple[str, ...]] = {}
    for step in steps:
        graph.setdefault(step.id, step.dependencies)
    # 0.9.1 names the step its DFS started from, not a member of the cycle, so a step that
    # merely leads into a cycle can be the one reported. Iterative to survive long chains.
    done: set[str] = set()
    for step in steps:
        if step.id not in done and _reaches_cycle(step.id, graph, done):
            raise JobParseError(f"Circular dependency detected involving step '{step.id}'")


def _reaches_cycle(root: str, graph: Mapping[str, Iterable[str]], done: set[str]) -> bool:
    on_path = {root}
    stack = [(root, iter(graph[root]))]
    while stack:
        node, deps = stack[-1]
        dep = next(deps, None)
        if dep is None:
            stack.pop()
            on_path.discard(node)
            done.add(node)
        elif dep in on_path:
            return True
        elif dep not in done:
            on_path.add(dep)
            stack.append((dep, iter(graph[dep])))
    return False


def _check_file_inputs(steps: tuple[StepDef, ...]) -> None:
    known = {s.id for s in steps}
    for step in steps:
        for inp in step.inputs:
            if not isinstance(inp, FileInput):
                continue
            if inp.from_step not in known:
                raise JobParseError(
                    f"Step '{step.id}' references non-existent step '{inp.from_step}' in file input"
                )
            if inp.from_step not in step.dependencies:
                raise JobParseError(
                    f"Step '{step.id}' has file input from '{inp.from_step}' "
                    f"but '{inp.from_step}' is not in dependencies"
                )


def _check_reviews(steps: tuple[StepDef, ...]) -> None:
    for step in steps:
        names = {o.name for o in step.outputs}
        for review in step.reviews:
            if review.run_each == "step" or review.run_each in names:
                continue
            # Output names are listed bare (unquoted), unlike 'step'; that is the 0.9.1 text.
            valid = ", ".join(sorted(names)) or "(no outputs)"
            raise JobParseError(
                f"Step '{step.id}' has review with run_each='{review.run_each}' "
                f"but no output with that name. Valid values: 'step', {valid}"
            )


def _check_workflows(job: JobDef) -> None:
    known = {s.id for s in job.steps}
    seen_names: set[str] = set()
    for workflow in job.workflows:
        if workflow.name in seen_names:
            raise JobParseError(f"Duplicate workflow name: '{workflow.name}'")
        seen_names.add(workflow.name)
        flat = workflow.steps
        # Within one workflow all unknown ids are reported before any repeat, so
        # `[a, a, ghost]` complains about `ghost`.
        for step_id in flat:
            if step_id not in known:
                raise JobParseError(
                    f"Workflow '{workflow.name}' references non-existent step '{step_id}'"
                )
        seen_steps: set[str] = set()
        for step_id in flat:
            if step_id in seen_steps:
                raise JobParseError(
                    f"Workflow '{workflow.name}' contains duplicate step '{step_id}'"
                )
            seen_steps.add(step_id)


def _warn_orphans(job: JobDef) -> None:
    # Not an error in 0.9.1, but such steps can never be started through MCP, which authors
    # rarely intend.
    in_workflows = {step_id for w in job.workflows for step_id in w.steps}
    orphans = [s.id for s in job.steps if s.id not in in_workflows]
    if orphans:
        # A few names say enough; a job of thousands of steps must not write a huge log line.
        shown = ", ".join(orphans[:20]) + (
            f" and {len(orphans) - 20} more" if len(orphans) > 20 else ""
        )
        logger.warning(
            "Job '%s' has steps in no workflow (unreachable through MCP): %s", job.name, shown
        )


# --- the files a job names beside its job.yml -------------------------------------------------


class InstructionsFilesMissing(JobParseError):
    """Steps whose instructions file is not a regular file in the job folder. ``awaited`` are
    the paths where a file would put that right without any edit of job.yml."""

    def __init__(self, message: str, *, awaited: tuple[str, ...]) -> None:
        super().__init__(message)
        self.awaited = awaited


def instructions_path(job_dir: Path, instructions_file: str) -> Path | None:
    """Where a step's ``instructions_file`` is (links followed), or None when that is outside
    ``job_dir``."""
    root = job_dir.resolve()
    path = (root / instructions_file).resolve()
    return path if path.is_relative_to(root) else None


def check_files(job: JobDef) -> None:
    """Every step's instructions file is a regular file inside the job folder.

    Checked when the job is loaded, so a misspelt name is a load error that ``get_workflows``
    reports, not a surprise at the hand-in before that step. Every such step is named at once.
    Only looked at (one ``stat`` a step), never read: the step reads it when it begins.
    """
    job_dir = Path(job.job_dir)
    problems: list[str] = []
    awaited: list[str] = []
    seen: set[str] = set()
    for step in job.steps:
        if step.id in seen:
            continue  # only the first step of an id is ever run (0.9.1's rule)
        seen.add(step.id)
        named = f"Step '{step.id}' has instructions_file '{step.instructions_file}', which"
        path = instructions_path(job_dir, step.instructions_file)
        if path is None:
            problems.append(f"{named} is outside the job folder")
            continue
        try:
            mode = os.stat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            problems.append(f"{named} does not exist in the job folder")
            awaited.append(str(path))
            continue
        except OSError as exc:
            problems.append(f"{named} cannot be looked at: {exc.strerror or exc}")
            continue
        if not stat.S_ISREG(mode):
            problems.append(f"{named} is {file_kind(mode)}, not a file")
            awaited.append(str(path))
    if problems:
        raise InstructionsFilesMissing("; ".join(problems), awaited=tuple(awaited))


def build_job(data: Mapping[str, Any], *, job_dir: Path) -> JobDef:
    """A schema- and semantics-checked 0.9.1 document as the catalog's ``JobDef``."""
    _check_counts(data)
    _validate_schema(data)
    job = _build_job(data, job_dir)
    _check_dependencies(job.steps)
    _check_file_inputs(job.steps)
    _check_reviews(job.steps)
    _check_workflows(job)
    _warn_orphans(job)
    return job


# --- JSON round trip for the database column -------------------------------------------------


def job_to_dict(job: JobDef) -> dict[str, Any]:
    """A JSON-safe dict holding everything in ``job`` (the tests rebuild an equal JobDef).

    Anything whose order matters is stored as a list, never as an object: PostgreSQL ``jsonb``
    does not keep object key order, and output order drives ``step_expected_outputs`` while
    criterion order drives the review prompt.
    """
    return {
        "format": DICT_FORMAT,
        "name": job.name,
        "version": job.version,
        "summary": job.summary,
        "common_info": job.common_info,
        "job_dir": job.job_dir,
        "steps": [_step_to_dict(s) for s in job.steps],
        "workflows": [
            {
                "name": w.name,
                "summary": w.summary,
                "entries": [list(e) for e in w.entries],
                "concurrent": list(w.concurrent),
            }
            for w in job.workflows
        ],
    }


def _step_to_dict(step: StepDef) -> dict[str, Any]:
    return {
        "id": step.id,
        "name": step.name,
        "description": step.description,
        "instructions_file": step.instructions_file,
        "inputs": [
            {"file": i.file, "from_step": i.from_step}
            if isinstance(i, FileInput)
            else {"name": i.name, "description": i.description}
            for i in step.inputs
        ],
        "outputs": [
            {"name": o.name, "type": o.type, "description": o.description, "required": o.required}
            for o in step.outputs
        ],
        "reviews": [
            {
                "run_each": r.run_each,
                "quality_criteria": [[k, v] for k, v in r.quality_criteria.items()],
                "additional_review_guidance": r.additional_review_guidance,
            }
            for r in step.reviews
        ],
        "dependencies": list(step.dependencies),
        # Event order and the order inside each list are both significant (hooks fire in order).
        "hooks": [[event, [dict(a) for a in actions]] for event, actions in step.hooks.items()],
        "exposed": step.exposed,
        "hidden": step.hidden,
        "agent": step.agent,
    }


# --- the runtime view ------------------------------------------------------------------------


def _criteria_text(criteria: list[list[str]], guidance: str | None) -> str:
    lines = [f"- **{name}**: {text}" for name, text in criteria]
    if guidance:
        lines += ["", guidance]
    return "\n".join(lines)


def runtime_view(definition: Mapping[str, Any], workflow_name: str) -> RtWorkflow:
    """A 0.9.1 workflow as 0.14 steps, mapped as DeepWork's repair recipe maps it:
    ``file``/``files`` outputs become ``file_path``; user-parameter inputs become ``string``
    inputs; ``run_each: step`` criteria become process requirements; per-output criteria
    become that output's review (``file`` together, ``files`` one by one). A concurrent entry
    runs as consecutive steps."""
    steps = {s["id"]: s for s in reversed(definition["steps"])}
    wf = next(w for w in definition["workflows"] if w["name"] == workflow_name)
    rt_steps = []
    for step_id in (sid for entry in wf["entries"] for sid in entry):
        step = steps[step_id]
        out_types = {o["name"]: o["type"] for o in step["outputs"]}
        out_reviews: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
        requirements: list[tuple[str, str]] = []
        for review in step["reviews"]:
            if review["run_each"] == "step":
                requirements += [(name, text) for name, text in review["quality_criteria"]]
            elif review["run_each"] in out_types:
                out_reviews.setdefault(review["run_each"], []).append(
                    (
                        "" if not out_reviews.get(review["run_each"]) else "_arg",
                        {
                            "strategy": "individual"
                            if out_types[review["run_each"]] == "files"
                            else "matches_together",
                            "instructions": _criteria_text(
                                review["quality_criteria"],
                                review.get("additional_review_guidance"),
                            ),
                        },
                    )
                )
        inputs = tuple(
            RtArg(name=i["name"], type="string", description=i["description"], required=True)
            if "name" in i
            else RtArg(
                name=i["file"],
                type="file_path",
                description=f"Output '{i['file']}' of step '{i['from_step']}'",
                required=True,
            )
            for i in step["inputs"]
        )
        rt_steps.append(
            RtStep(
                key=step_id,
                name=step_id,
                instructions=None,
                instructions_file=step["instructions_file"],
                sub_workflow=None,
                inputs=inputs,
                outputs=tuple(
                    RtArg(
                        name=o["name"],
                        type="file_path",
                        description=o["description"],
                        required=o["required"],
                        reviews=tuple(out_reviews.get(o["name"], ())),
                    )
                    for o in step["outputs"]
                ),
                process_requirements=tuple(requirements),
            )
        )
    return RtWorkflow(
        job_name=definition["name"],
        name=wf["name"],
        summary=wf["summary"],
        agent=None,
        common_info=definition.get("common_info") or "",
        post_workflow_instructions=None,
        steps=tuple(rt_steps),
    )
