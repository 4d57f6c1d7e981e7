"""Review tasks the agent runs itself (DeepWork 0.14's quality gate): one per review, each with
its instructions file.

No reviewer runs inside the server. After the ``json_schema`` checks of the outputs
(``workflows.generations.v0_14.schema_feedback``), each review block of a submitted output (the
output's own, then its argument's), and the step's ``process_requirements`` when a
``work_summary`` came with file outputs, become review tasks; so do the project's
``.deepreview`` and DeepSchema rules over the submitted output files git reports as changed
(0.14's own order), after the step's own. Each task's instructions are
written under ``.deepwork/tmp/review_instructions/<review_id>.md``; a task whose id already has
a ``.passed`` marker (``mark_review_as_passed``) is skipped, and ids are 0.14's (rule, files and
a hash of their content only), so editing a reviewed file asks for its review again, while a
pass holds across workflows and for ``get_review_instructions``. No task left: the gate passes.

Everything here reads and writes files only, so it runs outside any transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reviews.deepreview.agent_tasks import (
    REVIEWER,
    AgentTask,
    as_agent_task,
    format_tasks,
    load_rules_with_schemas,
)
from reviews.deepreview.changes import GitError, get_changed_files
from reviews.deepreview.config import ReviewRule, ReviewTask
from reviews.deepreview.instructions import (
    INSTRUCTIONS_DIR,
    ReviewIdFn,
    compute_review_id,
    compute_review_task_id,
    is_passed,
    task_is_passed,
    write_instruction_files,
)
from reviews.deepreview.instructions014 import prepare_render_review_task, render_review_task
from reviews.deepreview.matching import build_tasks
from reviews.deepreview.precompute import NO_COMMANDS, CommandPolicy
from reviews.deepreview.tools import confine_files
from workflows.files import project_write_text
from workflows.generations.base import Value
from workflows.jobdefs.base import RtArg
from workflows.services.sessions import StepCheckpoint

GATE_HEAD = "Quality reviews are required before this step can advance."
HOW_TO_RUN = """\
## How to Run Reviews

For each review task listed above, launch it as a parallel Agent. The task's prompt field \
points to an instruction file — read it and follow the review instructions.

## After Reviews

For any failing reviews, if you believe the issue is invalid, then you can call \
`mark_review_as_passed` on it. Otherwise, you should act on any feedback from the review to \
fix the issues. Once done, call `finished_step` again to see if you will pass now."""


def _paths(value: Value) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _preamble(checkpoint: StepCheckpoint) -> str:
    parts = []
    if checkpoint.workflow.common_info:
        parts.append(f"## Job Context\n\n{checkpoint.workflow.common_info.strip()}")
    if checkpoint.step.inputs:
        values = _current_inputs(checkpoint)
        lines = []
        for arg in checkpoint.step.inputs:
            value = values.get(arg.name)
            if value is None:
                lines.append(f"- **{arg.name}** ({arg.type}): {arg.description} — *not available*")
            elif arg.type == "file_path":
                lines.append(
                    f"- **{arg.name}** (file_path): " + ", ".join(f"@{p}" for p in _paths(value))
                )
            else:
                lines.append(f"- **{arg.name}** (string): {value}")
        parts.append("## Step Inputs\n\n" + "\n".join(lines))
    return "\n\n".join(parts)


def _current_inputs(checkpoint: StepCheckpoint) -> Mapping[str, Any]:
    from workflows.models import StepRun

    run = (
        StepRun.objects.filter(
            session=checkpoint.session,
            step_id=checkpoint.step.key,
            status=StepRun.Status.ACTIVE,
        )
        .values_list("input_values", flat=True)
        .first()
    )
    return run or {}


def _rule(
    checkpoint: StepCheckpoint, name: str, description: str, block: Mapping[str, Any], text: str
) -> ReviewRule:
    job_dir = Path(checkpoint.session.job.job_dir)
    context = block.get("additional_context") or {}
    return ReviewRule(
        name=name,
        description=description,
        include=(),
        exclude=(),
        strategy=block.get("strategy", "matches_together"),
        instructions=text,
        source_file=job_dir / "job.yml",
        source_dir=job_dir,
        source_line=0,
        agent=block.get("agent"),
        all_changed_filenames=bool(context.get("all_changed_filenames")),
        unchanged_matching_files=bool(context.get("unchanged_matching_files")),
    )


def _job_file_location(job_dir: Path, project_root: Path) -> str:
    """The job.yml a step's reviews come from, as the reviewer finds it: from the project
    root for a job in the project. A job from elsewhere (a standard job) is named by its
    folder alone, so the text shows no path of the server's own file system."""
    try:
        return (job_dir / "job.yml").relative_to(project_root).as_posix()
    except ValueError:
        return f"{job_dir.name}/job.yml"


def _with_preamble(preamble: str, text: str) -> str:
    return f"{preamble}\n\n{text}" if preamble else text


def review_tasks(
    *,
    checkpoint: StepCheckpoint,
    honour_091_ids: bool = False,
    commands: CommandPolicy = NO_COMMANDS,
) -> tuple[list[AgentTask], list[AgentTask]]:
    """Write the instruction files of every review not yet passed: (the tasks to run, the
    tasks already marked as passed).

    ``commands``: whether the project rules' precompute commands may run (the server decides).

    ``honour_091_ids``: the server also serves 0.9.1's review tools (``--generation both``),
    which name a project rule's review by 0.9.1's id; a pass marked under that id counts here
    as one under 0.14's. (The step's own reviews exist only here, so they have just one id.)
    """
    also: tuple[ReviewIdFn, ...] = (compute_review_id,) if honour_091_ids else ()
    root = checkpoint.project_root
    step = checkpoint.step
    job_dir = Path(checkpoint.session.job.job_dir)
    prefix = f"{job_dir.name}/"
    source = f"{_job_file_location(job_dir, root)}:0"
    preamble = _preamble(checkpoint)
    declared: dict[str, RtArg] = {arg.name: arg for arg in step.outputs}
    file_tasks: list[ReviewTask] = []
    inline: list[tuple[ReviewRule, str]] = []
    for name, value in checkpoint.outputs.items():
        arg = declared[name]
        for suffix, block in arg.reviews:
            rule = _rule(
                checkpoint,
                f"step_{step.name}_output_{name}{suffix}",
                f"Review of output '{name}' from step '{step.name}'",
                block,
                _with_preamble(preamble, block["instructions"]),
            )
            if arg.type == "string":
                assert isinstance(value, str)
                inline.append((rule, value))
                continue
            paths = _paths(value)
            groups = [[p] for p in paths] if rule.strategy == "individual" else [paths]
            file_tasks += [
                ReviewTask(
                    rule=rule,
                    files_to_review=tuple(group),
                    agent_name=rule.agent_for("claude"),
                    source_location=source,
                )
                for group in groups
                if group
            ]
    file_outputs = {
        name: value
        for name, value in checkpoint.outputs.items()
        if declared[name].type == "file_path"
    }
    if step.process_requirements and checkpoint.work_summary is not None and file_outputs:
        file_tasks.append(
            ReviewTask(
                rule=_rule(
                    checkpoint,
                    f"step_{step.name}_process_quality",
                    f"Process quality review for step '{step.name}'",
                    {"strategy": "matches_together"},
                    _process_text(checkpoint, preamble),
                ),
                # In the order the outputs were handed in, each path once, as 0.14 lists them.
                files_to_review=tuple(
                    dict.fromkeys(p for v in file_outputs.values() for p in _paths(v))
                ),
                source_location=source,
            )
        )
    project_tasks = _project_rule_tasks(root, file_outputs)
    tasks: list[AgentTask] = []
    passed: list[AgentTask] = []

    def as_task(task: ReviewTask, review_id: str) -> AgentTask:
        return AgentTask(
            f"Review {prefix}{task.rule_name}",
            review_id,
            task.agent_name or REVIEWER,
            ", ".join(task.files_to_review),
        )

    # 0.14's order: the step's file reviews, its string reviews, then the project's rules.
    for task in file_tasks:
        review_id = compute_review_task_id(task, root)
        if is_passed(root, review_id):
            passed.append(as_task(task, review_id))
    tasks += [
        as_task(task, review_id)
        for task, review_id in write_instruction_files(
            file_tasks, root, review_id=_review_id, render=render_review_task
        )
    ]
    for rule, value in inline:
        review_id = compute_review_task_id(ReviewTask(rule, ()), root, inline=value)
        inline_task = AgentTask(
            f"Review {prefix}{rule.name}",
            review_id,
            rule.agent_for("claude") or REVIEWER,
            "inline content",
        )
        if is_passed(root, review_id):
            passed.append(inline_task)
            continue
        project_write_text(
            root=root,
            relative=f"{INSTRUCTIONS_DIR}/{review_id}.md",
            text=render_review_task(
                ReviewTask(rule, (), source_location=source), review_id, root, inline=value
            ),
        )
        tasks.append(inline_task)
    for task in project_tasks:
        review_id = compute_review_task_id(task, root)
        if task_is_passed(root, task, review_id, also_passed_as=also):
            passed.append(as_agent_task(task, review_id, root))
    tasks += [
        as_agent_task(task, review_id, root)
        for task, review_id in write_instruction_files(
            project_tasks,
            root,
            review_id=_review_id,
            render=prepare_render_review_task(project_tasks, root, _review_id, also, commands),
            also_passed_as=also,
        )
    ]
    return tasks, passed


def _review_id(task: ReviewTask, root: Path) -> str:
    return compute_review_task_id(task, root)


def _project_rule_tasks(root: Path, file_outputs: Mapping[str, Value]) -> list[ReviewTask]:
    """Tasks of the project's ``.deepreview`` and DeepSchema rules over the submitted output
    files that git reports as changed (none when git fails); catch-all rules included."""
    # As git names them: project-relative and normalised (an output may be "./notes.md").
    submitted, _outside = confine_files(
        [p for value in file_outputs.values() for p in _paths(value)], root
    )
    if not submitted:
        return []
    # Rules first: asking git costs several processes (~16 ms), a walk for rule files ~2 ms,
    # and most projects have no rules at all.
    rules, _failures = load_rules_with_schemas(root)
    if not rules:
        return []
    try:
        changed = [path for path in get_changed_files(root) if path in submitted]
    except GitError:
        return []
    return build_tasks(changed, rules, root, "claude") if changed else []


def _process_text(checkpoint: StepCheckpoint, preamble: str) -> str:
    step = checkpoint.step
    declared = {arg.name: arg for arg in step.outputs}
    outputs = []
    for name, value in checkpoint.outputs.items():
        if declared[name].type == "file_path":
            outputs.append(
                f"- **{name}** (file_path): " + ", ".join(f"@{p}" for p in _paths(value))
            )
        else:
            outputs.append(f"- **{name}** (string): {value}")
    body = "\n\n".join(
        [
            "## Process Requirements Review",
            "Judge whether the work described below met each requirement. A requirement "
            "stated with MUST or SHALL that was not met fails the review; so does an unmet "
            "SHOULD or RECOMMENDED that would have been easy to meet. Other unmet requirements "
            "only get feedback, and requirements that do not apply are ignored.",
            "## Requirements",
            "\n".join(f"- **{name}**: {text}" for name, text in step.process_requirements),
            "## Work Summary (work_summary)",
            checkpoint.work_summary or "",
            "## Step Outputs",
            "\n".join(outputs),
            "Compare the work summary with each requirement and report, per requirement, "
            "whether it was met.",
        ]
    )
    return _with_preamble(preamble, body)


def gate_feedback(tasks: Sequence[AgentTask]) -> str:
    # Two blank lines before the next heading: the task list's own trailing empty line, then
    # the one that separates every part of the feedback.
    return f"{GATE_HEAD}\n\n{format_tasks(tasks)}\n\n{HOW_TO_RUN}"


__all__ = ["format_tasks", "gate_feedback", "review_tasks"]
