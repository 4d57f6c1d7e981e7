"""Parse and validate DeepWork 0.9.1 ``job.yml`` files.

Pure Python on purpose: job discovery, the MCP bridge and the tests all parse jobs, and none of
them should need Django configured to do it. Every ``JobParseError`` text below reaches agents
verbatim (``get_workflows.errors[].error``, ``start_workflow``), so the wording and the order in
which checks run follow 0.9.1 exactly.

A job.yml comes from anyone with commit access, so parsing is bounded before anything else
runs: the file's size, the nesting depth and the number of nodes and characters *after* alias
expansion (``&a``/``*a`` can make a 1.5 KB file stand for gigabytes), then the number of steps
and workflows. Code after the YAML loader may recurse (jsonschema does) and may copy or print
the data (error messages do), so those bounds are what keep one file from exhausting the
stack or the memory. Every error text is cut to ``MAX_ERROR_CHARS``, keeping its location.

Why long, and temporary: the shared types, the bounded YAML loader, the first generation's
format and the dispatch between formats are still one module; they become the
``jobdefs`` package (base, parse, one module per format).
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
from yaml.composer import ComposerError
from yaml.events import AliasEvent
from yaml.nodes import Node, ScalarNode

logger = logging.getLogger(__name__)

SCHEMA_PATH = Path(__file__).with_name("job.schema.json")

# Bumped whenever the shape produced by job_to_dict changes, so rows stored by an older build
# are re-parsed from job.yml instead of being misread.
DICT_FORMAT = 1

# The limits below are far above any real job (the standard job is 12 KB, 8 steps, depth 7,
# under 1,000 nodes) and low enough that a refused file costs milliseconds.
MAX_FILE_BYTES = 1024 * 1024
# Levels of nested collections, counted through aliases. jsonschema recurses a few frames per
# level, so this keeps validation far from Python's recursion limit.
MAX_DEPTH = 32
# Nodes and scalar characters of the document as if every alias were written out in full.
MAX_NODES = 100_000
MAX_EXPANDED_CHARS = MAX_FILE_BYTES
MAX_STEPS = 5000
MAX_WORKFLOWS = 200
# An error text is stored once per broken job and sent with every get_workflows: a few KB.
MAX_ERROR_CHARS = 4000
_ERROR_TAIL_CHARS = 1000


def bounded_error(text: str) -> str:
    """``text`` cut to at most ``MAX_ERROR_CHARS``, keeping its start and its end.

    Error texts name the file and JSON path at the start and the YAML line/column at the end;
    what is cut is the middle, typically the repr of a huge value.
    """
    if len(text) <= MAX_ERROR_CHARS:
        return text
    head = MAX_ERROR_CHARS - _ERROR_TAIL_CHARS - 60
    cut = len(text) - head - _ERROR_TAIL_CHARS
    return f"{text[:head]} [... {cut} characters cut ...] {text[-_ERROR_TAIL_CHARS:]}"


# The whole error of a job.yml that holds no document, as DeepWork 0.14 words it.
EMPTY_JOB_FILE = "job.yml is empty"


class JobParseError(Exception):
    """A job directory or job.yml that cannot be used; str() is the client-facing text,
    bounded by ``MAX_ERROR_CHARS``."""

    def __init__(self, message: str) -> None:
        super().__init__(bounded_error(message))


class JobYamlError(JobParseError):
    """A job.yml that is not YAML a job can be read from; ``detail`` is what the YAML reader
    found, without the file it was read from."""

    def __init__(self, message: str, *, detail: str) -> None:
        super().__init__(message)
        self.detail = bounded_error(detail)


def _named(yml_path: Path | None) -> str:
    # A definition sent as text (``yml_path`` None) has no file to name: errors about it
    # must not name one of the server's, which the sender neither knows nor may learn.
    return str(yml_path) if yml_path is not None else "the job definition"


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
    # Which job.yml format the file was written in ("0.9.1" or "0.14"); a 0.14 job also keeps
    # its whole normalised definition (``workflows.jobdef014``), which its rows do not hold.
    format: str = "0.9.1"
    format_data: Mapping[str, Any] | None = None

    def step(self, step_id: str) -> StepDef | None:
        # First match wins, as in 0.9.1; duplicate step ids are not rejected there either.
        return next((s for s in self.steps if s.id == step_id), None)

    def workflow(self, name: str) -> WorkflowDef | None:
        return next((w for w in self.workflows if w.name == name), None)


@functools.cache
def _validator() -> Any:
    # Built once per process: syncing ~200 jobs would otherwise re-read and re-check the schema
    # 200 times. A concurrent first call may build it twice, which is harmless.
    # Imported here: jsonschema is only needed when a job.yml changed, not on every start-up.
    from workflows import json_schemas

    return json_schemas.validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def too_large_error(yml_path: Path | None) -> JobParseError:
    """The load error of a job.yml over ``MAX_FILE_BYTES``: whoever reads the file reads at
    most one byte more, and refuses it with this."""
    return JobParseError(
        f"Failed to load job.yml: {_named(yml_path)} is larger than {MAX_FILE_BYTES} bytes, "
        "the most a job file may be"
    )


def parse_job_bytes(raw: bytes, *, job_dir: Path, yml_path: Path | None) -> JobDef:
    """Parse the bytes of ``yml_path`` as read from disk: size, then UTF-8, then the text.

    ``yml_path`` None: the bytes were sent, not read from a file (a session job); errors then
    name no file, and YAML errors say ``in "<unicode string>"``, as DeepWork 0.14 does.
    """
    if len(raw) > MAX_FILE_BYTES:
        raise too_large_error(yml_path)
    try:
        # Universal newlines, as Path.read_text, so YAML error marks match 0.9.1's.
        text = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8").read()
    except UnicodeDecodeError as exc:
        # 0.9.1 let this escape and took get_workflows down with it.
        raise JobParseError(
            f"Failed to load job.yml: {_named(yml_path)} is not valid UTF-8: {exc}"
        ) from exc
    return parse_job_text(text, job_dir=job_dir, yml_path=yml_path)


def parse_job_text(text: str, *, job_dir: Path, yml_path: Path | None) -> JobDef:
    """Parse job.yml content already read from ``yml_path`` (None: sent as text, see
    ``parse_job_bytes``); ``job_dir`` is recorded as given."""
    # Characters never outnumber UTF-8 bytes, so this refuses only files over the byte limit.
    if len(text) > MAX_FILE_BYTES:
        raise too_large_error(yml_path)
    data = _load_yaml(text, yml_path)
    from workflows import jobdef014

    # Told apart before validation, so each format is checked by its own rules and texts.
    if jobdef014.is_014_format(data):
        return jobdef014.build_job(data, job_dir=job_dir)
    _check_counts(data)
    _validate_schema(data)
    job = _build_job(data, job_dir)
    _check_dependencies(job.steps)
    _check_file_inputs(job.steps)
    _check_reviews(job.steps)
    _check_workflows(job)
    _warn_orphans(job)
    return job


def _load_yaml(text: str, yml_path: Path | None) -> dict[str, Any]:
    # PyYAML names the stream in its error marks ('in "<name>", line N'); a named stream keeps
    # the file path there, as when 0.9.1 passed the open file. Text that was sent is given as
    # a string, which PyYAML calls "<unicode string>" and quotes the offending line of.
    stream: io.StringIO | str = text
    if yml_path is not None:
        stream = io.StringIO(text)
        stream.name = str(yml_path)
    loader = _BoundedLoader(stream)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        raise JobYamlError(
            f"Failed to load job.yml: Failed to parse YAML file {_named(yml_path)}: {exc}",
            detail=str(exc),
        ) from exc
    except (ValueError, TypeError, OverflowError) as exc:
        # PyYAML's constructors raise these, not YAMLError, for scalars that look typed but
        # are not (`2001-13-45`, `!!float x`); they used to escape past the catalog.
        detail = f"{type(exc).__name__}: {exc}"
        raise JobYamlError(
            f"Failed to load job.yml: Failed to parse YAML file {_named(yml_path)}: {detail}",
            detail=detail,
        ) from exc
    finally:
        loader.dispose()
    # An empty file (only comments, or a bare `null`) says so, rather than failing the schema
    # as a mapping that lacks every key (0.9.1 did that, by accident: it meant to say this).
    if data is None:
        raise JobParseError(EMPTY_JOB_FILE)
    if not isinstance(data, dict):
        raise JobParseError(
            "Failed to load job.yml: YAML file must contain a dictionary, "
            f"got {type(data).__name__}"
        )
    return data


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a document past ``MAX_DEPTH``, ``MAX_NODES`` or
    ``MAX_EXPANDED_CHARS`` while composing it, before any Python object is built.

    An alias costs what its anchored node cost, so these are the figures of the document with
    every alias written out. An alias inside the node it names (``&a [*a]``) has no finite
    size and is refused. Errors are ``ComposerError`` with the mark of the offending node.
    """

    def __init__(self, stream: io.StringIO | str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0
        self._chars = 0
        # Height (levels below and including it) of the node being composed at each depth.
        self._heights: list[int] = [0]
        # anchor -> (nodes, chars, height) of the finished anchored node.
        self._costs: dict[str, tuple[int, int, int]] = {}

    def compose_document(self) -> Node | None:
        self._costs = {}
        return super().compose_document()

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()
            if event.anchor in self.anchors and event.anchor not in self._costs:
                raise ComposerError(
                    None,
                    None,
                    f"found alias {event.anchor!r} inside the node it names",
                    event.start_mark,
                )
            node = super().compose_node(parent, index)
            nodes, chars, height = self._costs[event.anchor]
            self._charge(nodes, chars, event.start_mark)
            self._report_height(height, event.start_mark)
            return node
        event = self.peek_event()
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ComposerError(
                None, None, f"nesting deeper than {MAX_DEPTH} levels", event.start_mark
            )
        nodes_before, chars_before = self._nodes, self._chars
        self._charge(1, 0, event.start_mark)
        self._heights.append(0)
        node = super().compose_node(parent, index)
        if isinstance(node, ScalarNode):
            self._charge(0, len(node.value), event.start_mark)
        self._depth -= 1
        height = 1 + self._heights.pop()
        self._report_height(height, event.start_mark)
        if event.anchor is not None:
            self._costs[event.anchor] = (
                self._nodes - nodes_before,
                self._chars - chars_before,
                height,
            )
        return node

    def _charge(self, nodes: int, chars: int, mark: yaml.Mark) -> None:
        self._nodes += nodes
        self._chars += chars
        if self._nodes > MAX_NODES:
            raise ComposerError(
                None,
                None,
                f"more than {MAX_NODES} nodes with aliases expanded",
                mark,
            )
        if self._chars > MAX_EXPANDED_CHARS:
            raise ComposerError(
                None,
                None,
                f"more than {MAX_EXPANDED_CHARS} characters of values with aliases expanded",
                mark,
            )

    def _report_height(self, height: int, mark: yaml.Mark) -> None:
        # The parent sits at self._depth; through an alias a short path can reach a deep node.
        if self._depth + height > MAX_DEPTH:
            raise ComposerError(None, None, f"nesting deeper than {MAX_DEPTH} levels", mark)
        self._heights[-1] = max(self._heights[-1], height)


def _check_counts(data: dict[str, Any]) -> None:
    # Before the schema: validating and storing are linear in these, and a job of 50,000 steps
    # is a mistake or an attack, not a workflow.
    for key, limit in (("steps", MAX_STEPS), ("workflows", MAX_WORKFLOWS)):
        items = data.get(key)
        if isinstance(items, list) and len(items) > limit:
            raise JobParseError(
                f"Job definition validation failed: Validation error at {key}: "
                f"{len(items)} {key} given; a job may define at most {limit}"
            )


def _validate_schema(data: dict[str, Any]) -> None:
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


# --- JSON round trip for the database column -------------------------------------------------


def job_to_dict(job: JobDef) -> dict[str, Any]:
    """A JSON-safe dict holding everything in ``job`` (the tests rebuild an equal JobDef).

    Anything whose order matters is stored as a list, never as an object: PostgreSQL ``jsonb``
    does not keep object key order, and output order drives ``step_expected_outputs`` while
    criterion order drives the review prompt.
    """
    if job.format == "0.14":
        from workflows import jobdef014

        return jobdef014.job_to_dict(job)
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
