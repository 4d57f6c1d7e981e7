"""What every job.yml format shares: the catalog's job types, the limits, reading the YAML
(through the server's one bounded loader, ``workflows.yaml_bounded``) and the errors whose
texts reach agents.

Pure Python on purpose: job discovery, the MCP bridge and the tests all parse jobs, and none of
them should need Django configured to do it. Every ``JobParseError`` text reaches agents
verbatim (``get_workflows.errors[].error``, ``start_workflow``), so each format keeps its
release's wording and the order in which its checks run.

A job.yml comes from anyone with commit access, so parsing is bounded before anything else
runs: the file's size, the nesting depth and the number of nodes and characters *after* alias
expansion (``&a``/``*a`` can make a 1.5 KB file stand for gigabytes), then the number of steps
and workflows. Code after the YAML loader may recurse (jsonschema does) and may copy or print
the data (error messages do), so those bounds are what keep one file from exhausting the
stack or the memory. Every error text is cut to ``MAX_ERROR_CHARS``, keeping its location.

``RtWorkflow`` is the runtime view a session walks, whatever format its job was written in;
each format module says how its stored form reads as one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from workflows import yaml_bounded

# Bumped whenever the shape produced by job_to_dict changes, so rows stored by an older build
# are re-parsed from job.yml instead of being misread.
DICT_FORMAT = 1

# The limits below are far above any real job (the standard job is 12 KB, 8 steps, depth 7,
# under 1,000 nodes) and low enough that a refused file costs milliseconds. The YAML bounds
# are the shared loader's defaults (``workflows.yaml_bounded``), which every YAML read uses.
MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = yaml_bounded.DEFAULT_LIMITS.depth
MAX_NODES = yaml_bounded.DEFAULT_LIMITS.nodes
MAX_EXPANDED_CHARS = yaml_bounded.DEFAULT_LIMITS.chars
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


def file_named(yml_path: Path | None) -> str:
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
    # its whole normalised definition (``jobdefs.format_0_14``), which its rows do not hold.
    format: str = "0.9.1"
    format_data: Mapping[str, Any] | None = None

    def step(self, step_id: str) -> StepDef | None:
        # First match wins, as in 0.9.1; duplicate step ids are not rejected there either.
        return next((s for s in self.steps if s.id == step_id), None)

    def workflow(self, name: str) -> WorkflowDef | None:
        return next((w for w in self.workflows if w.name == name), None)


def too_large_error(yml_path: Path | None) -> JobParseError:
    """The load error of a job.yml over ``MAX_FILE_BYTES``: whoever reads the file reads at
    most one byte more, and refuses it with this."""
    return JobParseError(
        f"Failed to load job.yml: {file_named(yml_path)} is larger than {MAX_FILE_BYTES} bytes, "
        "the most a job file may be"
    )


def load_yaml(text: str, yml_path: Path | None) -> dict[str, Any]:
    # A file's path names its marks; text that was sent is "<unicode string>" (yaml_bounded).
    try:
        data = yaml_bounded.load(text, name=None if yml_path is None else str(yml_path))
    except yaml.YAMLError as exc:
        raise JobYamlError(
            f"Failed to load job.yml: Failed to parse YAML file {file_named(yml_path)}: {exc}",
            detail=str(exc),
        ) from exc
    except (ValueError, TypeError, OverflowError) as exc:
        # PyYAML's constructors raise these, not YAMLError, for scalars that look typed but
        # are not (`2001-13-45`, `!!float x`); they used to escape past the catalog.
        detail = f"{type(exc).__name__}: {exc}"
        raise JobYamlError(
            f"Failed to load job.yml: Failed to parse YAML file {file_named(yml_path)}: {detail}",
            detail=detail,
        ) from exc
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


# --- the runtime view every format reads as ----------------------------------------------


@dataclass(frozen=True)
class RtArg:
    """A step input or output as a session sees it (typed, as DeepWork 0.14 declares them)."""

    name: str
    type: str  # "file_path" | "string"
    description: str
    required: bool
    json_schema: Mapping[str, Any] | None = None
    # Review blocks in the order 0.14 applies them: the output's own, then the argument's.
    reviews: tuple[tuple[str, Mapping[str, Any]], ...] = ()


@dataclass(frozen=True)
class RtStep:
    key: str  # the Step row's step_id
    name: str  # the step_id on the 0.14 wire
    instructions: str | None
    instructions_file: str | None
    sub_workflow: tuple[str, str | None] | None
    inputs: tuple[RtArg, ...]
    outputs: tuple[RtArg, ...]
    process_requirements: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RtWorkflow:
    job_name: str
    name: str
    summary: str
    agent: str | None
    common_info: str
    post_workflow_instructions: str | None
    steps: tuple[RtStep, ...] = field(default_factory=tuple)

    def index_of(self, step_name: str) -> int | None:
        return next((i for i, s in enumerate(self.steps) if s.name == step_name), None)

    # A session's entries: one step each, so the engine walks a runtime workflow as it walks
    # the entry lists of a 0.9 one.
    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, index: int) -> RtStep:
        return self.steps[index]
