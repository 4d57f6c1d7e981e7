"""Writes for the workflow tools: choosing each workflow's tool name once.

A tool name is ``workflow_<name>`` cut to the safe alphabet (``^[a-zA-Z0-9_-]{1,64}$``). When
that is taken (by a static tool or another workflow), the workflow's id is added; if even that
is taken, a short hash of its key. The choice is stored (``WorkflowToolName``) and never made
again for that workflow, so names survive refreshes, renames at the source and restarts.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from django.db import transaction

from workflow_tools.models import WorkflowToolName
from workflow_tools.selectors import workflow_tool_names
from workflow_tools.sources import PublishedWorkflow
from workflows.models import Project

logger = logging.getLogger("deepwork.workflow_tools")

MAX_TOOL_NAME = 64
TOOL_PREFIX = "workflow_"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def _slug(text: str) -> str:
    return re.sub(r"_{2,}", "_", _UNSAFE.sub("_", text)).strip("_-").lower()


def _fit(base: str, suffix: str = "") -> str:
    """``base`` + ``suffix`` within the name limit, cutting ``base``."""
    room = MAX_TOOL_NAME - len(suffix)
    return base[:room].rstrip("_-") + suffix


def tool_name_candidates(*, key: str, name: str, workflow_id: str) -> list[str]:
    """The names a workflow may get, in order of preference."""
    base = TOOL_PREFIX + (_slug(name) or _slug(workflow_id) or "unnamed")
    by_id = _slug(workflow_id)
    digest = hashlib.sha256(key.encode()).hexdigest()[:8]
    candidates = [_fit(base)]
    if by_id and len(by_id) <= 24:
        candidates.append(_fit(base, f"_{by_id}"))
    candidates.append(_fit(base, f"_{digest}"))
    return candidates


def workflow_tool_names_assign(
    *,
    project: Project,
    wanted: Sequence[tuple[str, PublishedWorkflow]],
    reserved: Collection[str],
) -> dict[str, str]:
    """The tool name of each ``(key, workflow)``, choosing and storing those not chosen yet;
    returns every stored key -> name of the project.

    ``reserved`` are the static tools' names, which no workflow may take. Choosing runs under
    a lock on the project row, so two servers choosing at once agree.
    """
    with transaction.atomic():
        Project.objects.select_for_update().filter(pk=project.pk).exists()
        names = workflow_tool_names(project=project)
        taken = set(names.values()) | set(reserved)
        new: list[WorkflowToolName] = []
        for key, workflow in wanted:
            if key in names:
                continue
            candidates = tool_name_candidates(key=key, name=workflow.name, workflow_id=workflow.id)
            free = [c for c in candidates if c not in taken]
            if free:
                chosen = free[0]
            else:
                # Every candidate is taken only if another key hashed the same: count on.
                counter = 2
                while (chosen := _fit(candidates[-1], f"_{counter}")) in taken:
                    counter += 1
            if chosen != candidates[0]:
                logger.info("Workflow %s is served as %s: %s was taken", key, chosen, candidates[0])
            names[key] = chosen
            taken.add(chosen)
            new.append(WorkflowToolName(project=project, workflow_key=key, tool_name=chosen))
        WorkflowToolName.objects.bulk_create(new)
    return names


# --- DeepWork job workflows as a source --------------------------------------------------------


def goal_with_inputs(goal: str, inputs: Mapping[str, Any]) -> str:
    """The session's goal: the caller's goal, then the workflow's inputs, one per line."""
    if not inputs:
        return goal
    lines = "\n".join(f"- {name}: {value}" for name, value in inputs.items())
    return f"{goal}\n\nInputs:\n{lines}"
