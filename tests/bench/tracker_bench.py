#!/usr/bin/env python
"""``make bench``: the tracker toolset's speed targets (issue 10).

1. Per-tool latency over stdio: one real ``manage.py mcpserve --toolsets deepwork,tracker``
   process driven by the FastMCP client (``run_bench``'s client and helpers), in cycles of
   ``get_workflows`` then every tracker tool from ``start_workflow`` to ``complete_workflow``.
   Target: the log tools and ``get_context`` within 2x of ``get_workflows``' p50 (same run).
2. ``get_context`` on a workflow of 10,000 decisions and 10,000 milestones (seeded with
   ``bulk_create``): the selector's query count at 100 rows and at 10,000 (must be equal), and
   the first page's p95 under 50 ms, as server time through the selector and over stdio.
3. ``start_task`` + ``complete_task`` through the tracker's services on a generated git
   repository of 10,000 files of which 100 change during each task (90 modified, 10 new):
   p50 of the pair within 3x of ``git status --porcelain`` on the same repository, same run.

Everything runs on a throwaway SQLite database under a temporary folder (``--database-url``
points both this process and ``mcpserve`` at another database instead: use a throwaway one).
Missed targets do not fail the run (this is a measurement); a broken harness does (exit 1).
``--profile`` prints where the time of the in-process measurements goes (cProfile).

``--smoke``, for the test suite: 60 rows, 200 files of which 10 change, one cycle and one call
of each kind, no target and no results file.

Usage: .venv/bin/python tests/bench/tracker_bench.py [--quick] [--smoke] [--keep] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.bench import migrated  # noqa: E402
from tests.bench.run_bench import (  # noqa: E402  (the path above makes the checkout importable)
    BENCH_DIR,
    JOB_NAME,
    OUR_PYTHON,
    HarnessError,
    Server,
    _children,
    _ms,
    log,
    make_project,
    server_cpu,
    summarize,
    timed_call,
)

RESULTS_JSON = BENCH_DIR / "tracker_results.json"

CONTEXT_ROWS = 10_000  # decisions, and as many milestones, in one workflow
SMALL_CONTEXT_ROWS = 100
CONTEXT_P95_MS = 50.0
LOG_RATIO = 2.0  # log tools and get_context: p50 within this many times get_workflows' p50
REPO_FILES = 10_000
REPO_CHANGED = 100
REPO_NEW = 10  # of the changed files, this many are new (untracked); the rest are modified
GIT_RATIO = 3.0
SEED_BATCH = 2_000
SMOKE = False  # --smoke: the sizes above shrunk, no target held
INCLUDE_ALL = ["decisions", "milestones", "blockers", "tasks", "phase_summary"]

# The per-call cycle, in order; the tracker's names as the seed has them (the wire names,
# prefixed beside deepwork, come from tools/list).
TRACKER_TOOLS = (
    "start_workflow",
    "start_phase",
    "start_task",
    "log_decision",
    "log_issue",
    "log_milestone",
    "get_context",
    "complete_task",
    "complete_phase",
    "complete_workflow",
)
HELD_TO_GET_WORKFLOWS = ("log_decision", "log_issue", "log_milestone", "get_context")


# --------------------------------------------------------------------------------------------
# Seeding (also used by tests/tracker/test_bench_smoke.py)
# --------------------------------------------------------------------------------------------


def seed_context(*, project: Any, agent: Any, rows: int, name: str = "context bench") -> Any:
    """A running tracked workflow with one task carrying ``rows`` decisions and ``rows``
    milestones, written with ``bulk_create`` (the workflow and its task go through the
    services, so they are what an agent would have made)."""
    from django.utils import timezone

    from tracker import services as tracker
    from tracker.models import Decision, Milestone

    workflow = tracker.tracked_workflow_start(
        project=project, agent=agent, name=name, objective="read back a long history"
    )
    task = tracker.task_start(
        project=project,
        agent=agent,
        workflow_id=str(workflow.pk),
        name="long task",
        goal="log a lot",
        phase=1,
    ).task
    start = timezone.now() - timedelta(seconds=rows)
    categories = list(Decision.Category)
    for offset in range(0, rows, SEED_BATCH):
        numbers = range(offset, min(offset + SEED_BATCH, rows))
        Decision.objects.bulk_create(
            Decision(
                project=project,
                agent=agent,
                workflow=workflow,
                task=task,
                category=categories[n % len(categories)],
                question=f"Which way for part {n}?",
                options_considered=["this way", "that way"],
                chosen="this way",
                reasoning=f"Part {n} reads better this way.",
                created_at=start + timedelta(seconds=n),
            )
            for n in numbers
        )
        Milestone.objects.bulk_create(
            Milestone(
                project=project,
                agent=agent,
                workflow=workflow,
                task=task,
                message=f"Part {n} done",
                progress=round(100 * (n + 1) / rows, 2),
                metadata={"part": n},
                created_at=start + timedelta(seconds=n),
            )
            for n in numbers
        )
    return workflow


def context_first_page(*, project: Any, workflow_id: str) -> dict[str, Any]:
    """``get_context``'s first page of every list, through the selector the tool calls."""
    from tracker.selectors import context_get

    return context_get(project=project, workflow_id=workflow_id, include=INCLUDE_ALL)


def context_queries(*, project: Any, workflow_id: str) -> int:
    """How many queries the first page of ``get_context`` makes."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        context_first_page(project=project, workflow_id=workflow_id)
    return len(queries.captured_queries)


def git(root: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True).stdout


def make_repo(root: Path, files: int) -> list[str]:
    """A committed git repository of ``files`` small text files, 100 to a folder; returns
    their relative paths in order."""
    root.mkdir(parents=True)
    paths = []
    for n in range(files):
        relative = f"src/pkg{n // 100:03d}/module_{n:05d}.py"
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'"""Module {n}."""\n\nVALUE = {n}\n')
        paths.append(relative)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "bench@example.com")
    git(root, "config", "user.name", "bench")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "generated")
    return paths


def change_files(root: Path, paths: list[str], changed: int, new: int, tag: str) -> list[str]:
    """Modify ``changed - new`` tracked files spread over the repository and write ``new``
    untracked ones; returns the new files' paths."""
    step = max(1, len(paths) // (changed - new))
    for relative in paths[::step][: changed - new]:
        with (root / relative).open("a") as f:
            f.write(f"# changed in {tag}\n")
    added = [f"src/new/{tag}_{n:03d}.py" for n in range(new)]
    (root / "src" / "new").mkdir(exist_ok=True)
    for relative in added:
        (root / relative).write_text(f"# new in {tag}\n")
    return added


def reset_repo(root: Path) -> None:
    """Back to the commit: tracked files restored, untracked ones removed (untimed)."""
    git(root, "checkout", "-q", "--", ".")
    git(root, "clean", "-qfd")


# --------------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------------


def render(header: list[str], body: list[list[str]], left: tuple[int, ...] = (0,)) -> str:
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, body)])


def verdict(passed: bool) -> str:
    return "smoke" if SMOKE else "PASS" if passed else "FAIL"


@contextlib.contextmanager
def profiled(enabled: bool, title: str) -> Iterator[None]:
    """cProfile what runs inside, then print its top functions by cumulative time."""
    if not enabled:
        yield
        return
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        print(f"\n--- profile: {title} (top 25 by cumulative time) ---")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative").print_stats(25)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


# --------------------------------------------------------------------------------------------
# 1 and 2 over stdio
# --------------------------------------------------------------------------------------------


@dataclass
class StdioResults:
    per_tool: dict[str, list[float]]
    per_tool_cpu: dict[str, list[float]]
    big_context: list[float]
    big_context_cpu: list[float]
    big_context_client_cpu: list[float]
    wire_names: dict[str, str]


async def measure_stdio(
    server: Server, project: Path, cycles: int, warmup: int, big_workflow: str, context_calls: int
) -> StdioResults:
    names = ("get_workflows", *TRACKER_TOOLS)
    samples: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    before = _children()
    async with server.client(project) as client:
        spawned = _children() - before
        pid = spawned.pop() if len(spawned) == 1 else None
        listed = {t.name for t in await client.list_tools()}
        wire = {"get_workflows": "get_workflows"}
        for name in TRACKER_TOOLS:
            # Served after deepwork, whose start_workflow it shares, the tracker's are prefixed.
            wire[name] = f"tracker_{name}" if f"tracker_{name}" in listed else name
        missing = [w for w in wire.values() if w not in listed]
        if missing:
            raise HarnessError(f"tools/list lacks {missing}; it has {sorted(listed)}")

        async def call(name: str, args: dict[str, Any], keep: bool) -> dict[str, Any]:
            cpu_before = server_cpu(pid)
            elapsed, data = await timed_call(client, wire[name], args)
            cpu_after = server_cpu(pid)
            if keep:
                samples[name].append(elapsed)
                if cpu_before is not None and cpu_after is not None:
                    cpu[name].append(cpu_after - cpu_before)
            return data

        for i in range(warmup + cycles):
            await _cycle(call, i, keep=i >= warmup)
            if i >= warmup and (i - warmup + 1) % max(1, cycles // 4) == 0:
                log(f"  cycles {i - warmup + 1}/{cycles}")

        big: list[float] = []
        big_cpu: list[float] = []
        client_cpu: list[float] = []  # this process: the client's share of each call
        for i in range(context_calls + 3):
            cpu_before, ours_before = server_cpu(pid), time.process_time()
            elapsed, data = await timed_call(
                client, wire["get_context"], {"workflow_id": big_workflow, "include": INCLUDE_ALL}
            )
            cpu_after, ours_after = server_cpu(pid), time.process_time()
            if i == 0:
                _check_big(data)
            if i >= 3:
                big.append(elapsed)
                client_cpu.append(ours_after - ours_before)
                if cpu_before is not None and cpu_after is not None:
                    big_cpu.append(cpu_after - cpu_before)
    return StdioResults(samples, cpu, big, big_cpu, client_cpu, wire)


async def _cycle(call: Any, i: int, keep: bool) -> None:
    data = await call("get_workflows", {}, keep)
    if not any(job.get("name") == JOB_NAME for job in data.get("jobs", [])):
        raise HarnessError(f"get_workflows does not list {JOB_NAME}: {json.dumps(data)[:300]}")
    wf = (await call("start_workflow", {"name": f"cycle {i}", "objective": "time it"}, keep))[
        "workflow_id"
    ]
    phase = (await call("start_phase", {"workflow_id": wf, "number": 1, "name": "Build"}, keep))[
        "phase_id"
    ]
    task = (
        await call(
            "start_task",
            {"workflow_id": wf, "name": "Build it", "goal": "a working thing", "phase": 1},
            keep,
        )
    )["task_id"]
    await call(
        "log_decision",
        {
            "task_id": task,
            "category": "architecture",
            "question": "One process or two?",
            "options_considered": ["one", "two"],
            "chosen": "one",
            "reasoning": "fewer moving parts",
        },
        keep,
    )
    await call(
        "log_issue",
        {
            "task_id": task,
            "type": "unclear_requirement",
            "description": "Which format?",
            "resolution": "asked",
            "requires_human_review": True,
        },
        keep,
    )
    await call("log_milestone", {"task_id": task, "message": "half way", "progress": 50}, keep)
    context = await call("get_context", {"workflow_id": wf, "include": INCLUDE_ALL}, keep)
    if context.get("decisions_count") != 1 or context.get("blockers_count") != 1:
        raise HarnessError(f"get_context misses this cycle's logs: {json.dumps(context)[:300]}")
    done = await call(
        "complete_task",
        {"task_id": task, "status": "success", "outcome": {"summary": "built"}},
        keep,
    )
    if done.get("status") != "success":
        raise HarnessError(f"complete_task: {json.dumps(done)[:300]}")
    await call("complete_phase", {"phase_id": phase}, keep)
    await call(
        "complete_workflow", {"workflow_id": wf, "status": "completed", "summary": "done"}, keep
    )


def _check_big(data: dict[str, Any]) -> None:
    if (
        data.get("decisions_count") != CONTEXT_ROWS
        or data.get("milestones_count") != CONTEXT_ROWS
        or len(data.get("decisions", [])) != 50
    ):
        raise HarnessError(
            f"get_context on the seeded workflow: {json.dumps(data)[:300]} (expected "
            f"{CONTEXT_ROWS} decisions and milestones, a first page of 50)"
        )


# --------------------------------------------------------------------------------------------
# 2 and 3 in process
# --------------------------------------------------------------------------------------------


def measure_context_server(
    project: Any, small: str, big: str, calls: int, profile: bool
) -> dict[str, Any]:
    queries = {
        SMALL_CONTEXT_ROWS: context_queries(project=project, workflow_id=small),
        CONTEXT_ROWS: context_queries(project=project, workflow_id=big),
    }
    for _ in range(5):
        context_first_page(project=project, workflow_id=big)
    samples = []
    with profiled(profile, f"get_context first page, {CONTEXT_ROWS:,} rows, server side"):
        for _ in range(calls):
            elapsed, _answer = timed(lambda: context_first_page(project=project, workflow_id=big))
            samples.append(elapsed)
    return {"queries": queries, "samples": samples}


def measure_git(
    project: Any, agent: Any, repo: Path, paths: list[str], iterations: int, profile: bool
) -> dict[str, list[float]]:
    from tracker import services as tracker

    workflow = tracker.tracked_workflow_start(project=project, agent=agent, name="files bench")
    out: dict[str, list[float]] = {"start_task": [], "complete_task": [], "pair": [], "git": []}

    def git_status() -> float:
        elapsed, _ = timed(lambda: git(repo, "status", "--porcelain"))
        return elapsed

    # Warm the OS cache and git's index once, untimed.
    git_status()
    with profiled(profile, "start_task + complete_task, 10,000-file repository"):
        for i in range(iterations + 1):
            t_start, started = timed(
                lambda i=i: tracker.task_start(
                    project=project,
                    agent=agent,
                    workflow_id=str(workflow.pk),
                    name=f"edit {i}",
                    goal="change 100 files",
                    root=repo,
                )
            )
            added = change_files(repo, paths, REPO_CHANGED, REPO_NEW, f"t{i}")
            # Alternate which goes first: the first to look after the edits refreshes git's
            # index for both.
            t_git = git_status() if i % 2 == 0 else None
            t_complete, done = timed(
                lambda started=started: tracker.task_complete(
                    project=project,
                    agent=agent,
                    task_id=str(started.task.pk),
                    status="success",
                    summary="changed",
                    root=repo,
                )
            )
            if t_git is None:
                t_git = git_status()
            files = done.files.as_dict()
            if (
                len(files["modified"]) != REPO_CHANGED - REPO_NEW
                or sorted(files["added"]) != added
                or files["deleted"]
            ):
                raise HarnessError(
                    f"complete_task reported {json.dumps(files)[:400]}; expected "
                    f"{REPO_CHANGED - REPO_NEW} modified and {REPO_NEW} added"
                )
            reset_repo(repo)
            if i == 0:
                continue  # the first iteration warms up
            out["start_task"].append(t_start)
            out["complete_task"].append(t_complete)
            out["pair"].append(t_start + t_complete)
            out["git"].append(t_git)
    return out


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest run, for the test suite: a few rows and files, one call of each "
        "kind, no target (fails only on an error)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--profile", action="store_true", help="cProfile the in-process parts")
    parser.add_argument(
        "--database-url", help="a throwaway database for both sides (default: SQLite in a temp dir)"
    )
    args = parser.parse_args(argv)
    # cycles, warm-up cycles, get_context calls (server and stdio), git iterations
    args.cycles, args.warmup, args.context_calls, args.git_iterations = (
        (1, 0, 1, 1) if args.smoke else (15, 3, 40, 8) if args.quick else (60, 5, 200, 30)
    )
    if args.smoke:
        _shrink()
    return args


def _shrink() -> None:
    """The smoke run's sizes: a first page of ``get_context`` still full (50 rows)."""
    global SMOKE, CONTEXT_ROWS, SMALL_CONTEXT_ROWS, REPO_FILES, REPO_CHANGED, REPO_NEW
    SMOKE = True
    CONTEXT_ROWS, SMALL_CONTEXT_ROWS, REPO_FILES, REPO_CHANGED, REPO_NEW = 60, 3, 200, 10, 2


def setup_django(var_dir: Path, database_url: str | None) -> dict[str, str]:
    """Point this process at the throwaway database, migrate it; the child's environment."""
    env = {"DEEPWORK_VAR_DIR": str(var_dir), "DEEPWORK_LOG_LEVEL": "WARNING"}
    if database_url:
        env["DATABASE_URL"] = database_url
    else:
        os.environ.pop("DATABASE_URL", None)
        migrated.copy_into(var_dir)
    os.environ.update(env)
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deepwork_site.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return env


def run(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    env = setup_django(base / "var", args.database_url)
    from django.db import connection

    from workflows.services.agents import agent_ensure
    from workflows.services.projects import project_ensure

    project_dir = make_project(base / "project", [JOB_NAME]).resolve()
    git(project_dir, "init", "-q", "-b", "main")
    git(project_dir, "add", "-A")
    git(project_dir, "-c", "user.name=b", "-c", "user.email=b@example.com", "commit", "-qm", "j")
    project = project_ensure(root_path=project_dir)
    seeder = agent_ensure(project=project, agent_id="bench-seeder")

    log(f"seeding {SMALL_CONTEXT_ROWS} and {CONTEXT_ROWS:,} decisions + milestones ...")
    elapsed, small = timed(
        lambda: seed_context(project=project, agent=seeder, rows=SMALL_CONTEXT_ROWS)
    )
    elapsed, big = timed(lambda: seed_context(project=project, agent=seeder, rows=CONTEXT_ROWS))
    log(f"  seeded in {elapsed:.1f} s")
    if connection.vendor == "postgresql":
        # Autovacuum analyses 20k new rows within a minute on a live database; until then the
        # planner has no statistics and sorts a whole list for its first page.
        from tracker.models import Decision, Issue, Milestone, Task

        tables = ", ".join(m._meta.db_table for m in (Decision, Milestone, Issue, Task))
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {tables}")
    log(f"get_context server side: {args.context_calls} first pages")
    context = measure_context_server(
        project, str(small.pk), str(big.pk), args.context_calls, args.profile
    )
    connection.close()  # the stdio server writes to the same database meanwhile

    server = Server(
        key="ours",
        label="ours",
        command=str(OUR_PYTHON if OUR_PYTHON.exists() else Path(sys.executable)),
        args=[str(ROOT / "manage.py"), "mcpserve", "--toolsets", "deepwork,tracker"],
        env=env,
        log_file=base / "mcpserve.stderr.log",
    )
    log(f"stdio: {args.warmup} warm-up + {args.cycles} cycles, then {args.context_calls} big pages")
    stdio = asyncio.run(
        measure_stdio(
            server, project_dir, args.cycles, args.warmup, str(big.pk), args.context_calls
        )
    )

    log(f"git: generating a repository of {REPO_FILES:,} files ...")
    repo = (base / "repo").resolve()
    paths = make_repo(repo, REPO_FILES)
    repo_project = project_ensure(root_path=repo)
    repo_agent = agent_ensure(project=repo_project, agent_id="bench-files")
    log(f"git: {args.git_iterations} start_task + complete_task with {REPO_CHANGED} changes")
    files = measure_git(repo_project, repo_agent, repo, paths, args.git_iterations, args.profile)
    return {"context": context, "stdio": stdio, "files": files}


def report(measured: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    stdio: StdioResults = measured["stdio"]
    rows: dict[str, Any] = {}
    failed: list[str] = []

    # 1. Per tool.
    base_p50 = summarize(stdio.per_tool["get_workflows"])["p50_ms"]
    body = []
    for name in ("get_workflows", *TRACKER_TOOLS):
        s = summarize(stdio.per_tool[name])
        cpu = stdio.per_tool_cpu[name]
        cpu_p50 = summarize(cpu)["p50_ms"] if cpu else float("nan")
        ratio = s["p50_ms"] / base_p50
        held = name in HELD_TO_GET_WORKFLOWS
        result = verdict(ratio <= LOG_RATIO) if held else "info"
        if result == "FAIL":
            failed.append(f"{name} p50 {ratio:.2f}x get_workflows")
        rows[f"stdio_{name}"] = {**s, "cpu_p50_ms": cpu_p50, "ratio": ratio, "result": result}
        body.append(
            [
                stdio.wire_names[name],
                str(s["n"]),
                _ms(s["p50_ms"]),
                _ms(s["p95_ms"]),
                _ms(cpu_p50),
                f"{ratio:.2f}",
                f"<= {LOG_RATIO:g}" if held else "-",
                result,
            ]
        )
    print("\n1. Per tool over stdio (mcpserve --toolsets deepwork,tracker, one process)")
    print(
        render(
            ["tool", "n", "p50", "p95", "cpu p50", "/get_workflows", "target", "result"],
            body,
            left=(0, 6, 7),
        )
    )
    print("(ms; ratio = p50 / get_workflows p50; cpu = the server's CPU time per call)")

    # 2. get_context at scale.
    context = measured["context"]
    queries = context["queries"]
    constant = queries[SMALL_CONTEXT_ROWS] == queries[CONTEXT_ROWS]
    server = summarize(context["samples"])
    wire = summarize(stdio.big_context)
    wire_cpu = summarize(stdio.big_context_cpu)["p50_ms"] if stdio.big_context_cpu else None
    client_cpu = summarize(stdio.big_context_client_cpu)["p50_ms"]
    checks = [
        (
            f"queries, {SMALL_CONTEXT_ROWS} vs {CONTEXT_ROWS:,} rows",
            f"{queries[SMALL_CONTEXT_ROWS]} vs {queries[CONTEXT_ROWS]}",
            "equal",
            constant,
        ),
        (
            "first page p95, server (selector)",
            f"{_ms(server['p95_ms'])} (p50 {_ms(server['p50_ms'])}, n {server['n']})",
            f"< {CONTEXT_P95_MS:g} ms",
            server["p95_ms"] < CONTEXT_P95_MS,
        ),
        (
            "first page p95, over stdio",
            f"{_ms(wire['p95_ms'])} (p50 {_ms(wire['p50_ms'])}, n {wire['n']}"
            + (f", cpu p50 server {_ms(wire_cpu)}" if wire_cpu is not None else "")
            + f", client {_ms(client_cpu)})",
            f"< {CONTEXT_P95_MS:g} ms",
            wire["p95_ms"] < CONTEXT_P95_MS,
        ),
    ]
    rows["context_queries"] = {"by_rows": queries, "result": verdict(constant)}
    rows["context_server"] = {**server, "result": verdict(server["p95_ms"] < CONTEXT_P95_MS)}
    rows["context_stdio"] = {
        **wire,
        "cpu_p50_ms": wire_cpu,
        "client_cpu_p50_ms": client_cpu,
        "result": verdict(wire["p95_ms"] < CONTEXT_P95_MS),
    }
    print(
        f"\n2. get_context, every include, {CONTEXT_ROWS:,} decisions + {CONTEXT_ROWS:,} "
        "milestones in one workflow (first page, 50 rows per list)"
    )
    body = [[label, value, target, verdict(ok)] for label, value, target, ok in checks]
    print(render(["measure", "value", "target", "result"], body, left=(0, 2, 3)))
    failed += [f"get_context {label}" for label, _v, _t, ok in checks if not ok]

    # 3. Files.
    files = measured["files"]
    git_p50 = summarize(files["git"])["p50_ms"]
    body = []
    for key, label in (
        ("git", "git status --porcelain"),
        ("start_task", "start_task (service)"),
        ("complete_task", "complete_task (service)"),
        ("pair", "start_task + complete_task"),
    ):
        s = summarize(files[key])
        ratio = s["p50_ms"] / git_p50
        result = verdict(ratio <= GIT_RATIO) if key == "pair" else "info"
        if result == "FAIL":
            failed.append(f"start_task + complete_task {ratio:.2f}x git status")
        rows[f"files_{key}"] = {**s, "ratio": ratio, "result": result}
        target = f"<= {GIT_RATIO:g}" if key == "pair" else "-"
        body.append(
            [label, str(s["n"]), _ms(s["p50_ms"]), _ms(s["p95_ms"]), f"{ratio:.2f}", target, result]
        )
    print(
        f"\n3. A git repository of {REPO_FILES:,} files, {REPO_CHANGED} changed during each "
        f"task ({REPO_CHANGED - REPO_NEW} modified, {REPO_NEW} new)"
    )
    print(
        render(
            ["measure", "n", "p50", "p95", "/git status", "target", "result"],
            body,
            left=(0, 5, 6),
        )
    )
    return rows, failed


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    load_before = os.getloadavg()
    base = Path(tempfile.mkdtemp(prefix="tracker-bench-"))
    try:
        measured = run(args, base)
    except Exception as exc:
        traceback.print_exc()
        path = base / "mcpserve.stderr.log"
        if path.exists():
            tail = path.read_text(errors="replace").splitlines()[-15:]
            log("--- last lines of mcpserve.stderr.log ---\n" + "\n".join(tail))
        log(f"\nERROR: the tracker benchmark failed: {type(exc).__name__}: {exc}")
        log(f"(kept {base})")
        return 1
    if args.keep:
        log(f"kept {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)
    rows, failed = report(measured)
    after = os.getloadavg()
    if args.smoke:
        print(f"\nsmoke run: {len(rows)} rows measured; total {time.perf_counter() - t0:.0f} s")
        return 0
    BENCH_DIR.mkdir(exist_ok=True)
    RESULTS_JSON.write_text(
        json.dumps(
            {
                "quick": args.quick,
                "rows": rows,
                "loadavg_before": load_before,
                "loadavg_after": after,
                "total_seconds": time.perf_counter() - t0,
            },
            indent=2,
        )
        + "\n"
    )
    print(
        f"load average (1 min) before/after: {load_before[0]:.2f}/{after[0]:.2f} on "
        f"{os.cpu_count()} CPUs"
    )
    passed = sum(row.get("result") == "PASS" for row in rows.values())
    print(
        f"\n{passed} targets met, {len(failed)} missed"
        + (f" ({'; '.join(failed)})" if failed else "")
        + f"; total {time.perf_counter() - t0:.0f} s; results in {RESULTS_JSON.relative_to(ROOT)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
