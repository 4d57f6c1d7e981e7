"""Benchmark: 32 concurrent agents executing a 500-step DAG workflow on PostgreSQL.

The DAG: a root, then four stages, each a wide fan-out (123-124 steps) followed by a fan-in
step that depends on the whole stage. 32 agents (threads spread over four processes, each
with its own database connection) loop the way an agent on ``await_assignment`` does: poll
for a held step every ``DEEPWORK_AGENT_POLL_SECONDS`` (the tool's query), read the
assignment (the tool's selector), report it completed (the tool's services: the report,
then the dispatch). Work takes no time, so the run measures the engine, not the agents. The
MCP transport is not part of this loop; e2e tests cover it.

Prints: completions per second; p50/p95/max from the report that completed a step's last
dependency to the poll of a *waiting* agent seeing the step; double assignments and lost
completions (both must be 0); the query count of ``get_workflow_details`` for 5 and 500 steps.
Usage: .venv/bin/python tests/bench/dag_bench.py [--database-url URL] [--agents 32] [--smoke]
``--smoke``, for the test suite: 8 steps, 4 agents in 2 processes, on a throwaway SQLite
database unless ``--database-url`` names a PostgreSQL one (made anew, dropped at the end); it
fails on a double assignment or a lost completion as the full run does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import migrated  # the benchmarks' folder is the script's, first on the path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/deepwork_dag_bench"
STAGES = (124, 124, 124, 123)


def steps() -> list[dict]:
    out: list[dict] = [{"step_id": "root", "description": "start", "assigned_role": "lead"}]
    previous = "root"
    for stage, width in enumerate(STAGES):
        fan = [f"s{stage}_{n:03}" for n in range(width)]
        out += [
            {"step_id": s, "description": "work", "assigned_role": "swe", "depends_on": [previous]}
            for s in fan
        ]
        previous = f"join{stage}"
        out.append(
            {
                "step_id": previous,
                "description": "merge",
                "assigned_role": "lead",
                "depends_on": fan,
            }
        )
    return out


def fresh_database(url: str) -> None:
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str) -> None:
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_django(url: str) -> None:
    """On the database ``url``; an empty one: the SQLite database of DEEPWORK_VAR_DIR."""
    if url:
        os.environ["DATABASE_URL"] = url
    else:
        os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deepwork_site.settings")
    os.environ.setdefault("DEEPWORK_LOG_LEVEL", "WARNING")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def worker(url: str, workflow_id: str, agent_ids: list[str]) -> None:
    """Agents of one process: each a thread polling, reading and reporting as the tools do.
    Prints JSON: when each report released steps, and when a waiting agent saw each step."""
    setup_django(url)
    from django.conf import settings
    from django.db import connections

    from dag import selectors
    from dag import services as dag
    from workflows.db import retrying_when_busy
    from workflows.models import Agent, WorkflowSession

    poll = float(settings.DEEPWORK_AGENT_POLL_SECONDS)
    lock = threading.Lock()
    released: dict[str, float] = {}
    sightings: list[tuple[str, float, float | None]] = []
    completions = 0
    stop = threading.Event()

    def done() -> bool:
        return (
            WorkflowSession.objects.filter(session_id=workflow_id)
            .exclude(status="running")
            .exists()
        )

    def agent_loop(agent: Agent) -> None:
        nonlocal completions
        project = agent.project
        waiting_since: float | None = None
        checks = 0
        try:
            while not stop.is_set():
                if not selectors.dag_has_assignment(agent_pk=agent.pk):
                    if waiting_since is None:
                        waiting_since = time.time()
                    checks += 1
                    if checks % 20 == 0 and done():
                        stop.set()
                    time.sleep(poll)
                    continue
                seen = time.time()
                held = selectors.dag_assignments(agent=agent)
                with lock:
                    sightings.extend((a["step_id"], seen, waiting_since) for a in held)
                waiting_since = None
                for assignment in held:
                    report = retrying_when_busy(
                        lambda a=assignment: dag.dag_report_completion(
                            project=project,
                            workflow_id=a["workflow_id"],
                            step_id=a["step_id"],
                            agent_id=agent.agent_id,
                            result={"by": agent.agent_id},
                        )
                    )()
                    now = time.time()
                    with lock:
                        completions += 1
                        for delegation in report.advance.delegated:
                            released[delegation.step_id] = now
                    retrying_when_busy(lambda: dag.dag_dispatch(project=project))()
                    if report.status != "running":
                        stop.set()
        finally:
            connections.close_all()

    agents = list(Agent.objects.select_related("project").filter(agent_id__in=agent_ids))
    connections.close_all()
    threads = [threading.Thread(target=agent_loop, args=(a,)) for a in agents]
    for thread in threads:
        thread.start()
    print("ready", flush=True)
    for thread in threads:
        thread.join()
    print(json.dumps({"released": released, "sightings": sightings, "completions": completions}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None, help=f"default: {DEFAULT_URL}")
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--processes", type=int, default=4, help="agent processes")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest run, for the test suite: 8 steps, 4 agents, SQLite unless "
        "--database-url is given",
    )
    args = parser.parse_args()
    if args.worker:
        worker(args.database_url, args.worker[0], args.worker[1:])
        return 0
    global STAGES
    if args.smoke:
        STAGES = (3, 2)
        args.agents, args.processes = 4, 2
        args.database_url = args.database_url or ""
        var_dir = Path(tempfile.mkdtemp(prefix="dag-bench-smoke-")) / "var"
        os.environ["DEEPWORK_VAR_DIR"] = str(var_dir)  # the workers' too
        migrated.copy_into(var_dir)
    elif args.database_url is None:
        args.database_url = os.environ.get("DAG_BENCH_DATABASE_URL", DEFAULT_URL)
    try:
        return run(args)
    finally:
        if args.smoke and args.database_url:
            drop_database(args.database_url)


def run(args: argparse.Namespace) -> int:
    if args.database_url:
        fresh_database(args.database_url)
    setup_django(args.database_url)
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from dag import selectors
    from dag import services as dag
    from workflows.models import Event, Project, StepRun, WorkflowSession

    call_command("migrate", verbosity=0)
    poll = float(settings.DEEPWORK_AGENT_POLL_SECONDS)
    project = Project.objects.create(root_path=str(ROOT / ".bench" / "dag"), name="dag bench")
    agent_ids = [f"agent{n:02}" for n in range(args.agents)]
    for n, agent_id in enumerate(agent_ids):
        roles = ["swe", "lead"] if n < 4 else ["swe"]
        dag.dag_agent_register(project=project, agent_id=agent_id, roles=roles)
    plan = steps()
    job = dag.dag_define(
        project=project, creator_id="bench", name="bench", description="", steps=plan
    ).job
    wid = job.dir_name

    workers = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--database-url",
                args.database_url,
                "--worker",
                wid,
                *agent_ids[n :: args.processes],
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(args.processes)
    ]
    for process in workers:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
    started = time.time()
    first = dag.dag_execute(project=project, workflow_id=wid, triggering_agent_id="bench")
    released = {d.step_id: time.time() for d in first.delegated}
    sightings: list[tuple[str, float, float | None]] = []
    completions = 0
    for process in workers:
        out, _ = process.communicate(timeout=900)
        data = json.loads(out.strip().splitlines()[-1])
        released.update(data["released"])
        sightings += [tuple(s) for s in data["sightings"]]
        completions += data["completions"]
    session = WorkflowSession.objects.get(session_id=wid)
    assert session.completed_at is not None
    elapsed = session.completed_at.timestamp() - started

    # Only steps that reached an agent already waiting when they were released.
    latencies = sorted(
        seen - released[step]
        for step, seen, waiting in sightings
        if step in released and waiting is not None and waiting <= released[step]
    )
    assigned = Counter(
        e.payload["step_id"]
        for e in Event.objects.filter(session__session_id=wid, kind=Event.Kind.DAG_STEP_ASSIGNED)
    )
    doubles = sum(1 for count in assigned.values() if count > 1)
    completed_runs = StepRun.objects.filter(session__session_id=wid, status="completed").count()
    completed_events = Event.objects.filter(
        session__session_id=wid, kind=Event.Kind.DAG_STEP_COMPLETED
    ).count()
    small = dag.dag_define(
        project=project, creator_id="bench", name="small", description="", steps=plan[:5]
    ).job
    dag.dag_execute(project=project, workflow_id=small.dir_name, triggering_agent_id="bench")
    query_counts = []
    for each in (small, job):
        with CaptureQueriesContext(connection) as queries:
            selectors.dag_details(job=each)
        query_counts.append(len(queries))

    print(
        f"DAG bench: {len(plan)} steps, {args.agents} agents in {args.processes} processes, "
        f"{'PostgreSQL' if connection.vendor == 'postgresql' else 'SQLite'}, "
        f"poll {poll * 1000:.0f} ms"
    )
    print(f"  workflow status           {session.status}")
    print(f"  wall time                 {elapsed:.2f} s")
    print(f"  completions per second    {completions / elapsed:.1f}")
    if latencies:
        p95 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))]
        print(
            f"  release -> waiting agent  p50 {statistics.median(latencies) * 1000:.1f} ms, "
            f"p95 {p95 * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms (n={len(latencies)})"
        )
    print(f"  double assignments        {doubles}")
    print(f"  lost completions          {len(plan) - completed_runs} (events: {completed_events})")
    print(
        f"  get_workflow_details      {query_counts[0]} queries (5 steps), "
        f"{query_counts[1]} ({len(plan)} steps)"
    )
    ok = (
        doubles == 0
        and completed_runs == len(plan)
        and completed_events == len(plan)
        and session.status == "completed"
        and query_counts[0] == query_counts[1]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
