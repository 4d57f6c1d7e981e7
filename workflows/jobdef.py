"""Parse and validate DeepWork 0.9.1 ``job.yml`` files.

Pure Python on purpose: job discovery, the MCP bridge and the tests all parse jobs, and none of
them should need Django configured to do it. Every ``JobParseError`` text below reaches agents
verbatim (``get_workflows.errors[].error``, ``start_workflow``), so the wording and the order in
which checks run follow 0.9.1 exactly; see §1.8-§1.9 of the compatibility digest.
"""

from __future__ import annotations

import functools
import io
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

logger = logging.getLogger(__name__)

SCHEMA_PATH = Path(__file__).with_name("job.schema.json")

# Bumped whenever the shape produced by job_to_dict changes, so rows stored by an older build
# are re-parsed from job.yml instead of being misread.
DICT_FORMAT = 1


class JobParseError(Exception):
    """A job directory or job.yml that cannot be used; str() is the client-facing text."""


@dataclass(frozen=True)
class OutputSpec:
    name: str
    type: str
    description: str
    required: bool


@dataclass(frozen=True)
class ReviewSpec:
    run_each: str
    quality_criteria: dict[str, str]
    additional_review_guidance: str | None = None


@dataclass(frozen=True)
class UserParameterInput:
    name: str
    description: str


@dataclass(frozen=True)
class FileInput:
    file: str
    from_step: str


StepInput = UserParameterInput | FileInput


@dataclass(frozen=True)
class StepDef:
    id: str
    name: str
    description: str
    instructions_file: str
    inputs: tuple[StepInput, ...] = ()
    outputs: tuple[OutputSpec, ...] = ()
    reviews: tuple[ReviewSpec, ...] = ()
    dependencies: tuple[str, ...] = ()
    hooks: dict[str, tuple[dict[str, str], ...]] = field(default_factory=dict)
    exposed: bool = False
    # 0.9.1 accepts `hidden` in the schema but drops it; we keep it so nothing is lost, and
    # nothing at runtime reads it.
    hidden: bool = False
    agent: str | None = None


@dataclass(frozen=True)
class WorkflowDef:
    name: str
    summary: str
    entries: tuple[tuple[str, ...], ...]
    concurrent: tuple[bool, ...]

    @property
    def steps(self) -> tuple[str, ...]:
        return tuple(step_id for entry in self.entries for step_id in entry)


@dataclass(frozen=True)
class JobDef:
    name: str
    version: str
    summary: str
    common_info: str
    steps: tuple[StepDef, ...]
    workflows: tuple[WorkflowDef, ...]
    job_dir: str

    def step(self, step_id: str) -> StepDef | None:
        # First match wins, as in 0.9.1; duplicate step ids are not rejected there either.
        return next((s for s in self.steps if s.id == step_id), None)

    def workflow(self, name: str) -> WorkflowDef | None:
        return next((w for w in self.workflows if w.name == name), None)


@functools.cache
def _validator():
    # Built once per process: syncing ~200 jobs would otherwise re-read and re-check the schema
    # 200 times. A concurrent first call may build it twice, which is harmless.
    # Imported here: jsonschema is only needed when a job.yml changed, not on every start-up.
    from jsonschema import Draft7Validator

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft7Validator.check_schema(schema)
    return Draft7Validator(schema)


def parse_job_dir(job_dir: Path) -> JobDef:
    """Parse ``<job_dir>/job.yml``, raising JobParseError with 0.9.1's wording."""
    job_dir = Path(job_dir)
    if not job_dir.exists():
        raise JobParseError(f"Job directory does not exist: {job_dir}")
    if not job_dir.is_dir():
        raise JobParseError(f"Job path is not a directory: {job_dir}")
    yml_path = job_dir / "job.yml"
    if not yml_path.exists():
        raise JobParseError(f"job.yml not found in {job_dir}")
    try:
        # Text mode (universal newlines) matches how 0.9.1 fed the file to PyYAML, so line and
        # column numbers in YAML errors come out the same.
        text = yml_path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        # 0.9.1 let this escape and took get_workflows down with it; one bad file must only
        # produce one error entry.
        raise JobParseError(
            f"Failed to load job.yml: {yml_path} is not valid UTF-8: {exc}"
        ) from exc
    return parse_job_text(text, job_dir=job_dir, yml_path=yml_path)


def parse_job_text(text: str, *, job_dir: Path, yml_path: Path) -> JobDef:
    """Parse job.yml content already read from ``yml_path``; ``job_dir`` is recorded as given."""
    data = _load_yaml(text, yml_path)
    _validate_schema(data)
    job = _build_job(data, job_dir)
    _check_dependencies(job.steps)
    _check_file_inputs(job.steps)
    _check_reviews(job.steps)
    _check_workflows(job)
    _warn_orphans(job)
    return job


def _load_yaml(text: str, yml_path: Path) -> dict[str, Any]:
    # PyYAML names the stream in its error marks ('in "<name>", line N'); a named stream keeps
    # the file path there instead of "<unicode string>", as when 0.9.1 passed the open file.
    stream = io.StringIO(text)
    stream.name = str(yml_path)
    try:
        data = yaml.safe_load(stream)
    except yaml.YAMLError as exc:
        raise JobParseError(
            f"Failed to load job.yml: Failed to parse YAML file {yml_path}: {exc}"
        ) from exc
    # An empty file (or a bare `null`) is treated as an empty mapping, so it fails the schema
    # with "'name' is a required property" rather than getting a message of its own.
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise JobParseError(
            "Failed to load job.yml: YAML file must contain a dictionary, "
            f"got {type(data).__name__}"
        )
    return data


def _validate_schema(data: dict[str, Any]) -> None:
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(data))
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
        logger.warning(
            "Job '%s' has steps in no workflow (unreachable through MCP): %s",
            job.name,
            ", ".join(orphans),
        )


# --- JSON round trip for the database column -------------------------------------------------


def job_to_dict(job: JobDef) -> dict[str, Any]:
    """A JSON-safe dict that ``job_from_dict`` turns back into an equal JobDef.

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


def job_from_dict(data: Mapping[str, Any]) -> JobDef:
    """Rebuild a JobDef from ``job_to_dict`` output; ValueError if written by another format."""
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


def _step_from_dict(data: Mapping[str, Any]) -> StepDef:
    return StepDef(
        id=data["id"],
        name=data["name"],
        description=data["description"],
        instructions_file=data["instructions_file"],
        inputs=tuple(_build_input(i) for i in data["inputs"]),
        outputs=tuple(
            OutputSpec(
                name=o["name"],
                type=o["type"],
                description=o["description"],
                required=o["required"],
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
