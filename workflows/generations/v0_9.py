"""DeepWork 0.9.1's rules: stacks per agent, entries of ``Step`` rows (concurrent ones
together), instructions files, declared outputs, and reviews planned by the server's gate."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workflows import rows
from workflows.errors import InvalidInput, JobBroken, NotFound
from workflows.files import FileTooLarge, NotRegularFile, read_regular_text
from workflows.generations.base import Conversation, Value
from workflows.jobdefs.format_0_9 import instructions_path
from workflows.models import Agent, Job, Project, Step, Workflow, WorkflowSession
from workflows.outputs import DeclaredOutput, validate_outputs
from workflows.results import (
    SessionAborted,
    SessionStarted,
    Stack,
    StepAdvanced,
    StepBegun,
    StepInstructions,
    WentToStep,
    WorkflowCompleted,
)
from workflows.selectors import JOB_FIELDS, stack_for_agent, workflow_entries

# Step instructions go whole into the agent's answer; a file past this is a broken job, and a
# huge or sparse file is never read whole.
INSTRUCTIONS_MAX_BYTES = 1024 * 1024

ABORT_TOLD_NEXT = (
    "Nothing was handed in. Call finished_step again to go on with the session below it, if "
    "any, or use start_workflow to begin a workflow."
)


def read_step_instructions(job: Job, step: Step) -> str:
    path = instructions_path(Path(job.job_dir), step.instructions_file)
    if path is None:
        raise JobBroken(
            f"Instructions file '{step.instructions_file}' of step '{step.step_id}' is outside "
            "the job folder"
        )
    try:
        return read_regular_text(path, limit=INSTRUCTIONS_MAX_BYTES)
    except FileNotFoundError:
        raise JobBroken(f"Instructions file not found: {step.instructions_file}") from None
    except FileTooLarge as exc:
        raise JobBroken(
            f"Instructions file {step.instructions_file} is {exc.size:,} bytes; the limit is "
            f"{INSTRUCTIONS_MAX_BYTES:,}"
        ) from None
    except NotRegularFile as exc:
        raise JobBroken(
            f"Instructions file {step.instructions_file} could not be read: it is not a regular "
            f"file (it is {exc.kind})"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise JobBroken(
            f"Instructions file {step.instructions_file} could not be read: {exc}"
        ) from None


def read_entry_instructions(job: Job, entry: list[Step]) -> tuple[StepInstructions, ...]:
    """Each step's instructions, read before any transaction opens."""
    return tuple(
        StepInstructions(step.step_id, read_step_instructions(job, step)) for step in entry
    )


def new_session_id() -> str:
    """An 8-hex id, short enough to type; a collision is drawn again by the start."""
    return secrets.token_hex(4)


def _declared_outputs(entry: list[Step]) -> list[DeclaredOutput]:
    return [
        DeclaredOutput(name=output["name"], type=output["type"], required=output["required"])
        for step in entry
        for output in step.outputs
    ]


class FirstGeneration:
    name = WorkflowSession.Generation.DEEPWORK_091.value
    abort_told_next = ABORT_TOLD_NEXT
    reviews_by_agent = False
    records_step_files = True
    carries_inputs = False
    index_word = "entry index"

    def stack_agent(
        self,
        *,
        project: Project,
        agent: Agent | None,
        conversation: Conversation | None,
        create: bool,
    ) -> Agent | None:
        return agent

    def stack(self, *, project: Project, agent: Agent, conversation: Conversation | None) -> Stack:
        return stack_for_agent(agent=agent)

    def find_job(
        self, *, project: Project, catalog: Any, conversation: Conversation | None, job_name: str
    ) -> Job:
        found = catalog.find(job_name)
        if found is None:
            broken = catalog.error_for(job_name)
            if broken is not None:
                raise JobBroken(f"Failed to parse job '{job_name}': {broken.error}")
            raise NotFound(f"Job not found: {job_name}")
        if found.job_format == "0.14":
            # Its steps have typed outputs and inline instructions 0.9.1's answers cannot carry.
            raise InvalidInput(
                f"Job '{job_name}' is written in DeepWork 0.14's job format; start it the "
                "DeepWork 0.14 way (pass session_id to start_workflow, on a server run with "
                "--generation 0.14 or both)"
            )
        job = rows.select_model(Job, where="id = %s", params=[found.pk], fields=JOB_FIELDS)
        if job is None:
            raise NotFound(f"Job not found: {job_name}")
        return job

    def parent(
        self, *, project: Project, agent: Agent, conversation: Conversation | None
    ) -> WorkflowSession | None:
        return rows.select_model(
            WorkflowSession,
            where="agent_id = %s AND status = %s",
            params=[agent.pk, WorkflowSession.Status.ACTIVE.value],
            fields=("id", "session_id"),
            order_by="id DESC",
        )

    def session_fields(
        self,
        *,
        conversation: Conversation | None,
        instance_id: str | None,
        inputs: dict[str, Value] | None,
    ) -> dict[str, Any]:
        return {"session_id": new_session_id(), "instance_id": instance_id}

    def entries(self, job: Job, workflow: Workflow) -> list[list[Step]]:
        return workflow_entries(workflow=workflow, job=job)

    def current_entry(self, session: WorkflowSession, entries: Sequence[Any]) -> list[Step]:
        if session.current_entry_index >= len(entries):
            raise JobBroken(f"Current step not found: {session.current_step_id}")
        entry: list[Step] = entries[session.current_entry_index]
        return entry

    def step_rows(self, session: WorkflowSession, entry: list[Step]) -> list[Step]:
        return entry

    def find_step(self, entries: Sequence[Any], step_id: str) -> int | None:
        return next(
            (i for i, entry in enumerate(entries) if any(s.step_id == step_id for s in entry)),
            None,
        )

    def step_names(self, entries: Sequence[Any]) -> list[str]:
        return [step.step_id for entry in entries for step in entry]

    def entry_keys(self, entry: list[Step]) -> list[str]:
        return [step.step_id for step in entry]

    def read_entry(
        self, job: Job, entries: Sequence[Any], entry: list[Step]
    ) -> tuple[StepInstructions, ...]:
        return read_entry_instructions(job, entry)

    def check_outputs(
        self, *, entry: list[Step], outputs: dict[str, Value], project_root: Path
    ) -> None:
        validate_outputs(
            declared=_declared_outputs(entry), submitted=outputs, project_root=project_root
        )

    def output_feedback(
        self, *, entry: list[Step], outputs: dict[str, Value], project_root: Path
    ) -> str | None:
        return None  # 0.9.1 refuses outputs that do not fit; nothing is sent back as work

    def run_outputs(
        self, entry: list[Step], key: str, outputs: dict[str, Value]
    ) -> dict[str, Value]:
        step = next(s for s in entry if s.step_id == key)
        own = {o["name"] for o in step.outputs}
        return {name: value for name, value in outputs.items() if name in own}

    def input_values(
        self, session: WorkflowSession, entry: list[Step], produced: dict[str, Value]
    ) -> dict[str, Value | None]:
        return {}

    def begun(
        self,
        session: WorkflowSession,
        entries: Sequence[Any],
        entry: list[Step],
        read: tuple[StepInstructions, ...],
        values: dict[str, Value | None],
    ) -> StepBegun:
        return StepBegun(session=session, job=session.job, steps=tuple(entry), instructions=read)

    def completed(
        self,
        session: WorkflowSession,
        entries: Sequence[Any],
        all_outputs: dict[str, Value],
        stack: Stack,
    ) -> WorkflowCompleted:
        return WorkflowCompleted(
            workflow_name=session.workflow_name, all_outputs=all_outputs, stack=stack
        )

    def aborted(
        self,
        session: WorkflowSession,
        explanation: str,
        step_id: str,
        stack: Stack,
    ) -> SessionAborted:
        return SessionAborted(
            session=session, step_id=step_id, explanation=explanation, stack=stack
        )

    def invalidated(
        self, entries: Sequence[Any], target: int, run_step_ids: list[str]
    ) -> tuple[str, ...]:
        return tuple(dict.fromkeys(run_step_ids))

    def started(self, *, begun: Any, stack: Stack) -> SessionStarted:
        return SessionStarted(begun=begun, stack=stack)

    def advanced(self, *, begun: Any, stack: Stack) -> StepAdvanced:
        return StepAdvanced(begun=begun, stack=stack)

    def went(self, *, begun: Any, invalidated_steps: tuple[str, ...], stack: Stack) -> WentToStep:
        return WentToStep(begun=begun, invalidated_steps=invalidated_steps, stack=stack)


FIRST = FirstGeneration()
