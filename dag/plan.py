"""A multi-agent DAG workflow's definition: its steps, checked, with their levels.

Pure: no database. ``dag_check_size`` refuses a definition over the size limits
(``workflows.limits``) by counting, before anything else looks at it; ``dag_plan`` then turns
the step list an agent sends to ``define_workflow`` into a ``DagPlan`` or raises
``InvalidInput`` naming the first rule broken (the cycle itself for a cycle). Both are linear
in the definition's size. Roles and agent ids are not checked here: agents register later, so
an unknown one is a warning the service adds, never an error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workflows import limits
from workflows.errors import InvalidInput

# The key of the project's DAG workflows as a workflow-tools source.
DAG_SOURCE_KEY = "dag"
STEP_KEYS = frozenset(
    {
        "step_id",
        "description",
        "assigned_role",
        "assigned_agent_id",
        "depends_on",
        "tool_to_call",
        "tool_arguments",
    }
)


@dataclass(frozen=True)
class DagStep:
    step_id: str
    description: str
    assigned_role: str
    assigned_agent_id: str
    depends_on: tuple[str, ...]
    tool_to_call: str
    tool_arguments: dict[str, Any] | None
    # The longest chain of dependencies before this step: 0 for the steps that start first.
    level: int


@dataclass(frozen=True)
class DagPlan:
    """Steps in the order given, each with its level; a DAG, checked."""

    steps: tuple[DagStep, ...]

    def by_id(self) -> dict[str, DagStep]:
        return {step.step_id: step for step in self.steps}


_SURROGATE = re.compile(r"[\ud800-\udfff]")
MAX_JSON_DEPTH = 32


def _bad_text(value: str) -> str | None:
    if "\x00" in value:
        return "a NUL character"
    if _SURROGATE.search(value):
        return "a lone surrogate"
    return None


def json_clean(value: Any, where: str, depth: int = 0) -> None:
    """Refuse JSON the database cannot store: NUL characters and lone surrogates in any
    string or key, and nesting deeper than 32 levels."""
    if depth > MAX_JSON_DEPTH:
        raise InvalidInput(f"{where} is nested more than {MAX_JSON_DEPTH} levels deep")
    if isinstance(value, str):
        problem = _bad_text(value)
        if problem:
            raise InvalidInput(f"{where} contains {problem}; it must be valid Unicode text")
    elif isinstance(value, dict):
        for key, item in value.items():
            json_clean(str(key), f"{where} (a key)", depth + 1)
            json_clean(item, where, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            json_clean(item, where, depth + 1)


def _text(value: Any, where: str, *, limit: limits.TextLimit, required: bool = False) -> str:
    if value is None:
        if required:
            raise InvalidInput(f"{where} is required")
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"{where} must be a string, not {type(value).__name__}")
    value = value.strip()
    if required and not value:
        raise InvalidInput(f"{where} must not be empty")
    limit.check(where, value)
    return value


def dag_check_size(*, name: Any, description: Any, steps: Any) -> None:
    """Refuse a definition over the size limits, naming the limit and the size: counted in one
    pass, before its steps are checked one by one, its cycles looked for or anything stored."""
    if not isinstance(steps, list):
        return  # dag_plan says what is wrong with it
    if len(steps) > limits.DAG_MAX_STEPS:
        raise InvalidInput(
            f"steps holds {len(steps):,} steps; the limit is {limits.DAG_MAX_STEPS:,} per workflow"
        )
    edges = sum(
        len(step["depends_on"])
        for step in steps
        if isinstance(step, dict) and isinstance(step.get("depends_on"), list)
    )
    if edges > limits.DAG_MAX_EDGES:
        raise InvalidInput(
            f"The steps' depends_on lists hold {edges:,} dependencies together; the limit is "
            f"{limits.DAG_MAX_EDGES:,} per workflow"
        )
    for index, step in enumerate(steps):
        arguments = step.get("tool_arguments") if isinstance(step, dict) else None
        if arguments is not None:
            step_id = step.get("step_id")
            where = f"Step {step_id!r}" if isinstance(step_id, str) else f"steps[{index}]"
            limits.check_json_size(
                f"{where}: tool_arguments", arguments, limits.DAG_MAX_PAYLOAD_BYTES
            )
    limits.check_json_size(
        "The workflow definition (name, description and steps)",
        {"name": name, "description": description, "steps": steps},
        limits.DAG_MAX_DEFINITION_BYTES,
    )


def agent_lineage(agent_id: str) -> str:
    """The identity an agent id belongs to: a sub-agent ``<agent>/<name>`` acts for ``<agent>``
    (a token's sub-agents over ``/mcp``, an agent's helpers elsewhere)."""
    return agent_id.split("/", 1)[0]


def same_identity(one: str, other: str) -> bool:
    """Whether two agent ids are one identity: the same agent, or parent and sub-agent, or two
    sub-agents of one agent."""
    return agent_lineage(one) == agent_lineage(other)


def _find_cycle(deps: Mapping[str, Sequence[str]], order: Sequence[str]) -> list[str] | None:
    """A cycle as the list of its step ids, first repeated at the end; None for a DAG.

    Iterative depth-first search with three colours, visiting steps in the order given, so the
    cycle reported is the same for the same definition.
    """
    white, grey, black = 0, 1, 2
    colour = dict.fromkeys(order, white)
    for root in order:
        if colour[root] != white:
            continue
        path: list[str] = [root]
        iterators = [iter(deps[root])]
        colour[root] = grey
        while iterators:
            nxt = next(iterators[-1], None)
            if nxt is None:
                colour[path.pop()] = black
                iterators.pop()
                continue
            if colour[nxt] == grey:
                # The cycle runs from nxt's place on the path to the top, back to nxt. Edges point
                # from a step to what it depends on; say it in execution order instead.
                cycle = path[path.index(nxt) :]
                cycle.reverse()
                return [cycle[-1], *cycle]
            if colour[nxt] == white:
                colour[nxt] = grey
                path.append(nxt)
                iterators.append(iter(deps[nxt]))
    return None


def _levels(deps: Mapping[str, Sequence[str]], order: Sequence[str]) -> dict[str, int]:
    levels: dict[str, int] = {}
    for root in order:
        stack = [root]
        while stack:
            step_id = stack[-1]
            if step_id in levels:
                stack.pop()
                continue
            missing = [dep for dep in deps[step_id] if dep not in levels]
            if missing:
                stack.extend(missing)
                continue
            levels[step_id] = 1 + max((levels[dep] for dep in deps[step_id]), default=-1)
            stack.pop()
    return levels


def dag_plan(steps: Any) -> DagPlan:
    """The checked plan of ``steps`` (``define_workflow``'s step objects), or ``InvalidInput``."""
    if not isinstance(steps, list):
        raise InvalidInput(f"steps must be a list of step objects, not {type(steps).__name__}")
    if not steps:
        raise InvalidInput("steps must hold at least one step")
    parsed: list[dict[str, Any]] = []
    first_seen: dict[str, int] = {}
    for index, raw in enumerate(steps):
        where = f"steps[{index}]"
        if not isinstance(raw, dict):
            raise InvalidInput(f"{where} must be an object, not {type(raw).__name__}")
        unknown = sorted(set(raw) - STEP_KEYS)
        if unknown:
            raise InvalidInput(
                f"{where} has unknown field{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}; a step takes {', '.join(sorted(STEP_KEYS))}"
            )
        step_id = _text(
            raw.get("step_id"), f"{where}.step_id", limit=limits.DAG_NAME, required=True
        )
        if step_id in first_seen:
            raise InvalidInput(
                f"{where}.step_id {step_id!r} is already used by steps[{first_seen[step_id]}]; "
                "step ids must be unique within a workflow"
            )
        first_seen[step_id] = index
        depends_on = raw.get("depends_on")
        if depends_on is None:
            depends_on = []
        if not isinstance(depends_on, list) or not all(isinstance(d, str) for d in depends_on):
            raise InvalidInput(f"Step {step_id!r}: depends_on must be a list of step ids")
        arguments = raw.get("tool_arguments")
        if arguments is not None and not isinstance(arguments, dict):
            raise InvalidInput(
                f"Step {step_id!r}: tool_arguments must be an object, not "
                f"{type(arguments).__name__}"
            )
        json_clean(arguments, f"Step {step_id!r}: tool_arguments")
        for dep in depends_on:
            json_clean(dep, f"Step {step_id!r}: depends_on")
        parsed.append(
            {
                "step_id": step_id,
                "description": _text(
                    raw.get("description"),
                    f"Step {step_id!r}: description",
                    limit=limits.DAG_TEXT,
                    required=True,
                ),
                "assigned_role": _text(
                    raw.get("assigned_role"),
                    f"Step {step_id!r}: assigned_role",
                    limit=limits.ROLE,
                ),
                "assigned_agent_id": _text(
                    raw.get("assigned_agent_id"),
                    f"Step {step_id!r}: assigned_agent_id",
                    limit=limits.AGENT_ID,
                ),
                # A repeated dependency means the same thing once.
                "depends_on": tuple(dict.fromkeys(d.strip() for d in depends_on)),
                "tool_to_call": _text(
                    raw.get("tool_to_call"),
                    f"Step {step_id!r}: tool_to_call",
                    limit=limits.DAG_NAME,
                ),
                "tool_arguments": arguments,
            }
        )
    return _planned(parsed)


def dag_plan_stored(steps: list[dict[str, Any]]) -> DagPlan:
    """The plan of a definition ``dag_define`` stored: checked when it was defined (perhaps under
    older rules, which must not stop it running now), so only its shape is rebuilt. Descriptions
    and tool arguments are left out: the scheduler needs neither, and plans are kept in memory."""
    return _planned(
        [
            {
                "step_id": step["step_id"],
                "description": "",
                "assigned_role": step.get("assigned_role") or "",
                "assigned_agent_id": step.get("assigned_agent_id") or "",
                "depends_on": tuple(step.get("depends_on") or ()),
                "tool_to_call": step.get("tool_to_call") or "",
                "tool_arguments": None,
            }
            for step in steps
        ]
    )


def _planned(parsed: list[dict[str, Any]]) -> DagPlan:
    """Dependencies resolved, cycles refused and levels computed: each linear in steps plus
    edges (one dictionary lookup per edge; depth-first searches without recursion)."""
    order = [step["step_id"] for step in parsed]
    deps = {step["step_id"]: step["depends_on"] for step in parsed}
    for step in parsed:
        for dep in step["depends_on"]:
            if dep == step["step_id"]:
                raise InvalidInput(f"Step {dep!r} depends on itself")
            if dep not in deps:
                raise InvalidInput(
                    f"Step {step['step_id']!r} depends on {dep!r}, which is not a step of this "
                    "workflow"
                )
    cycle = _find_cycle(deps, order)
    if cycle is not None:
        raise InvalidInput(f"The steps' dependencies form a cycle: {' -> '.join(cycle)}")
    levels = _levels(deps, order)
    return DagPlan(tuple(DagStep(**step, level=levels[step["step_id"]]) for step in parsed))


def dag_name(value: Any) -> str:
    return _text(value, "name", limit=limits.DAG_NAME, required=True)


def dag_description(value: Any) -> str:
    return _text(value, "description", limit=limits.DAG_TEXT)


EXECUTION_TYPES = ("sync", "async")


def dag_execution_type(value: Any) -> str:
    """How the workflow's tool runs it: ``async`` unless ``sync`` is asked for."""
    if value is None:
        return "async"
    if value not in EXECUTION_TYPES:
        raise InvalidInput(f"execution_type must be 'sync' or 'async', not {value!r}")
    return str(value)
