#!/usr/bin/env python3
"""``make soak``: ``kill -9`` of ``mcpserve`` at random moments over a thousand transitions.

One agent drives a workflow with a concurrent entry and two reviewed steps through a real
``manage.py mcpserve`` over stdio, with the real MCP client: start (and nested starts),
``finished_step`` that passes or needs work, ``go_to_step`` and ``abort_workflow``. A watchdog
sends SIGKILL to the server at a random moment: in the middle of a call, between two calls, or
while it starts. After every kill the server is restarted and the database (the same SQLite
file, or the PostgreSQL database of ``--database-url``) is read directly to check that:

- the agent's stack is the one before the interrupted call or the one after it, never a
  third (no lost, doubled or half transition), and the restarted server adopts the same agent
  and answers with that stack;
- every active session has exactly the active step runs of its current entry; a finished
  session has none, and its end time, its reason and its one closing event;
- every step run has its ``step_started`` event and every finished run its ``step_finished``;
  a session's revision counts its transitions;
- every review verdict event has its review results (and the reverse), and no review pass is
  left on a step that did not advance.

Each server life reviews either with an external reviewer (``tests/reviews/fake_reviewer.py``,
which fails a hand-in whose file says FORCE_FAIL) or by self-review, so both the reviewer's
verdicts and ``quality_review_override_reason`` are exercised. The summary goes to stdout; the
exit status is 0 when nothing was violated, 1 on any violation, 3 when the time cap stopped the
run before the requested number of transitions. Only public behaviour is used: the MCP tools
and the models' fields. The seed fixes every choice; where a kill lands also depends on timing,
so two runs with one seed differ in their figures.

    python tests/soak/kill_soak.py [--transitions 1000] [--seed N] [--max-seconds 1800]
                                   [--mean-calls-between-kills 3] [--database-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FAKE_REVIEWER = ROOT / "tests" / "reviews" / "fake_reviewer.py"
# A call that takes this long without a kill is a hang, which is a violation of its own.
CALL_TIMEOUT = 60.0

JOB = textwrap.dedent(
    """\
    name: soak
    version: "1.0.0"
    summary: "Gather, two halves at once, a reviewed draft, publish"
    common_job_info_provided_to_all_steps_at_runtime: "Soak test context."
    workflows:
      - name: main
        summary: "Five steps, one entry concurrent, two reviewed"
        steps: [gather, [left, right], draft, publish]
    steps:
      - id: gather
        name: "Gather"
        description: "Collect notes"
        instructions_file: steps/gather.md
        outputs:
          notes.md: {type: file, description: "Notes", required: true}
        reviews: []
      - id: left
        name: "Left"
        description: "Left half"
        instructions_file: steps/left.md
        outputs:
          left.md: {type: file, description: "Left", required: true}
        reviews: []
      - id: right
        name: "Right"
        description: "Right half"
        instructions_file: steps/right.md
        outputs:
          right.md: {type: file, description: "Right", required: true}
        reviews:
          - run_each: right.md
            quality_criteria: {"Complete": "The right half is complete."}
      - id: draft
        name: "Draft"
        description: "Write the draft"
        instructions_file: steps/draft.md
        inputs: [{file: notes.md, from_step: gather}]
        dependencies: [gather]
        outputs:
          draft.md: {type: file, description: "Draft", required: true}
        reviews:
          - run_each: step
            quality_criteria: {"Faithful": "The draft follows the notes."}
      - id: publish
        name: "Publish"
        description: "Publish"
        instructions_file: steps/publish.md
        outputs:
          final.md: {type: file, description: "Final", required: true}
        reviews: []
    """
)
SIDE_JOB = textwrap.dedent(
    """\
    name: side
    version: "1.0.0"
    summary: "A detour on top of the stack"
    common_job_info_provided_to_all_steps_at_runtime: "Side context."
    workflows:
      - name: only
        summary: "One step"
        steps: [note]
    steps:
      - id: note
        name: "Note"
        description: "Write a note"
        instructions_file: steps/note.md
        outputs:
          side.md: {type: file, description: "Note", required: true}
        reviews: []
    """
)
# Each workflow's entries (step ids), the outputs each step hands in and the reviewed steps:
# what the driver needs to predict every answer.
ENTRIES = {
    ("soak", "main"): [["gather"], ["left", "right"], ["draft"], ["publish"]],
    ("side", "only"): [["note"]],
}
OUTPUTS = {
    "gather": "notes.md",
    "left": "left.md",
    "right": "right.md",
    "draft": "draft.md",
    "publish": "final.md",
    "note": "side.md",
}
REVIEWED = {"right", "draft"}


# The driver's model of the agent's stack --------------------------------------------------------


@dataclass(frozen=True)
class Frame:
    """One session on the stack: its id (None until the server names a new one) and entry."""

    session_id: str | None
    job: str
    workflow: str
    entry: int

    @property
    def entries(self) -> list[list[str]]:
        return ENTRIES[(self.job, self.workflow)]

    def wire(self) -> dict[str, str]:
        return {"workflow": f"{self.job}/{self.workflow}", "step": self.entries[self.entry][0]}


Stack = tuple[Frame, ...]


def matches(expected: Stack, actual: Stack) -> Stack | None:
    """``actual`` if it is ``expected`` (a new session's id may be anything), else None."""
    if len(expected) != len(actual):
        return None
    for want, got in zip(expected, actual, strict=True):
        if want.session_id is not None and want.session_id != got.session_id:
            return None
        if (want.job, want.workflow, want.entry) != (got.job, got.workflow, got.entry):
            return None
    return actual


@dataclass
class Call:
    """One transition: the tool, its arguments, and the stack it must leave on success."""

    tool: str
    args: dict[str, Any]
    after: Stack
    expect: str  # "start", "advance", "needs_work", "abort", "go_to"
    label: str


@dataclass
class Tally:
    transitions: int = 0
    answered: int = 0
    interrupted_calls: int = 0
    kills: int = 0
    kills_mid_call: int = 0
    kills_between_calls: int = 0
    kills_at_startup: int = 0
    restarts: int = 0
    checks: int = 0
    by_tool: Counter = field(default_factory=Counter)
    by_outcome: Counter = field(default_factory=Counter)
    lives_by_review_mode: Counter = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    def violate(self, text: str) -> None:
        # A broken row is found again by every later check until it is repaired: once is enough.
        if text in self.violations:
            return
        self.violations.append(text)
        print(f"VIOLATION: {text}", file=sys.stderr, flush=True)


# Setting up ---------------------------------------------------------------------------------------


def write_project(project: Path) -> None:
    for folder, job, steps in (
        ("soak", JOB, ["gather", "left", "right", "draft", "publish"]),
        ("side", SIDE_JOB, ["note"]),
    ):
        job_dir = project / ".deepwork" / "jobs" / folder
        (job_dir / "steps").mkdir(parents=True)
        (job_dir / "job.yml").write_text(job)
        for step in steps:
            (job_dir / "steps" / f"{step}.md").write_text(f"# {step}\n\nDo the {step} work.\n")
    for name in OUTPUTS.values():
        (project / name).write_text(f"A complete {name}.\n")


def setup_django(database_url: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "deepwork_site.settings"
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("SECRET_KEY", "soak-not-secret")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def server_env(database_url: str, review_log: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DJANGO_SETTINGS_MODULE": "deepwork_site.settings",
        "DATABASE_URL": database_url,
        "SECRET_KEY": "soak-not-secret",
        "DEEPWORK_LOG_LEVEL": "ERROR",
        "FAKE_REVIEW": "pass",
        "FAKE_REVIEW_LOG": str(review_log),
    }


def children_serving(project: Path) -> list[int]:
    """This process's children that run ``mcpserve`` for ``project`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"mcpserve" in cmdline and str(project).encode() in cmdline:
            found.append(int(entry.name))
    return found


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited and been reaped (a zombie still counts as alive to others)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


# Reading the database -----------------------------------------------------------------------------


class Database:
    """Direct reads through the ORM, on one thread of their own (one connection)."""

    def __init__(self, project_root: Path) -> None:
        self.root = str(project_root)
        self.pool = ThreadPoolExecutor(max_workers=1)

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    def project(self):
        from workflows.models import Project

        return Project.objects.filter(root_path=self.root).first()

    def agent_ids(self) -> list[str]:
        from workflows.models import Agent

        return list(
            Agent.objects.filter(project__root_path=self.root)
            .order_by("id")
            .values_list("agent_id", flat=True)
        )

    def agent_of_pid(self, pid: int) -> str | None:
        from workflows.models import Agent

        row = Agent.objects.filter(project__root_path=self.root, pid=pid).first()
        return row.agent_id if row else None

    def stack(self, agent_id: str) -> Stack:
        from workflows.models import WorkflowSession

        rows = WorkflowSession.objects.filter(
            project__root_path=self.root, agent__agent_id=agent_id, status="active"
        ).order_by("id")
        return tuple(
            Frame(s.session_id, s.job_name, s.workflow_name, s.current_entry_index) for s in rows
        )

    def attempts(self, session_id: str, step_id: str) -> int:
        from workflows.models import StepRun

        run = StepRun.objects.filter(
            session__session_id=session_id, step_id=step_id, status="active"
        ).first()
        return run.quality_attempts if run else 0

    def invariants(self) -> list[str]:
        """Every way the rows of this project disagree with each other."""
        from django.db import close_old_connections

        from insights.tallies import insight_tallies_differences
        from reviews.models import ReviewResult
        from workflows.models import Event, StepRun, WorkflowSession

        close_old_connections()
        problems: list[str] = []
        project = self.project()
        if project is None:
            return []
        sessions = {s.pk: s for s in WorkflowSession.objects.filter(project=project)}
        runs: dict[int, list] = {pk: [] for pk in sessions}
        for run in StepRun.objects.filter(session__project=project).order_by("id"):
            runs[run.session_id].append(run)
        events: dict[int, list] = {pk: [] for pk in sessions}
        for event in Event.objects.filter(project=project, session__isnull=False).order_by("id"):
            events[event.session_id].append(event)
        reviews: dict[int, list] = {pk: [] for pk in sessions}
        for review in ReviewResult.objects.filter(session__project=project).select_related(
            "step_run"
        ):
            reviews[review.session_id].append(review)
            if review.step_run.session_id != review.session_id:
                problems.append(f"review {review.pk} is filed under another session")

        for pk, session in sessions.items():
            name = f"session {session.session_id} ({session.job_name}, {session.status})"
            entries = ENTRIES[(session.job_name, session.workflow_name)]
            mine, log, verdicts = runs[pk], events[pk], reviews[pk]
            kinds = Counter(e.kind for e in log)
            active = [r for r in mine if r.status == "active"]

            if session.status == "active":
                entry = entries[session.current_entry_index]
                if sorted(r.step_id for r in active) != sorted(entry):
                    problems.append(
                        f"{name}: active runs {sorted(r.step_id for r in active)} but its "
                        f"current entry {session.current_entry_index} is {entry}"
                    )
                if any(r.entry_index != session.current_entry_index for r in active):
                    problems.append(f"{name}: an active run of another entry")
                if session.current_step_id != entry[0]:
                    problems.append(
                        f"{name}: current step {session.current_step_id}, not {entry[0]}"
                    )
                if session.completed_at is not None:
                    problems.append(f"{name}: active with an end time")
            else:
                if active:
                    problems.append(f"{name}: {len(active)} active runs left")
                if session.completed_at is None:
                    problems.append(f"{name}: no end time")
            closing = {"completed": "session_completed", "aborted": "session_aborted"}
            for status, kind in closing.items():
                want = 1 if session.status == status else 0
                if kinds[kind] != want:
                    problems.append(f"{name}: {kinds[kind]} {kind} events, expected {want}")
            if session.status == "aborted" and not session.abort_reason:
                problems.append(f"{name}: aborted without a reason")
            if session.status == "completed":
                last = entries[-1]
                done = {r.step_id for r in mine if r.status == "completed"}
                if session.current_entry_index != len(entries) - 1 or not set(last) <= done:
                    problems.append(f"{name}: completed without its last entry")
            if kinds["session_started"] != 1:
                problems.append(f"{name}: {kinds['session_started']} session_started events")

            # Runs and their events.
            if kinds["step_started"] != len(mine):
                problems.append(
                    f"{name}: {len(mine)} step runs but {kinds['step_started']} step_started"
                )
            finished = Counter(
                r.step_id
                for r in mine
                if r.status == "completed" or (r.status == "invalidated" and r.completed_at)
            )
            announced = Counter(e.payload.get("step_id") for e in log if e.kind == "step_finished")
            if finished != announced:
                problems.append(
                    f"{name}: finished runs {dict(finished)} but step_finished {dict(announced)}"
                )
            if any(r.status == "aborted" for r in mine) and session.status != "aborted":
                problems.append(f"{name}: aborted runs in a session that was not aborted")
            firsts = {entry[0] for entry in entries}
            moves = (
                sum(1 for e in log if e.kind == "step_finished" and e.payload["step_id"] in firsts)
                + kinds["step_reopened"]
                + kinds["session_aborted"]
            )
            if session.revision != moves:
                problems.append(f"{name}: revision {session.revision} but {moves} transitions")

            # Verdicts and their events.
            # One event per round of reviews of an entry: it counts the external reviews that
            # ran, and a round passed on a reason stands for one verdict row per step it names.
            rounds = [e for e in log if e.kind in ("review_passed", "review_failed")]
            external = sum(e.payload.get("reviews", 0) for e in rounds)
            external_rows = sum(1 for v in verdicts if v.reviewer_kind == "external")
            if external != external_rows:
                problems.append(
                    f"{name}: review events count {external} external verdicts, "
                    f"{external_rows} stored"
                )
            overridden = Counter(
                step_id
                for e in rounds
                if e.payload.get("override_reason") is not None
                for step_id in e.payload.get("step_ids", [])
            )
            override_rows = Counter(
                v.step_run.step_id for v in verdicts if v.override_reason is not None
            )
            if overridden != override_rows:
                problems.append(
                    f"{name}: override review_passed events stand for "
                    f"{overridden.total()} verdicts {dict(overridden)}, "
                    f"{override_rows.total()} stored {dict(override_rows)}"
                )
            if session.status == "active":
                started = max((e.pk for e in log if e.kind == "step_started"), default=0)
                late = [e for e in rounds if e.kind == "review_passed" and e.pk > started]
                if late:
                    problems.append(
                        f"{name}: review passed (event {late[0].pk}, {late[0].payload}) but "
                        f"step {session.current_step_id} did not advance"
                    )

        # The stack: each agent's active sessions sit on one another.
        for agent_pk in {s.agent_id for s in sessions.values()}:
            chain = sorted(
                (s for s in sessions.values() if s.agent_id == agent_pk and s.status == "active"),
                key=lambda s: s.pk,
            )
            for below, above in zip(chain, chain[1:], strict=False):
                if above.parent_id != below.pk:
                    problems.append(
                        f"session {above.session_id} is above {below.session_id} on the stack "
                        "but not its child"
                    )
        # The insights' tallies are written with the events they count: a kill between the two
        # would leave them apart from a recount of the rows.
        problems.extend(insight_tallies_differences(project_id=project.pk))
        return problems


# Driving ------------------------------------------------------------------------------------------


class Driver:
    """Picks each transition from the stack it believes in and predicts what it leaves."""

    def __init__(self, rng: random.Random, project: Path, db: Database) -> None:
        self.rng = rng
        self.project = project
        self.db = db
        self.stack: Stack = ()
        self.starts = 0

    async def next_call(self, external: bool) -> Call:
        rng, stack = self.rng, self.stack
        if not stack:
            return self.start("soak", "main")
        top = stack[-1]
        roll = rng.random()
        if roll < 0.05 and len(stack) < 3:
            return self.start("side", "only")
        if roll < 0.09:
            return Call(
                "abort_workflow",
                {"explanation": f"soak abort {self.starts}"},
                stack[:-1],
                "abort",
                f"abort {top.job}/{top.workflow}",
            )
        if roll < 0.16:
            target = rng.randint(0, top.entry)
            step = rng.choice(top.entries[target])
            return Call(
                "go_to_step",
                {"step_id": step},
                (*stack[:-1], replace(top, entry=target)),
                "go_to",
                f"go_to_step {step}",
            )
        return await self.finish(top, external)

    def start(self, job: str, workflow: str) -> Call:
        self.starts += 1
        frame = Frame(None, job, workflow, 0)
        args = {"goal": f"soak goal {self.starts}", "job_name": job, "workflow_name": workflow}
        return Call("start_workflow", args, (*self.stack, frame), "start", f"start {job}")

    async def finish(self, top: Frame, external: bool) -> Call:
        entry = top.entries[top.entry]
        outputs = {OUTPUTS[step]: OUTPUTS[step] for step in entry}
        args: dict[str, Any] = {"outputs": outputs}
        reviewed = [step for step in entry if step in REVIEWED]
        passes = True
        label = f"finished_step {'+'.join(entry)}"
        if reviewed:
            if self.rng.random() < 0.35:
                args["quality_review_override_reason"] = "Checked against every criterion."
                label += " with override"
            elif external:
                # Fail only a first attempt: three failures end the step with an error.
                attempts = await self.db.run(self.db.attempts, top.session_id, reviewed[0])
                passes = attempts > 0 or self.rng.random() < 0.5
                label += " (good)" if passes else " (FORCE_FAIL)"
            else:
                passes = False
                label += " (self-review requested)"
        for step in reviewed:
            text = "A complete text.\n" if passes else "FORCE_FAIL: not written yet\n"
            (self.project / OUTPUTS[step]).write_text(text)
        if not passes:
            return Call("finished_step", args, self.stack, "needs_work", label)
        if top.entry + 1 == len(top.entries):
            after = self.stack[:-1]
        else:
            after = (*self.stack[:-1], replace(top, entry=top.entry + 1))
        return Call("finished_step", args, after, "advance", label)

    def answer_problem(self, call: Call, answer: dict[str, Any]) -> str | None:
        """What is wrong with a server's answer to ``call``, given the stack it should leave."""
        wire = [frame.wire() for frame in call.after]
        if answer.get("stack") != wire:
            return f"{call.label}: stack {answer.get('stack')} but expected {wire}"
        status = answer.get("status")
        if call.expect == "needs_work" and status != "needs_work":
            return f"{call.label}: answered {status}, expected needs_work"
        if call.expect == "advance":
            want = "workflow_complete" if len(call.after) < len(self.stack) else "next_step"
            if status != want:
                return f"{call.label}: answered {status}, expected {want}"
        if call.expect in ("start", "go_to") or status == "next_step":
            begin = answer["begin_step"]
            top = call.after[-1]
            if top.session_id is not None and begin["session_id"] != top.session_id:
                return f"{call.label}: began session {begin['session_id']}, not {top.session_id}"
        return None

    def settle(self, call: Call, answer: dict[str, Any] | None, actual: Stack | None) -> None:
        if actual is not None:
            self.stack = actual
        elif call.expect == "start" and answer is not None:
            new = replace(call.after[-1], session_id=answer["begin_step"]["session_id"])
            self.stack = (*call.after[:-1], new)
        else:
            self.stack = call.after


# One server life ----------------------------------------------------------------------------------


@dataclass
class Life:
    number: int
    external: bool
    calls_before_kill: int  # how many calls run to the end before the one the watchdog arms on
    kill_between_calls: bool  # kill after that call's answer instead of during the call
    startup_kill: bool


class Soak:
    def __init__(self, options: argparse.Namespace, work: Path) -> None:
        self.options = options
        self.rng = random.Random(options.seed)
        self.project = (work / "project").resolve()
        self.project.mkdir()
        write_project(self.project)
        self.review_log = work / "reviews"
        self.database_url = options.database_url or f"sqlite:///{work / 'soak.sqlite3'}"
        self.db = Database(self.project)
        self.driver = Driver(self.rng, self.project, self.db)
        self.tally = Tally()
        self.agent_id: str | None = None
        # Running means of how long each kind of call takes, so that most kills land inside
        # one; the rest land just after it, between two calls.
        self.call_seconds: dict[tuple[str, str, bool, bool], float] = {}
        self.startup_seconds = 1.5
        self.deadline = time.monotonic() + options.max_seconds
        self.pending: Call | None = None  # the call a kill may have interrupted

    def transport(self, external: bool):
        from fastmcp.client.transports import StdioTransport

        extra = ["--external-runner-cmd", f"{sys.executable} {FAKE_REVIEWER}"] if external else []
        return StdioTransport(
            command=sys.executable,
            args=[str(ROOT / "manage.py"), "mcpserve", "--path", str(self.project), *extra],
            env=server_env(self.database_url, self.review_log),
            cwd=str(self.project),
            keep_alive=False,
        )

    def plan_life(self, number: int) -> Life:
        mean = self.options.mean_calls_between_kills
        return Life(
            number=number,
            external=self.rng.random() < 0.5,
            calls_before_kill=self.rng.randint(0, max(0, 2 * mean - 1)),
            kill_between_calls=self.rng.random() < 0.2,
            startup_kill=number > 0 and self.rng.random() < 0.1,
        )

    def done(self) -> bool:
        return self.tally.transitions >= self.options.transitions or self.out_of_time()

    def out_of_time(self) -> bool:
        return time.monotonic() >= self.deadline

    async def run(self) -> None:
        number = 0
        while not self.done():
            life = self.plan_life(number)
            self.tally.lives_by_review_mode["external" if life.external else "self"] += 1
            killed = await self.live(life)
            number += 1
            if killed:
                self.tally.kills += 1
            await self.after_server_exit(killed)
            if not self.done():
                self.tally.restarts += 1
        await self.check(final=True)

    async def live(self, life: Life) -> bool:
        """Serve until the watchdog kills the server or the soak is done; True if it was killed."""
        from fastmcp import Client

        loop = asyncio.get_running_loop()
        client = Client(self.transport(life.external), mode="legacy")
        watchdog: asyncio.Task | None = None
        killed = asyncio.Event()
        server: list[int] = []  # the server's pid, once it answered (scanning /proc is slow)

        async def kill_after(delay: float, where: str | None = None) -> None:
            await asyncio.sleep(delay)
            # Counted by where the server was when the signal went: inside a call (its answer
            # not yet read), between two calls, or still starting.
            if where is None:
                where = "kills_between_calls" if self.pending is None else "kills_mid_call"
            for pid in server or children_serving(self.project):
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    killed.set()
            if killed.is_set():
                setattr(self.tally, where, getattr(self.tally, where) + 1)

        started = loop.time()
        if life.startup_kill:
            delay = self.rng.uniform(0, self.startup_seconds)
            watchdog = asyncio.create_task(kill_after(delay, "kills_at_startup"))
        try:
            async with client:
                self.startup_seconds = 0.8 * self.startup_seconds + 0.2 * (loop.time() - started)
                if watchdog is not None:
                    watchdog.cancel()
                    if killed.is_set():
                        return True
                server.extend(children_serving(self.project))
                await self.serve(client, life, server[0] if server else None, kill_after, killed)
        except Exception as exc:  # the client sees the dead server as a broken connection
            if not killed.is_set():
                self.tally.violate(f"server life {life.number} failed: {exc!r}")
        finally:
            if watchdog is not None and not watchdog.done():
                watchdog.cancel()
        return killed.is_set()

    async def serve(
        self,
        client,
        life: Life,
        pid: int | None,
        kill_after: Callable[[float], Awaitable[None]],
        killed: asyncio.Event,
    ) -> None:
        loop = asyncio.get_running_loop()
        first = True
        for index in range(10**9):
            if self.done():
                return
            call = await self.driver.next_call(life.external)
            watchdog = None
            # A server's first call also opens its database connection: timed apart.
            kind = (call.tool, call.expect, life.external, index == 0)
            if index == life.calls_before_kill and not life.kill_between_calls:
                delay = self.rng.uniform(0, self.call_seconds.get(kind, 0.2))
                watchdog = asyncio.create_task(kill_after(delay))
            self.pending = call
            self.tally.transitions += 1
            self.tally.by_tool[call.tool] += 1
            started = loop.time()
            try:
                result = await asyncio.wait_for(
                    client.call_tool(call.tool, call.args, raise_on_error=False), CALL_TIMEOUT
                )
            except Exception as exc:
                if watchdog is not None:
                    with suppress(asyncio.CancelledError):
                        await watchdog
                if killed.is_set():
                    self.tally.interrupted_calls += 1
                    raise
                self.tally.violate(f"{call.label}: no answer ({exc!r})")
                raise
            took = loop.time() - started
            self.call_seconds[kind] = 0.8 * self.call_seconds.get(kind, took) + 0.2 * took
            self.pending = None
            text = result.content[0].text if result.content else ""
            if result.is_error:
                self.tally.violate(f"{call.label}: refused: {text}")
                self.driver.settle(call, None, await self.db.run(self.db.stack, self.agent_id))
            else:
                answer = json.loads(text)
                self.tally.answered += 1
                self.tally.by_outcome[answer.get("status") or call.expect] += 1
                if problem := self.driver.answer_problem(call, answer):
                    self.tally.violate(problem)
                self.driver.settle(call, answer, None)
            if first:
                await self.check_adoption(pid)
                first = False
            if index == life.calls_before_kill:
                if watchdog is None or not watchdog.done():
                    # Planned between calls, or the call beat the watchdog: kill while idle.
                    if watchdog is not None:
                        watchdog.cancel()
                    await kill_after(self.rng.uniform(0, self.call_seconds[kind]))
                return

    async def check_adoption(self, pid: int | None) -> None:
        """The restarted server holds the same agent: it resumed the same stack."""
        if pid is None:
            self.tally.violate("could not find the server's process")
            return
        agent_id = await self.db.run(self.db.agent_of_pid, pid)
        if self.agent_id is None:
            self.agent_id = agent_id
        elif agent_id != self.agent_id:
            self.tally.violate(f"restarted server holds agent {agent_id}, not {self.agent_id}")

    async def after_server_exit(self, killed: bool) -> None:
        for pid in children_serving(self.project):
            # Not reaped yet: a pid that still exists would look like a live holder.
            for _ in range(100):
                if gone(pid):
                    break
                await asyncio.sleep(0.05)
        if self.agent_id is None:
            # Killed before its first answer: the project's only agent, if it got that far.
            agents = await self.db.run(self.db.agent_ids)
            self.agent_id = agents[0] if len(agents) == 1 else None
        if self.agent_id is None:
            self.pending = None
            return
        actual = await self.db.run(self.db.stack, self.agent_id)
        call = self.pending
        if call is not None:
            # Interrupted: the stack is the one before the call or the one after, nothing else.
            before, after = matches(self.driver.stack, actual), matches(call.after, actual)
            if before is None and after is None:
                self.tally.violate(
                    f"after a kill during {call.label}: stack {self.describe(actual)} is neither "
                    f"{self.describe(self.driver.stack)} nor {self.describe(call.after)}"
                )
            self.driver.settle(call, None, actual)
            self.pending = None
        elif matches(self.driver.stack, actual) is None:
            self.tally.violate(
                f"after a kill between calls: stack {self.describe(actual)}, expected "
                f"{self.describe(self.driver.stack)}"
            )
            self.driver.settle(Call("", {}, actual, "", ""), None, actual)
        if killed:
            await self.check()

    async def check(self, final: bool = False) -> None:
        self.tally.checks += 1
        for problem in await self.db.run(self.db.invariants):
            self.tally.violate(problem)
        if final:
            agents = await self.db.run(self.db.agent_ids)
            if len(agents) != 1:
                self.tally.violate(f"{len(agents)} agents served the project: {agents}")

    @staticmethod
    def describe(stack: Stack) -> str:
        return "[" + ", ".join(f"{f.job}/{f.workflow}@{f.entry}" for f in stack) + "]"


def summary(soak: Soak, seconds: float) -> dict[str, Any]:
    from reviews.models import ReviewResult
    from workflows.models import Event, StepRun, WorkflowSession

    root = str(soak.project)
    sessions = WorkflowSession.objects.filter(project__root_path=root)
    t = soak.tally
    return {
        "seed": soak.options.seed,
        "database": soak.database_url.split("://", 1)[0],
        "transitions": t.transitions,
        "answered": t.answered,
        "interrupted_calls": t.interrupted_calls,
        "kills": t.kills,
        "kills_mid_call": t.kills_mid_call,
        "kills_between_calls": t.kills_between_calls,
        "kills_at_startup": t.kills_at_startup,
        "restarts": t.restarts,
        "consistency_checks": t.checks,
        "violations": len(t.violations),
        "seconds": round(seconds, 1),
        "calls_by_tool": dict(t.by_tool),
        "answers": dict(t.by_outcome),
        "server_lives_by_review_mode": dict(t.lives_by_review_mode),
        "rows": {
            "sessions": dict(Counter(sessions.values_list("status", flat=True))),
            "step_runs": StepRun.objects.filter(session__project__root_path=root).count(),
            "review_results": ReviewResult.objects.filter(session__project__root_path=root).count(),
            "events": Event.objects.filter(project__root_path=root).count(),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transitions", type=int, default=1000, help="calls to issue (1000)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument(
        "--max-seconds", type=float, default=1800, help="stop after this long (1800)"
    )
    parser.add_argument(
        "--mean-calls-between-kills", type=int, default=3, help="how often to kill (3)"
    )
    parser.add_argument(
        "--database-url",
        default=None,
        help="a PostgreSQL database to run on (a fresh SQLite file by default)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    options = parser.parse_args(argv)
    if options.seed is None:
        options.seed = random.SystemRandom().randrange(10**6)
    if options.transitions < 1 or options.mean_calls_between_kills < 1:
        parser.error("--transitions and --mean-calls-between-kills must be at least 1")

    work = Path(tempfile.mkdtemp(prefix="deepwork-soak-"))
    soak = Soak(options, work)
    setup_django(soak.database_url)
    print(f"soak: seed {options.seed}, work folder {work}", file=sys.stderr, flush=True)
    began = time.monotonic()
    asyncio.run(soak.run())
    figures = summary(soak, time.monotonic() - began)
    print(json.dumps(figures, indent=2))
    for violation in soak.tally.violations[:50]:
        print(f"violation: {violation}")
    if not options.keep and not soak.tally.violations:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    if soak.tally.violations:
        return 1
    return 3 if soak.tally.transitions < options.transitions else 0


if __name__ == "__main__":
    sys.exit(main())
