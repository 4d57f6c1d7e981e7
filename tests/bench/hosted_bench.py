#!/usr/bin/env python
"""``make bench``: many agents over ``/mcp`` of the web server next to the same agents on stdio.

On a throwaway PostgreSQL database (and Redis for the live channel when it answers), each of
``--agents`` agents (default 50) runs one workflow of ``--steps`` steps (default 20) at the same
time: ``start_workflow`` then one ``finished_step`` per step. Twice, in the same run:

- **hosted**: every agent its own API token, all through ``/mcp`` of
  ``uvicorn deepwork_site.asgi:application --workers N`` (``--workers``, default 2), FastMCP
  clients in the 2026-07-28 era;
- **stdio**: every agent its own ``manage.py mcpserve`` process (the way agents run today).

Reported per mode: per-call p50/p95 of ``finished_step`` and of every call, wall time, errors,
and lost transitions (read back from the database: every session must be completed with one
finished step run per step). During the hosted run a watcher's dashboard live socket
(``/ws/events/`` of the same server) times every event from its writing to its arrival. The
server is stopped before the stdio run, so each mode has the machine and the database's
connections to itself. Missed targets do not fail the run; a broken harness does (exit 1).
Without PostgreSQL (``--database-url`` or a PostgreSQL ``DATABASE_URL``) it says so and exits 0.

``--smoke``, for the test suite: 2 agents x 2 steps, one web worker, on a throwaway SQLite
database unless PostgreSQL is named; no target, no results file, and it fails on any error or
lost transition.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import migrated  # the benchmarks' folder is the script's, first on the path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
MANAGE = str(ROOT / "manage.py")
JOB = "bench_hosted"
MODES = ("hosted", "stdio")

SETUP = """
import json, os
from pathlib import Path
from django.contrib.auth.models import Permission, User
from accounts.services import api_token_create
from workflows.services.projects import project_add
project = project_add(root_path=str(Path(os.environ["BENCH_PROJECT"]).resolve())).project
user = User.objects.create_user("bench")
user.user_permissions.add(Permission.objects.get(codename="drive_session"))
secrets = [
    api_token_create(user=user, name=f"agent {n}", mcp=True, mcp_project=project)[1]
    for n in range(int(os.environ["BENCH_AGENTS"]))
]
# A watcher's login, for the dashboard's live socket.
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
watcher = User.objects.create_user("watcher", password="bench-watcher-pw")
watcher.user_permissions.add(Permission.objects.get(codename="view_workflowsession"))
login = SessionStore()
login[SESSION_KEY] = str(watcher.pk)
login[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
login[HASH_SESSION_KEY] = watcher.get_session_auth_hash()
login.create()
print(json.dumps({"secrets": secrets, "session": login.session_key}))
"""

# Per session: its status and how many step runs it finished.
CHECK = """
import json
from django.db.models import Count, Q
from workflows.models import WorkflowSession
rows = WorkflowSession.objects.annotate(
    done=Count("runs", filter=Q(runs__status="completed"))
).values_list("agent__agent_id", "status", "done")
print(json.dumps([list(row) for row in rows]))
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def job_yml(steps: int) -> str:
    ids = [f"s{n}" for n in range(steps)]
    lines = [
        f"name: {JOB}",
        'version: "1.0.0"',
        'summary: "Many steps, no reviews"',
        'common_job_info_provided_to_all_steps_at_runtime: "bench"',
        "workflows:",
        "  - name: main",
        '    summary: "every step in turn"',
        f"    steps: [{', '.join(ids)}]",
        "steps:",
    ]
    for step in ids:
        lines += [
            f"  - id: {step}",
            f'    name: "{step}"',
            '    description: "a step"',
            f"    instructions_file: steps/{step}.md",
            "    outputs:",
            '      out.md: {type: file, description: "out", required: true}',
            "    reviews: []",
        ]
    return "\n".join(lines) + "\n"


def make_project(base: Path, steps: int) -> Path:
    project = base / "project"
    job = project / ".deepwork" / "jobs" / JOB
    (job / "steps").mkdir(parents=True)
    (job / "job.yml").write_text(job_yml(steps))
    for n in range(steps):
        (job / "steps" / f"s{n}.md").write_text(f"# s{n}\n")
    (project / "out.md").write_text("output\n")
    return project.resolve()


def redis_url() -> str | None:
    url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/14"
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port or 6379), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            if sock.recv(16).startswith(b"+PONG"):
                return url
    except OSError:
        pass
    return None


class Database:
    """A throwaway PostgreSQL database next to the one ``url`` names."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.psycopg = psycopg
        parts = urlsplit(url)
        self.name = f"deepwork_bench_hosted_{os.getpid()}"
        self.admin = urlunsplit(parts._replace(path="/postgres"))
        self.url = urlunsplit(parts._replace(path=f"/{self.name}"))

    def _run(self, sql: str) -> None:
        with self.psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(sql)

    def create(self) -> None:
        self._run(f'CREATE DATABASE "{self.name}"')

    def drop(self) -> None:
        self._run(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def manage(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [PYTHON, MANAGE, *args], env=env, cwd=ROOT, capture_output=True, text=True, input=stdin
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {args[0]} failed: {done.stderr[-2000:]}")
    return done.stdout


async def run_agent(client: Any, steps: int, timings: dict[str, list[float]]) -> None:
    calls = [("start_workflow", {"goal": "bench", "job_name": JOB, "workflow_name": "main"})]
    calls += [("finished_step", {"outputs": {"out.md": "out.md"}})] * steps
    for tool, args in calls:
        started = time.perf_counter()
        result = await client.call_tool(tool, args, raise_on_error=False)
        timings[tool].append(time.perf_counter() - started)
        if result.is_error:
            raise RuntimeError(f"{tool}: {result.content[0].text}")


class LiveWatcher:
    """A dashboard live socket (``/ws/events/``) logged in as a watcher, timing each event from
    its writing (``created_at``, just before its commit) to its arrival here."""

    def __init__(self, base: str, session_key: str) -> None:
        self.base, self.session_key = base, session_key
        self.latencies: list[float] = []
        self.task: asyncio.Task[None] | None = None

    async def _watch(self, ready: asyncio.Event) -> None:
        from datetime import datetime

        import websockets

        async with websockets.connect(
            self.base.replace("http://", "ws://") + "/ws/events/",
            additional_headers={"Cookie": f"sessionid={self.session_key}", "Origin": self.base},
            max_size=None,
        ) as socket:
            ready.set()
            async for raw in socket:
                arrived = time.time()
                message = json.loads(raw)
                for event in message.get("events", []):
                    written = datetime.fromisoformat(event["created_at"]).timestamp()
                    self.latencies.append(arrived - written)

    async def start(self) -> None:
        ready = asyncio.Event()
        self.task = asyncio.ensure_future(self._watch(ready))
        waiting = asyncio.ensure_future(ready.wait())
        await asyncio.wait({self.task, waiting}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        if not ready.is_set():
            waiting.cancel()
            if self.task.done():
                self.task.result()  # raises what the socket raised
            raise RuntimeError("the live socket did not open within 30 s")

    async def stop(self) -> dict[str, Any]:
        # Let the last events through, then close.
        await asyncio.sleep(1.0)
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        values = self.latencies
        return {
            "events": len(values),
            "p50_ms": statistics.median(values) * 1000 if values else None,
            "p95_ms": percentile(values, 95) * 1000 if values else None,
            "max_ms": max(values) * 1000 if values else None,
        }


async def run_mode(
    clients: list[Any], steps: int, watcher: LiveWatcher | None = None
) -> dict[str, Any]:
    """Connect every client first (a stdio server's start-up is not a call), then run all
    agents at once (with ``watcher`` on the dashboard's live socket meanwhile)."""
    timings: dict[str, list[float]] = {"start_workflow": [], "finished_step": []}
    connected = await asyncio.gather(
        *(client.__aenter__() for client in clients), return_exceptions=True
    )
    errors = [repr(outcome) for outcome in connected if isinstance(outcome, BaseException)]
    if watcher is not None:
        await watcher.start()
    ready = [
        client for client, outcome in zip(clients, connected, strict=True) if outcome is client
    ]
    started, cpu_before, own_before = (
        time.perf_counter(),
        servers_cpu_seconds(),
        time.process_time(),
    )
    outcomes = await asyncio.gather(
        *(run_agent(client, steps, timings) for client in ready), return_exceptions=True
    )
    wall, server_cpu = time.perf_counter() - started, servers_cpu_seconds() - cpu_before
    client_cpu = time.process_time() - own_before
    errors += [repr(outcome) for outcome in outcomes if isinstance(outcome, BaseException)]
    for client in ready:
        await client.__aexit__(None, None, None)
    live = await watcher.stop() if watcher is not None else None
    every = timings["start_workflow"] + timings["finished_step"]
    return {
        "live": live,
        "wall_s": wall,
        "server_cpu_ms_per_call": server_cpu * 1000 / max(1, len(every)),
        # The clients share this one process: its CPU per call bounds what it can send.
        "client_cpu_ms_per_call": client_cpu * 1000 / max(1, len(every)),
        "calls": len(every),
        "errors": errors,
        "p50_ms": statistics.median(every) * 1000 if every else None,
        "p95_ms": percentile(every, 95) * 1000 if every else None,
        "finished_step_p50_ms": statistics.median(timings["finished_step"]) * 1000
        if timings["finished_step"]
        else None,
        "finished_step_p95_ms": percentile(timings["finished_step"], 95) * 1000
        if timings["finished_step"]
        else None,
    }


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def servers_cpu_seconds() -> float:
    """CPU time so far of every process below this one (the servers, their workers), Linux."""
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
            cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total, todo = 0.0, list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo += children.get(pid, [])
    return total


def percentile(values: list[float], pct: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def lost_transitions(env: dict[str, str], prefix: str, agents: int, steps: int) -> int:
    """Steps not recorded as done, over the sessions of agents whose id starts with ``prefix``."""
    listed = json.loads(manage(env, "shell", "-c", CHECK).strip().splitlines()[-1])
    rows = [row for row in listed if row[0].startswith(prefix)]
    recorded = sum(done for _, status, done in rows if status == "completed")
    return agents * steps - recorded


def start_web(env: dict[str, str], port: int, workers: int) -> subprocess.Popen[bytes]:
    web = subprocess.Popen(
        [PYTHON, "-m", "uvicorn", "deepwork_site.asgi:application"]
        + ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
        + ["--log-level", "warning"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wait_port(web, port)
    return web


def wait_port(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"uvicorn exited: {process.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("uvicorn did not listen within 60 s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument(
        "--dashboard-process",
        action="store_true",
        help="serve the watcher's live socket from a web process of its own (same database and "
        "Redis) instead of the workers serving /mcp",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest run, for the test suite: 2 agents x 2 steps, one worker, SQLite "
        "unless PostgreSQL is named, no target (fails on any error or lost transition)",
    )
    options = parser.parse_args()
    postgres = options.database_url.startswith("postgres")
    if options.smoke:
        options.agents, options.steps, options.workers = 2, 2, 1
    elif not postgres:
        log("hosted bench: skipped, it needs PostgreSQL (--database-url or DATABASE_URL)")
        return 0

    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

    database = Database(options.database_url) if postgres else None
    redis = redis_url()
    results: dict[str, Any] = {"agents": options.agents, "steps": options.steps}
    with tempfile.TemporaryDirectory(prefix="deepwork-hosted-bench-") as base:
        project = make_project(Path(base), options.steps)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", "/tmp"),
            "DJANGO_SETTINGS_MODULE": "deepwork_site.settings",
            "SECRET_KEY": "bench-not-secret",
            "DEEPWORK_LOG_LEVEL": "WARNING",
            "DEEPWORK_VAR_DIR": str(Path(base) / "var"),
            "BENCH_PROJECT": str(project),
            "BENCH_AGENTS": str(options.agents),
        }
        if redis:
            env["REDIS_URL"] = redis
        copied = False
        if database is not None:
            env["DATABASE_URL"] = database.url
            database.create()
        else:
            copied = migrated.copy_into(Path(base) / "var")
        web = dashboard = None
        try:
            if not copied:
                manage(env, "migrate", "--noinput", "-v0")
            made = json.loads(manage(env, "shell", "-c", SETUP).strip().splitlines()[-1])
            secrets = made["secrets"]
            port = free_port()
            web = start_web(env, port, options.workers)
            live_port = port
            if options.dashboard_process:
                live_port = free_port()
                dashboard = start_web(env, live_port, 1)
            log(f"hosted: {options.agents} agents x {options.steps} steps over /mcp")
            hosted = [
                Client(
                    StreamableHttpTransport(
                        f"http://127.0.0.1:{port}/mcp",
                        headers={"Authorization": f"Bearer {secret}"},
                    ),
                    mode="auto",
                    timeout=300,
                )
                for secret in secrets
            ]
            watcher = LiveWatcher(f"http://127.0.0.1:{live_port}", made["session"])
            results["hosted"] = asyncio.run(run_mode(hosted, options.steps, watcher))
            results["hosted"]["lost_transitions"] = lost_transitions(
                env, "token-", options.agents, options.steps
            )
            # The stdio agents get the machine (and the database's connections) to themselves,
            # as the hosted ones had.
            for server in (web, dashboard):
                if server is not None:
                    server.terminate()
                    server.wait(timeout=30)
            web = dashboard = None
            log(f"stdio: {options.agents} agents x {options.steps} steps, one mcpserve each")
            stdio = [
                Client(
                    StdioTransport(
                        command=PYTHON,
                        args=[
                            MANAGE,
                            "mcpserve",
                            "--path",
                            str(project),
                            "--agent-id",
                            f"stdio-{n}",
                        ],
                        env=env,
                        cwd=str(project),
                    ),
                    mode="auto",
                    timeout=300,
                )
                for n in range(options.agents)
            ]
            results["stdio"] = asyncio.run(run_mode(stdio, options.steps))
            results["stdio"]["lost_transitions"] = lost_transitions(
                env, "stdio-", options.agents, options.steps
            )
        finally:
            for server in (web, dashboard):
                if server is not None:
                    server.terminate()
                    server.wait(timeout=30)
            if database is not None:
                database.drop()

    results["redis"] = bool(redis)
    results["dashboard_process"] = options.dashboard_process
    results["workers"] = options.workers
    print(
        f"\nHosted MCP: {options.agents} agents x {options.steps} steps, "
        f"{'PostgreSQL' if postgres else 'SQLite'}, "
        f"Redis {'on' if redis else 'off'}, {options.workers} uvicorn workers"
    )
    print(
        f"{'mode':8} {'p50 ms':>8} {'p95 ms':>8} {'finish p50':>11} {'finish p95':>11} "
        f"{'wall s':>7} {'srv CPU ms/call':>16} {'client CPU':>11} {'errors':>7} {'lost':>5}"
    )
    for mode in ("hosted", "stdio"):
        r = results[mode]
        print(
            f"{mode:8} {r['p50_ms']:8.1f} {r['p95_ms']:8.1f} {r['finished_step_p50_ms']:11.1f} "
            f"{r['finished_step_p95_ms']:11.1f} {r['wall_s']:7.1f} "
            f"{r['server_cpu_ms_per_call']:16.1f} {r['client_cpu_ms_per_call']:11.1f} "
            f"{len(r['errors']):7d} {r['lost_transitions']:5d}"
        )
    ratio = results["hosted"]["p50_ms"] / results["stdio"]["p50_ms"]
    held = ", not held: smoke" if options.smoke else ""
    print(f"hosted/stdio p50: {ratio:.2f} (target <= 1.5{held})")
    live = results["hosted"]["live"]
    if live and live["events"]:
        print(
            f"dashboard live socket during the hosted run "
            f"({'own process' if options.dashboard_process else 'on the /mcp workers'}): "
            f"{live['events']} events, "
            f"p50 {live['p50_ms']:.0f} ms, p95 {live['p95_ms']:.0f} ms, "
            f"max {live['max_ms']:.0f} ms (event written -> message received; "
            "target p95 < 200 ms with Redis)"
        )
    else:
        print("dashboard live socket during the hosted run: no events received")
    for mode in ("hosted", "stdio"):
        for error in results[mode]["errors"][:5]:
            print(f"{mode} error: {error}")
    if options.smoke:
        broken = any(results[m]["errors"] or results[m]["lost_transitions"] for m in MODES)
        return 1 if broken else 0
    out = ROOT / ".bench"
    out.mkdir(exist_ok=True)
    (out / "hosted_results.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:  # a broken harness, not a slow server
        log(f"hosted bench: harness error: {exc!r}")
        sys.exit(1)
