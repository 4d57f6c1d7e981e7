"""Benchmark: a transition costs the same after 20,000 sessions of history as on a new database.

A stdio ``mcpserve`` runs ``make bench``'s cycle (get_workflows, start_workflow, finished_step,
abort_workflow) on a one-job project, measuring each call's latency and the server's CPU
(every thread). Then the database gets ``--sessions`` ended sessions, each with a completed
step run, for the server's agent and as many for a second agent of the same project, all
older than any session measured; the same cycles run again. A read through the agent's or the
project's whole history (the top of the stack, other agents' work during a step) shows here as
a cost that grows with that history.

Target: for each call, p50 after / p50 before <= 1.25, for latency and server CPU.

Usage: .venv/bin/python tests/bench/history_bench.py [--sessions N] [--cycles N]
       [--database-url postgres://...] [--smoke]
Missed targets are reported, not failed (this is a measurement); exit 1 only if the harness
breaks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests" / "bench") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests" / "bench"))

import run_bench  # noqa: E402  (the same servers, fixture, client and cycle as make bench)

TARGET = 1.25
TOOLS = ("start_workflow", "finished_step", "abort_workflow")
CYCLE = ("get_workflows", *TOOLS)


def fill(sessions: int) -> str:
    """In the server's database (run in a process of its own, with its settings): ``sessions``
    ended sessions with a completed run each, for every agent of the project, dated before
    anything measured. A second agent is added first so other agents' work has a history too."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deepwork_site.settings")
    django.setup()
    from django.db import connection

    from tests.support.history import add_ended_sessions
    from workflows.models import Agent, StepRun, WorkflowSession
    from workflows.services.agents import agent_ensure

    template = WorkflowSession.objects.order_by("id").first()
    if template is None:
        raise SystemExit("no session to copy: run some cycles first")
    agent_ensure(project=template.project, agent_id="history-helper")
    for agent in Agent.objects.filter(project_id=template.project_id):
        add_ended_sessions(template=template, agent=agent, count=sessions, days=3)
    if connection.vendor == "postgresql":
        # What autovacuum does within a minute of such a load: the planner then knows how
        # many rows the tables hold (SQLite's plans do not depend on statistics here).
        with connection.cursor() as cursor:
            for model in (WorkflowSession, StepRun):
                cursor.execute(f"ANALYZE {model._meta.db_table}")
    return f"{WorkflowSession.objects.count()} sessions, {StepRun.objects.count()} step runs"


async def cycles(client: Any, pid: int | None, n: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {name: [] for tool in CYCLE for name in (tool, f"{tool}_cpu")}
    for _ in range(n):
        await run_bench._cycle(client, "ours", out, pid)
    return out


async def measure(args: argparse.Namespace, base: Path) -> tuple[dict, dict, str]:
    server = run_bench.make_servers(base, ROOT, args.database_url)["ours"]
    project = run_bench.make_project(base / "ours" / "one_job", [run_bench.JOB_NAME])
    async with contextlib.AsyncExitStack() as stack:
        before_children = run_bench._children()
        client = await stack.enter_async_context(server.client(project))
        spawned = run_bench._children() - before_children
        pid = spawned.pop() if len(spawned) == 1 else None
        await cycles(client, None, args.warmup)
        run_bench.log(f"history: {args.cycles} cycles on a new database")
        before = await cycles(client, pid, args.cycles)
        run_bench.log(f"history: adding {args.sessions} ended sessions per agent ...")
        started = time.perf_counter()
        # The server waits meanwhile; nothing else runs on this loop.
        proc = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, __file__, "--fill", str(args.sessions)],
            env={**run_bench._clean_env(), **server.env},
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise run_bench.HarnessError(f"filling the history failed:\n{proc.stderr[-2000:]}")
        filled = f"{proc.stdout.strip()} ({time.perf_counter() - started:.0f} s to add)"
        run_bench.log(f"history: now {filled}; {args.cycles} cycles again")
        await cycles(client, None, args.warmup)
        after = await cycles(client, pid, args.cycles)
    return before, after, filled


def report(before: dict, after: dict) -> list[str]:
    lines = [
        f"{'call':34s} {'before p50':>11s} {'after p50':>10s} {'after/before':>13s}  target",
    ]
    missed = []
    for tool in TOOLS:
        for metric, label in ((tool, tool), (f"{tool}_cpu", f"{tool}, server CPU")):
            b = statistics.median(before[metric]) * 1e3
            a = statistics.median(after[metric]) * 1e3
            ratio = a / b
            verdict = "PASS" if ratio <= TARGET else "FAIL"
            if verdict == "FAIL":
                missed.append(label)
            lines.append(
                f"{label:34s} {b:9.2f}ms {a:8.2f}ms {ratio:13.3f}  <= {TARGET:g} {verdict}"
            )
    lines.append(
        f"{len(TOOLS) * 2 - len(missed)} targets met, {len(missed)} missed"
        + (f" ({', '.join(missed)})" if missed else "")
    )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20_000, help="ended sessions per agent")
    parser.add_argument("--cycles", type=int, default=150, help="cycles before and after")
    parser.add_argument("--database-url", default=None, metavar="URL")
    parser.add_argument("--fill", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest run, for the test suite: 20 sessions, 2 cycles before and after, "
        "no target",
    )
    args = parser.parse_args()
    args.warmup = 5  # untimed cycles before each timed series
    if args.smoke:
        args.sessions, args.cycles, args.warmup = 20, 2, 1
    if args.fill is not None:
        sys.path.insert(0, str(ROOT))
        print(fill(args.fill))
        return 0
    base = Path(tempfile.mkdtemp(prefix="deepwork-history-bench-"))
    try:
        before, after, filled = asyncio.run(measure(args, base))
    except run_bench.HarnessError as exc:
        run_bench.log(f"ERROR: {exc}")
        return 1
    print(f"\nA transition before and after the history ({filled}); SQLite unless a URL is given")
    print("\n".join(report(before, after)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
