#!/usr/bin/env python
"""``make bench``: compare deepwork-server's ``mcpserve`` with DeepWork 0.9.1's ``deepwork serve``.

Both servers run as stdio subprocesses on identical fixture projects and are driven by the same
client code (this venv's FastMCP client, legacy initialize handshake: the 0.9.1 server on
FastMCP 2.14.5 predates the 2026-07-28 protocol era). Measured, per server:

- cold start: spawn to the first ``tools/list`` answer, a fresh process each run; and, for
  information, spawn to the answer of the ``get_workflows`` call sent right after it;
- per-call latency of ``get_workflows``, ``start_workflow``, ``finished_step`` and
  ``abort_workflow`` on a one-job project, in get -> start -> finish -> abort cycles;
- ``get_workflows`` on a project with 200 jobs (steady state; plus, for information, the very
  first call and the first call of a new process).

Times are what the client sees, so they include the client's own work (e.g. the MCP SDK checks
``structuredContent`` against each tool's advertised ``outputSchema``). On Linux the per-call
cycles also record each server's CPU time per call (all its threads, read from ``/proc`` between
calls, outside the timed window): unlike latency it hardly moves with the machine's load, so it
tells a slower server from a busier machine. Every step has
``reviews: []``, so neither server runs a quality gate. Ours uses a throwaway SQLite database
(``DEEPWORK_VAR_DIR``), migrated before timing. ``--ours-root DIR`` benchmarks another checkout.

The two servers are interleaved (alternating order) to reduce drift. Results go to stdout as a
table and to ``.bench/results.json``. Missed targets do not fail the run (this is a measurement);
a broken harness does (exit 1), and so does a failed install of the reference (exit 2).

The reference is installed once into ``.bench/deepwork-0.9.1`` with the dependency versions 0.9.1
was released and tested with (``fastmcp==2.14.5``, ``mcp==1.26.0``), and reused afterwards.

A second peer, DeepWork 0.14.0 (``.bench/deepwork-0.14.0``: ``fastmcp==3.2.0``, ``mcp==1.26.0``,
its lock file's versions), runs a 0.14-format job against ``mcpserve --generation 0.14`` and
``--generation both``, in the same run and with the same client: cold start, then cycles of
``get_workflows``, ``start_workflow`` (``session_id`` and ``inputs``), ``finished_step``,
``go_to_step`` and ``abort_workflow``, each cycle in a fresh conversation. The three servers take
turns going first. ``--peer 0.9.1|0.14`` runs one peer only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests" / "bench") not in sys.path:  # also when imported as tests.bench.run_bench
    sys.path.insert(0, str(ROOT / "tests" / "bench"))

import migrated  # noqa: E402  (the smoke runs' migrated database)

BENCH_DIR = ROOT / ".bench"
REF_VENV = BENCH_DIR / "deepwork-0.9.1"
REF_PINS = {"deepwork": "0.9.1", "fastmcp": "2.14.5", "mcp": "1.26.0"}
REF_INSTALL_LOG = BENCH_DIR / "deepwork-0.9.1-install.log"
# The second peer: DeepWork 0.14.0 with the dependency versions of its own lock file.
REF014_VENV = BENCH_DIR / "deepwork-0.14.0"
REF014_PINS = {"deepwork": "0.14.0", "fastmcp": "3.2.0", "mcp": "1.26.0"}
REF014_INSTALL_LOG = BENCH_DIR / "deepwork-0.14.0-install.log"
RESULTS_JSON = BENCH_DIR / "results.json"
OUR_PYTHON = ROOT / ".venv" / "bin" / "python"
CALL_TIMEOUT = 120.0  # seconds; generous, a call this slow is a broken harness anyway

JOB_NAME = "bench_job"
WORKFLOW_NAME = "main"
STEPS = ("gather", "draft", "publish")
MANY_JOBS = 200

# Targets: metric -> (bound on ours/theirs p50, strict "<" or "<="). Server CPU per call has
# the same bound as the call's latency: a server that is only fast on an idle machine is not.
TARGETS: dict[str, tuple[float, str]] = {
    "cold_start": (0.85, "<="),
    "cold_start_cpu": (0.85, "<="),
    "get_workflows": (0.1, "<="),
    "get_workflows_cpu": (0.1, "<="),
    "start_workflow": (0.6, "<="),
    "start_workflow_cpu": (0.6, "<="),
    "finished_step": (0.6, "<="),
    "finished_step_cpu": (0.6, "<="),
    "abort_workflow": (0.75, "<="),
    "abort_workflow_cpu": (0.75, "<="),
    "get_workflows_200_jobs": (0.02, "<="),
}
LABELS = {
    "cold_start": "cold start (spawn -> tools/list)",
    "cold_start_cpu": "cold start, server CPU",
    "first_answer": "first answer (spawn -> get_workflows)",
    "get_workflows": "get_workflows (1 job)",
    "start_workflow": "start_workflow",
    "finished_step": "finished_step",
    "abort_workflow": "abort_workflow",
    "get_workflows_cpu": "get_workflows, server CPU",
    "start_workflow_cpu": "start_workflow, server CPU",
    "finished_step_cpu": "finished_step, server CPU",
    "abort_workflow_cpu": "abort_workflow, server CPU",
    "get_workflows_200_jobs": "get_workflows (200 jobs)",
    "get_workflows_200_jobs_first": "get_workflows (200 jobs), 1st call ever",
    "get_workflows_200_jobs_new_process": "get_workflows (200 jobs), new process",
}
PER_CALL_METRICS = tuple(
    f"{tool}{cpu}"
    for tool in ("get_workflows", "start_workflow", "finished_step", "abort_workflow")
    for cpu in ("", "_cpu")
)
TRANSITIONS = ("start_workflow", "finished_step", "abort_workflow")


def _metric_key(metric: str, fixture: str) -> str:
    """A per-call metric's key for ``fixture`` (the main fixture's keys carry no suffix)."""
    return metric if fixture == MAIN_FIXTURE else f"{metric}@{fixture}"


def _split_key(key: str) -> tuple[str, str]:
    metric, _, fixture = key.partition("@")
    return metric, fixture or MAIN_FIXTURE


def _target(key: str) -> tuple[float, str] | None:
    """A metric's target: every one on the main fixture, the transitions' on every git fixture,
    none on the folder without git (shown for information)."""
    metric, fixture = _split_key(key)
    if fixture == MAIN_FIXTURE:
        return TARGETS.get(metric)
    if PER_CALL_FIXTURES[fixture][1] and metric.removesuffix("_cpu") in TRANSITIONS:
        return TARGETS.get(metric)
    return None


def _label(key: str) -> str:
    metric, fixture = _split_key(key)
    if metric not in PER_CALL_METRICS:
        return LABELS[metric]
    return f"{LABELS[metric]} [{PER_CALL_FIXTURES[fixture][0]}]"


def _row_keys() -> list[str]:
    """Every metric, in table order: per-call metrics fixture by fixture."""
    keys = [m for m in LABELS if m not in PER_CALL_METRICS]
    at = keys.index("get_workflows_200_jobs")
    per_call = [_metric_key(m, f) for f in PER_CALL_FIXTURES for m in PER_CALL_METRICS]
    return keys[:at] + per_call + keys[at:]


class HarnessError(Exception):
    """The benchmark itself could not run as intended."""


class InstallError(Exception):
    """The pinned reference install failed."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Reference install
# --------------------------------------------------------------------------------------------


def _ref_versions(venv: Path = REF_VENV, pins: dict[str, str] = REF_PINS) -> dict[str, str] | None:
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    probe = (
        "import importlib.metadata as m, json\n"
        "out = {}\n"
        f"for name in {sorted(pins)!r}:\n"
        "    try:\n"
        "        out[name] = m.version(name)\n"
        "    except m.PackageNotFoundError:\n"
        "        out[name] = None\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        return None


def ensure_reference(
    venv: Path = REF_VENV, pins: dict[str, str] = REF_PINS, install_log: Path = REF_INSTALL_LOG
) -> dict[str, str]:
    """Install a deepwork release with its pinned deps into .bench/ (or reuse a good install)."""
    versions = _ref_versions(venv, pins)
    deepwork_bin = venv / "bin" / "deepwork"
    if versions == pins and deepwork_bin.exists():
        log(f"reference: reusing {venv.relative_to(ROOT)} ({_fmt_pins(versions, pins)})")
        return versions

    BENCH_DIR.mkdir(exist_ok=True)
    if versions is None and venv.exists():
        log(f"reference: {venv.relative_to(ROOT)} is broken; recreating it")
        shutil.rmtree(venv)
    elif versions is not None:
        log(
            f"reference: found {_fmt_pins(versions, pins)}, want {_fmt_pins(pins, pins)}; "
            "reinstalling"
        )

    specs = [f"{name}=={version}" for name, version in pins.items()]
    log(f"reference: installing {' '.join(specs)} into {venv.relative_to(ROOT)} ...")
    steps = []
    if not (venv / "bin" / "python").exists():
        steps.append([sys.executable, "-m", "venv", str(venv)])
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    steps.append([*pip, "install", "--quiet", "--upgrade", "pip"])
    steps.append([*pip, "install", *specs])
    with install_log.open("w") as out:
        for cmd in steps:
            out.write(f"$ {' '.join(cmd)}\n")
            out.flush()
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
            if proc.returncode != 0:
                tail = install_log.read_text().splitlines()[-25:]
                raise InstallError(
                    f"`{' '.join(cmd)}` exited {proc.returncode}.\n"
                    "The pinned reference (" + " ".join(specs) + ") could not be installed, so "
                    "there is nothing to compare against. Last lines of "
                    f"{install_log.relative_to(ROOT)}:\n    " + "\n    ".join(tail)
                )
    versions = _ref_versions(venv, pins)
    if versions != pins or not deepwork_bin.exists():
        raise InstallError(
            f"after installing, {venv.relative_to(ROOT)} has "
            f"{_fmt_pins(versions or {}, pins)}, not {_fmt_pins(pins, pins)}; see "
            f"{install_log.relative_to(ROOT)}"
        )
    log(f"reference: installed ({_fmt_pins(versions, pins)})")
    return versions


def _fmt_pins(versions: dict[str, Any], pins: dict[str, str] = REF_PINS) -> str:
    return ", ".join(f"{name} {versions.get(name)}" for name in sorted(pins))


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------


def _job_yaml(name: str, summary: str) -> str:
    lines = [
        "# yaml-language-server: $schema=.deepwork/schemas/job.schema.json",
        f"name: {name}",
        'version: "1.0.0"',
        f'summary: "{summary}"',
        'common_job_info_provided_to_all_steps_at_runtime: "A benchmark job. Keep outputs short."',
        "workflows:",
        f"  - name: {WORKFLOW_NAME}",
        '    summary: "Gather, draft and publish"',
        f"    steps: [{', '.join(STEPS)}]",
        "steps:",
    ]
    for i, step in enumerate(STEPS):
        lines += [
            f"  - id: {step}",
            f'    name: "{step.title()}"',
            f'    description: "The {step} step"',
            f"    instructions_file: steps/{step}.md",
        ]
        if i == 0:
            lines.append('    inputs: [{name: topic, description: "What the job is about"}]')
        else:
            prev = STEPS[i - 1]
            lines += [
                f"    inputs: [{{file: {prev}.md, from_step: {prev}}}]",
                f"    dependencies: [{prev}]",
            ]
        lines += [
            "    outputs:",
            f'      {step}.md: {{type: file, description: "What {step} produced", required: true}}',
            "    reviews: []",
        ]
    return "\n".join(lines) + "\n"


def write_job(jobs_dir: Path, name: str, summary: str) -> None:
    job_dir = jobs_dir / name
    (job_dir / "steps").mkdir(parents=True)
    (job_dir / "job.yml").write_text(_job_yaml(name, summary))
    for step in STEPS:
        (job_dir / "steps" / f"{step}.md").write_text(
            f"# {step.title()}\n\nDo the {step} part of the job and write `out/{step}.md`.\n"
        )


def make_project(root: Path, job_names: list[str]) -> Path:
    jobs_dir = root / ".deepwork" / "jobs"
    jobs_dir.mkdir(parents=True)
    for i, name in enumerate(job_names):
        write_job(jobs_dir, name, f"Benchmark job number {i}")
    out = root / "out"
    out.mkdir()
    for step in STEPS:
        (out / f"{step}.md").write_text(f"# {step}\n\nDone.\n")
    return root


def make_repository(root: Path, job_names: list[str], files: int = 0, folders: int = 100) -> Path:
    """The project of ``make_project`` as the README's walkthrough makes it, a git repository
    (committed), with ``files`` more files spread over ``folders`` folders (``src/NNN/``)."""
    make_project(root, job_names)
    for i in range(files):
        folder = root / "src" / f"{i % folders:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file_{i:05d}.txt").write_text(f"file {i}\n" + "some content\n" * 8)
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fixture"], check=True)
    return root


# The per-call fixtures: key -> (label, git repository?, files beyond the job's). The first is
# the one the README's walkthrough makes; the targets hold on every git fixture.
PER_CALL_FIXTURES: dict[str, tuple[str, bool, int]] = {
    "git": ("small git repository", True, 0),
    "git10k": ("git repository of 10,000 files", True, 10_000),
    "nogit": ("folder without git", False, 0),
}
# The fixture a metric's key names after "@" (none: the first one).
MAIN_FIXTURE = "git"
# On the big repository a transition may cost at most this much more than on the small one.
SCALING_TARGET = 1.25


@dataclass
class Fixtures:
    base: Path
    # fixture key -> server key -> project root
    per_call: dict[str, dict[str, Path]] = field(default_factory=dict)
    many_jobs: dict[str, Path] = field(default_factory=dict)


def build_fixtures(
    base: Path, keys: list[str], fixtures: list[str], big_files: int = 10_000
) -> Fixtures:
    built = Fixtures(base=base)
    many = [f"{JOB_NAME}_{i:03d}" for i in range(MANY_JOBS)]
    # One copy per server: 0.9.1 writes session files into the project, ours into SQLite.
    for key in keys:
        for name in fixtures:
            _, is_git, files = PER_CALL_FIXTURES[name]
            root = base / key / name
            if is_git:
                project = make_repository(root, [JOB_NAME], files=min(files, big_files))
            else:
                project = make_project(root, [JOB_NAME])
            built.per_call.setdefault(name, {})[key] = project
        built.many_jobs[key] = make_project(base / key / "many_jobs", many)
    return built


# --------------------------------------------------------------------------------------------
# Servers and client
# --------------------------------------------------------------------------------------------


@dataclass
class Server:
    key: str
    label: str
    command: str
    args: list[str]
    env: dict[str, str]
    log_file: Path

    def client(self, project: Path, mode: str = "legacy"):
        from fastmcp import Client
        from fastmcp.client.transports import StdioTransport

        transport = StdioTransport(
            self.command,
            [*self.args, "--path", str(project)],
            env=self.env,
            keep_alive=False,  # leaving the client context ends the process
            log_file=self.log_file,
        )
        # Legacy = the initialize handshake, the only era FastMCP 2.14.5 speaks.
        return Client(transport, mode=mode, timeout=CALL_TIMEOUT, cache=False)


def make_servers(
    base: Path, ours_root: Path = ROOT, database_url: str | None = None
) -> dict[str, Server]:
    our_python = OUR_PYTHON if OUR_PYTHON.exists() else Path(sys.executable)
    var_dir = base / "ours-var"
    var_dir.mkdir()
    our_env = {"DEEPWORK_VAR_DIR": str(var_dir)}
    if database_url:
        our_env["DATABASE_URL"] = database_url
    if not database_url and migrated.copy_into(var_dir):
        log("ours: a copy of the migrated database")
    else:
        which = "the --database-url" if database_url else "a throwaway SQLite"
        log(f"ours: migrating {which} database ...")
        proc = subprocess.run(
            [str(our_python), str(ours_root / "manage.py"), "migrate", "--noinput", "-v0"],
            env={**_clean_env(), **our_env},
            capture_output=True,
            text=True,
            cwd=ours_root,
        )
        if proc.returncode != 0:
            raise HarnessError(f"manage.py migrate failed:\n{proc.stdout}{proc.stderr}")
    return {
        "ours": Server(
            key="ours",
            label="ours",
            command=str(our_python),
            args=[str(ours_root / "manage.py"), "mcpserve"],
            env=our_env,
            log_file=base / "ours.stderr.log",
        ),
        "ref": Server(
            key="ref",
            label="deepwork 0.9.1",
            command=str(REF_VENV / "bin" / "deepwork"),
            args=["serve"],
            env={},
            log_file=base / "ref.stderr.log",
        ),
    }


def _clean_env() -> dict[str, str]:
    # The same variables the stdio client passes on, so migrate hits the same database.
    from mcp.client.stdio import get_default_environment

    return get_default_environment()


async def timed_call(client, tool: str, args: dict[str, Any]) -> tuple[float, dict]:
    start = time.perf_counter()
    result = await client.call_tool(tool, args, raise_on_error=False)
    elapsed = time.perf_counter() - start
    if result.is_error:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        raise HarnessError(f"{tool} answered an error: {text}")
    return elapsed, result.structured_content or {}


# --------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------


def _orders(keys: list[str], n: int):
    """Alternate which server goes first, run by run."""
    for i in range(n):
        yield i, (keys if i % 2 == 0 else list(reversed(keys)))


async def measure_cold_start(
    servers: dict[str, Server],
    projects: dict[str, Path],
    runs: int,
    warm_modes: tuple[str, ...] = ("auto", "legacy"),
) -> tuple[dict[str, list[float]], dict[str, dict[str, str]]]:
    samples: dict[str, list[float]] = {key: [] for key in servers}
    protocol: dict[str, dict[str, str]] = {key: {} for key in servers}
    # Untimed spawns first: they warm the OS file cache and write any missing .pyc files, and
    # record what each server negotiates when the client may pick the modern era ("auto").
    for key, server in servers.items():
        for mode in warm_modes:
            async with server.client(projects[key], mode=mode) as client:
                await client.list_tools()
                info = client.server_info
                protocol[key][mode] = str(client.protocol_version)
                protocol[key]["server_info"] = f"{info.name} {info.version}" if info else "?"
    for i, order in _orders(list(servers), runs):
        for key in order:
            server = servers[key]
            before = _children()
            start = time.perf_counter()
            async with server.client(projects[key]) as client:
                tools = await client.list_tools()
                elapsed = time.perf_counter() - start
                # The CPU the server spent getting there (interpreter, imports, set-up): unlike
                # the wall time it hardly moves with the machine's load.
                spawned = _children() - before
                cpu = server_cpu(spawned.pop()) if len(spawned) == 1 else None
                # What an agent waits for before it can act: the first answer to a call.
                await timed_call(client, "get_workflows", {})
                first_answer = time.perf_counter() - start
            if not any(t.name == "get_workflows" for t in tools):
                raise HarnessError(f"{server.label}: tools/list has no get_workflows")
            samples[key].append(elapsed)
            samples.setdefault(f"{key}:first_answer", []).append(first_answer)
            if cpu is not None:
                samples.setdefault(f"{key}:cpu", []).append(cpu)
        log(f"  cold start {i + 1}/{runs}: " + _last({k: samples[k] for k in servers}))
    return samples, protocol


def _children() -> set[int]:
    """This process's child processes (Linux); empty where ``/proc`` cannot tell."""
    pids: set[int] = set()
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                pids.update(int(pid) for pid in f.read().split())
    except OSError:
        return set()
    return pids


def server_cpu(pid: int | None) -> float | None:
    """Seconds of CPU every thread of ``pid`` has used so far (nanosecond ``schedstat``)."""
    if pid is None:
        return None
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that just ended
    return total / 1e9


async def _cycle(
    client,
    label: str,
    out: dict[str, list[float]] | None,
    pid: int | None = None,
    project: Path | None = None,
    think: float = 0.0,
) -> None:
    """One get -> start -> finish -> abort cycle. ``think`` seconds pass before each call, as
    an agent never calls back to back; with ``project``, the step's output is written in the
    pause before ``finished_step``, as the agent's work would."""
    steps = [
        ("get_workflows", {}),
        (
            "start_workflow",
            {"goal": "Benchmark the server", "job_name": JOB_NAME, "workflow_name": WORKFLOW_NAME},
        ),
        ("finished_step", {"outputs": {f"{STEPS[0]}.md": f"out/{STEPS[0]}.md"}}),
        ("abort_workflow", {"explanation": "Benchmark cycle done"}),
    ]
    for tool, args in steps:
        if think:
            await asyncio.sleep(think)
        if project is not None and tool == "finished_step":
            output = project / "out" / f"{STEPS[0]}.md"
            output.write_text(f"# {STEPS[0]}\n\nDone at {time.time_ns()}.\n")
        cpu_before = server_cpu(pid)
        elapsed, data = await timed_call(client, tool, args)
        cpu_after = server_cpu(pid)
        _check(label, tool, data)
        if out is not None:
            out[tool].append(elapsed)
            if cpu_before is not None and cpu_after is not None and cpu_after >= cpu_before:
                out[f"{tool}_cpu"].append(cpu_after - cpu_before)


def _check(label: str, tool: str, data: dict) -> None:
    ok = {
        "get_workflows": lambda d: any(j.get("name") == JOB_NAME for j in d.get("jobs", [])),
        "start_workflow": lambda d: (d.get("begin_step") or {}).get("step_id") == STEPS[0],
        "finished_step": lambda d: (
            d.get("status") == "next_step"
            and (d.get("begin_step") or {}).get("step_id") == STEPS[1]
        ),
        "abort_workflow": lambda d: (
            d.get("aborted_workflow") == f"{JOB_NAME}/{WORKFLOW_NAME}" and d.get("stack") == []
        ),
    }[tool]
    if not ok(data):
        raise HarnessError(f"{label}: unexpected {tool} answer: {json.dumps(data)[:500]}")


async def measure_per_call(
    servers: dict[str, Server],
    projects: dict[str, Path],
    iterations: int,
    warmup: int,
    think: float = 0.0,
    write_outputs: bool = False,
) -> dict[str, dict[str, list[float]]]:
    tools = ("get_workflows", "start_workflow", "finished_step", "abort_workflow")
    samples = {
        key: {name: [] for tool in tools for name in (tool, f"{tool}_cpu")} for key in servers
    }
    async with contextlib.AsyncExitStack() as stack:
        clients, pids = {}, {}
        for key in servers:
            before = _children()
            clients[key] = await stack.enter_async_context(servers[key].client(projects[key]))
            spawned = _children() - before
            pids[key] = spawned.pop() if len(spawned) == 1 else None

        def written(key: str) -> Path | None:
            return projects[key] if write_outputs else None

        for _ in range(warmup):
            for key, client in clients.items():
                await _cycle(client, servers[key].label, None, None, written(key), think)
        step = max(1, iterations // 4)
        for i, order in _orders(list(servers), iterations):
            for key in order:
                await _cycle(
                    clients[key], servers[key].label, samples[key], pids[key], written(key), think
                )
            if (i + 1) % step == 0:
                log(f"  cycles {i + 1}/{iterations}")
    return samples


async def measure_many_jobs(
    servers: dict[str, Server], projects: dict[str, Path], calls: int, warmup: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
    samples: dict[str, list[float]] = {key: [] for key in servers}
    first: dict[str, float] = {}
    async with contextlib.AsyncExitStack() as stack:
        clients = {
            key: await stack.enter_async_context(server.client(projects[key]))
            for key, server in servers.items()
        }
        for key, client in clients.items():
            elapsed, data = await timed_call(client, "get_workflows", {})
            _check_many(servers[key].label, data)
            first[key] = elapsed
            for _ in range(max(0, warmup - 1)):
                await timed_call(client, "get_workflows", {})
        step = max(1, calls // 5)
        for i, order in _orders(list(servers), calls):
            for key in order:
                elapsed, data = await timed_call(clients[key], "get_workflows", {})
                if i == 0:
                    _check_many(servers[key].label, data)
                samples[key].append(elapsed)
            if (i + 1) % step == 0:
                log(f"  get_workflows(200 jobs) {i + 1}/{calls}: " + _last(samples))
    return samples, first


async def measure_first_call(
    servers: dict[str, Server], projects: dict[str, Path], runs: int
) -> dict[str, list[float]]:
    """The first get_workflows of a fresh process, once the project has been seen before.

    That is what an agent pays at the start of each session (ours keeps the catalog in the
    database across processes; 0.9.1 re-reads every job.yml on every call anyway).
    """
    samples: dict[str, list[float]] = {key: [] for key in servers}
    for _, order in _orders(list(servers), runs):
        for key in order:
            async with servers[key].client(projects[key]) as client:
                await client.list_tools()
                elapsed, data = await timed_call(client, "get_workflows", {})
            _check_many(servers[key].label, data)
            samples[key].append(elapsed)
    log("  new process: " + _last(samples))
    return samples


def _check_many(label: str, data: dict) -> None:
    names = {j.get("name") for j in data.get("jobs", [])}
    missing = [
        f"{JOB_NAME}_{i:03d}" for i in range(MANY_JOBS) if f"{JOB_NAME}_{i:03d}" not in names
    ]
    if missing or data.get("errors"):
        raise HarnessError(
            f"{label}: get_workflows on the 200-job project is missing {len(missing)} jobs "
            f"and reports errors {json.dumps(data.get('errors'))[:500]}"
        )


def _last(samples: dict[str, list[float]]) -> str:
    return ", ".join(f"{k} {v[-1] * 1000:.1f} ms" for k, v in samples.items() if v)


# --------------------------------------------------------------------------------------------
# Second peer: DeepWork 0.14.0 on a 0.14-format fixture
# --------------------------------------------------------------------------------------------

JOB14_NAME = "bench14"
TOOLS14 = ("get_workflows", "start_workflow", "finished_step", "go_to_step", "abort_workflow")
TARGETS14: dict[str, tuple[float, str]] = {
    "cold_start": (1.0, "<="),
    **dict.fromkeys(TOOLS14, (1.0, "<=")),
}
LABELS14 = {
    "cold_start": "cold start (spawn -> tools/list)",
    "cold_start_cpu": "cold start, server CPU",
    **{tool: tool for tool in TOOLS14},
    **{f"{tool}_cpu": f"{tool}, server CPU" for tool in TOOLS14},
}
# Our two ways of speaking 0.14, each compared with the 0.14.0 reference.
OURS14 = {"ours14": "0.14", "oursboth": "both"}


def _job14_yaml() -> str:
    """A 0.14-format job in the style of the digest's example: typed arguments, a start input,
    common info, post-workflow instructions; no reviews and no process requirements, so
    neither server runs a quality gate."""
    lines = [
        "# yaml-language-server: $schema=.deepwork/job.schema.json",
        f"name: {JOB14_NAME}",
        'summary: "Gather, draft and publish (0.14 format)"',
        "step_arguments:",
        "  - name: topic",
        '    description: "What the job is about"',
        "    type: string",
    ]
    for step in STEPS:
        lines += [
            f"  - name: {step}.md",
            f'    description: "What {step} produced"',
            "    type: file_path",
        ]
    lines += [
        "workflows:",
        f"  {WORKFLOW_NAME}:",
        '    summary: "Gather, draft and publish"',
        '    common_job_info_provided_to_all_steps_at_runtime: "A benchmark job. Keep it short."',
        '    post_workflow_instructions: "Tell the user where the result is."',
        "    steps:",
    ]
    for i, step in enumerate(STEPS):
        lines += [
            f"      - name: {step}",
            "        instructions: |",
            f"          Do the {step} part of the job and write `out/{step}.md`.",
            "        inputs:",
            "          topic: {}",
        ]
        if i:
            lines.append(f"          {STEPS[i - 1]}.md: {{}}")
        lines += ["        outputs:", f"          {step}.md: {{}}"]
    return "\n".join(lines) + "\n"


def make_project14(root: Path) -> Path:
    job_dir = root / ".deepwork" / "jobs" / JOB14_NAME
    job_dir.mkdir(parents=True)
    (job_dir / "job.yml").write_text(_job14_yaml())
    out = root / "out"
    out.mkdir()
    for step in STEPS:
        (out / f"{step}.md").write_text(f"# {step}\n\nDone.\n")
    # 0.14 asks git which outputs changed (for .deepreview rules); give both servers a repo.
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fixture"], check=True)
    return root


def make_servers14(base: Path, ours_root: Path, template: Server) -> dict[str, Server]:
    """Ours in --generation 0.14 and both (sharing the migrated database of ``template``),
    and DeepWork 0.14.0."""
    servers = {
        key: Server(
            key=key,
            label=f"ours --generation {generation}",
            command=template.command,
            args=[*template.args, "--generation", generation],
            env=template.env,
            log_file=base / f"{key}.stderr.log",
        )
        for key, generation in OURS14.items()
    }
    servers["ref14"] = Server(
        key="ref14",
        label="deepwork 0.14.0",
        command=str(REF014_VENV / "bin" / "deepwork"),
        args=["serve"],
        env={},
        log_file=base / "ref14.stderr.log",
    )
    return servers


async def _cycle14(
    client,
    label: str,
    out: dict[str, list[float]] | None,
    pid: int | None = None,
) -> None:
    # A fresh conversation per cycle, as an agent's new conversation would be.
    sid = uuid.uuid4().hex
    first = f"{STEPS[0]}.md"
    steps = [
        ("get_workflows", {}),
        (
            "start_workflow",
            {
                "goal": "Benchmark the server",
                "job_name": JOB14_NAME,
                "workflow_name": WORKFLOW_NAME,
                "session_id": sid,
                "inputs": {"topic": "benchmarks"},
            },
        ),
        (
            "finished_step",
            {
                "outputs": {first: f"out/{first}"},
                "session_id": sid,
                "work_summary": "Gathered.",
            },
        ),
        ("go_to_step", {"step_id": STEPS[0], "session_id": sid}),
        ("abort_workflow", {"explanation": "Benchmark cycle done", "session_id": sid}),
    ]
    for tool, args in steps:
        cpu_before = server_cpu(pid)
        elapsed, data = await timed_call(client, tool, args)
        cpu_after = server_cpu(pid)
        _check14(label, tool, data)
        if out is not None:
            out[tool].append(elapsed)
            if cpu_before is not None and cpu_after is not None and cpu_after >= cpu_before:
                out[f"{tool}_cpu"].append(cpu_after - cpu_before)


def _check14(label: str, tool: str, data: dict) -> None:
    def step_is(d: dict, name: str) -> bool:
        return (d.get("begin_step") or {}).get("step_id") == name

    ok = {
        "get_workflows": lambda d: (
            any(j.get("name") == JOB14_NAME for j in d.get("jobs", [])) and not d.get("errors")
        ),
        "start_workflow": lambda d: (
            step_is(d, STEPS[0]) and d["begin_step"]["step_inputs"][0].get("value") == "benchmarks"
        ),
        "finished_step": lambda d: d.get("status") == "next_step" and step_is(d, STEPS[1]),
        "go_to_step": lambda d: step_is(d, STEPS[0]) and d.get("invalidated_steps") == list(STEPS),
        "abort_workflow": lambda d: (
            d.get("aborted_workflow") == f"{JOB14_NAME}/{WORKFLOW_NAME}" and d.get("stack") == []
        ),
    }[tool]
    if not ok(data):
        raise HarnessError(f"{label}: unexpected {tool} answer: {json.dumps(data)[:500]}")


async def measure_per_call14(
    servers: dict[str, Server], projects: dict[str, Path], iterations: int, warmup: int
) -> dict[str, dict[str, list[float]]]:
    samples = {
        key: {name: [] for tool in TOOLS14 for name in (tool, f"{tool}_cpu")} for key in servers
    }
    async with contextlib.AsyncExitStack() as stack:
        clients, pids = {}, {}
        for key in servers:
            before = _children()
            clients[key] = await stack.enter_async_context(servers[key].client(projects[key]))
            spawned = _children() - before
            pids[key] = spawned.pop() if len(spawned) == 1 else None
        for _ in range(warmup):
            for key, client in clients.items():
                await _cycle14(client, servers[key].label, None)
        step = max(1, iterations // 4)
        keys = list(servers)
        for i in range(iterations):
            # Rotate who goes first, so no server always follows the same one.
            order = keys[i % len(keys) :] + keys[: i % len(keys)]
            for key in order:
                await _cycle14(clients[key], servers[key].label, samples[key], pids[key])
            if (i + 1) % step == 0:
                log(f"  0.14 cycles {i + 1}/{iterations}")
    return samples


def build_rows14(raw: dict[str, dict[str, list[float]]], ours_key: str) -> list[dict[str, Any]]:
    rows = []
    for metric, label in LABELS14.items():
        ours, ref = raw[ours_key].get(metric), raw["ref14"].get(metric)
        if not ours or not ref:
            continue
        s_ours, s_ref = summarize(ours), summarize(ref)
        ratio = s_ours["p50_ms"] / s_ref["p50_ms"] if s_ref["p50_ms"] else float("inf")
        row: dict[str, Any] = {
            "metric": metric,
            "label": label,
            "ours": s_ours,
            "ref": s_ref,
            "ratio_p50": ratio,
            "target": None,
            "verdict": "info",
        }
        if metric in TARGETS14:
            bound, op = TARGETS14[metric]
            passed = ratio < bound if op == "<" else ratio <= bound
            row["target"] = f"ratio {op} {bound:g}"
            row["verdict"] = "PASS" if passed else "FAIL"
        rows.append(row)
    return rows


async def run14(args: argparse.Namespace, base: Path, template: Server) -> dict[str, Any]:
    servers = make_servers14(base, args.ours_root.resolve(), template)
    projects = {key: make_project14(base / key / "one_job14") for key in servers}
    raw: dict[str, dict[str, list[float]]] = {key: {} for key in servers}
    started = time.perf_counter()
    log(f"0.14 peer: cold start, {args.cold_runs} fresh spawns per server (rotating order)")
    cold, protocol = await measure_cold_start(servers, projects, args.cold_runs)
    for key in servers:
        raw[key]["cold_start"] = cold[key]
        raw[key]["cold_start_cpu"] = cold.get(f"{key}:cpu", [])
    if args.only != "cold-start":
        log(f"0.14 peer: {args.warmup} warm-up + {args.iterations} cycles per server")
        per_call = await measure_per_call14(servers, projects, args.iterations, args.warmup)
        for key in servers:
            raw[key].update(per_call[key])
    return _measured(raw, protocol, started, servers)


# --------------------------------------------------------------------------------------------
# Statistics and report
# --------------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": percentile(values, 0.50) * 1000,
        "p95_ms": percentile(values, 0.95) * 1000,
        "min_ms": min(values) * 1000,
        "max_ms": max(values) * 1000,
        "mean_ms": sum(values) / len(values) * 1000,
    }


def build_rows(raw: dict[str, dict[str, list[float]]], smoke: bool = False) -> list[dict[str, Any]]:
    """Ours against 0.9.1, metric by metric (in a smoke run, ours alone and no target)."""
    rows = []
    for metric in _row_keys():
        ours = raw["ours"].get(metric)
        ref = ours if smoke else raw.get("ref", {}).get(metric)
        if not ours or not ref:
            continue
        s_ours, s_ref = summarize(ours), summarize(ref)
        ratio = s_ours["p50_ms"] / s_ref["p50_ms"] if s_ref["p50_ms"] else float("inf")
        row: dict[str, Any] = {
            "metric": metric,
            "label": _label(metric),
            "ours": s_ours,
            "ref": s_ref,
            "ratio_p50": ratio,
            "target": None,
            "verdict": "smoke" if smoke else "info",
        }
        target = _target(metric)
        if target is not None and not smoke:
            bound, op = target
            passed = ratio < bound if op == "<" else ratio <= bound
            row["target"] = f"ratio {op} {bound:g}"
            row["verdict"] = "PASS" if passed else "FAIL"
        rows.append(row)
    return rows


def build_scaling_rows(
    raw: dict[str, dict[str, list[float]]], smoke: bool = False
) -> list[dict[str, Any]]:
    """Each transition's p50 on the 10,000-file repository against the small one, per server:
    ours is held to ``SCALING_TARGET``, 0.9.1's is shown beside it."""
    rows = []
    for metric in (m for t in TRANSITIONS for m in (t, f"{t}_cpu")):
        row: dict[str, Any] = {"metric": metric, "label": LABELS[metric]}
        for key in ("ours", "ref"):
            small = raw.get(key, {}).get(_metric_key(metric, MAIN_FIXTURE))
            big = raw.get(key, {}).get(_metric_key(metric, "git10k"))
            if small and big:
                s_small, s_big = summarize(small), summarize(big)
                row[key] = {"small": s_small, "big": s_big}
                row[f"{key}_ratio"] = s_big["p50_ms"] / s_small["p50_ms"]
        if "ours_ratio" not in row:
            continue
        row["target"] = None if smoke else f"ratio <= {SCALING_TARGET:g}"
        row["verdict"] = (
            "smoke" if smoke else ("PASS" if row["ours_ratio"] <= SCALING_TARGET else "FAIL")
        )
        rows.append(row)
    return rows


def render_scaling(rows: list[dict[str, Any]]) -> str:
    header = ["transition", "ours small", "ours 10k", "ours 10k/small", "0.9.1 10k/small"]
    header += ["target", "result"]
    body = []
    for row in rows:
        ref_ratio = row.get("ref_ratio")
        body.append(
            [
                row["label"],
                _ms(row["ours"]["small"]["p50_ms"]),
                _ms(row["ours"]["big"]["p50_ms"]),
                f"{row['ours_ratio']:.3f}",
                "-" if ref_ratio is None else f"{ref_ratio:.3f}",
                row["target"] or "-",
                row["verdict"],
            ]
        )
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in (0, 5, 6) else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    out = [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in body)]
    out.append("(p50 in ms; ratio = p50 on the 10,000-file repository / p50 on the small one)")
    return "\n".join(out)


def _ms(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def render_table(rows: list[dict[str, Any]], ref: str = "0.9.1") -> str:
    header = [
        "metric",
        "n",
        "ours p50",
        "ours p95",
        f"{ref} p50",
        f"{ref} p95",
        f"ours/{ref}",
        "target",
        "result",
    ]
    body = []
    for row in rows:
        body.append(
            [
                row["label"],
                f"{row['ours']['n']}/{row['ref']['n']}",
                _ms(row["ours"]["p50_ms"]),
                _ms(row["ours"]["p95_ms"]),
                _ms(row["ref"]["p50_ms"]),
                _ms(row["ref"]["p95_ms"]),
                f"{row['ratio_p50']:.3f}",
                row["target"] or "-",
                row["verdict"],
            ]
        )
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in (0, 7, 8) else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    rule = "  ".join("-" * w for w in widths)
    out = [line(header), rule, *(line(r) for r in body)]
    out.append(f"(times in ms; ratio = ours p50 / {ref} p50)")
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller, faster run")
    parser.add_argument("--cold-runs", type=int, help="fresh-process spawns per server")
    parser.add_argument("--iterations", type=int, help="get/start/finish/abort cycles per server")
    parser.add_argument("--many-calls", type=int, help="get_workflows calls on the 200-job project")
    parser.add_argument("--keep", action="store_true", help="keep the temp fixtures and logs")
    parser.add_argument(
        "--only",
        choices=["all", "cold-start"],
        default="all",
        help="measure everything (default) or only the cold start",
    )
    parser.add_argument(
        "--peer",
        choices=["all", "0.9.1", "0.14"],
        default="all",
        help="compare with deepwork 0.9.1, with deepwork 0.14.0 (ours in --generation 0.14 "
        "and both, on a 0.14-format job), or both peers (default)",
    )
    parser.add_argument(
        "--database-url",
        default=None,
        metavar="URL",
        help="ours on this database (e.g. postgres://postgres@127.0.0.1:5432/deepwork_bench, "
        "an existing database) instead of a throwaway SQLite one",
    )
    parser.add_argument(
        "--ours-root",
        type=Path,
        default=ROOT,
        help="checkout whose manage.py is 'ours' (default: this one), e.g. a worktree to compare",
    )
    parser.add_argument(
        "--think-ms",
        type=float,
        default=50.0,
        help="pause before each call of the per-call cycles, as an agent thinks (default 50)",
    )
    parser.add_argument(
        "--fixtures",
        default=",".join(PER_CALL_FIXTURES),
        help="per-call fixtures to measure, comma-separated (default: "
        + ",".join(PER_CALL_FIXTURES)
        + ")",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest run (ours alone, no reference install, a few calls on small "
        "fixtures, no targets): that the harness still works, for the test suite",
    )
    args = parser.parse_args(argv)
    if not (args.ours_root / "manage.py").is_file():
        parser.error(f"--ours-root {args.ours_root} has no manage.py")
    args.fixtures = [f for f in args.fixtures.split(",") if f]
    if unknown := [f for f in args.fixtures if f not in PER_CALL_FIXTURES]:
        parser.error(f"unknown --fixtures {unknown}; known: {', '.join(PER_CALL_FIXTURES)}")
    if args.smoke:
        defaults: tuple[int, ...] = (1, 2, 2, 1, 1)
        args.think_ms = 0.0
        args.peer = "0.9.1"
        args.big_files = 200
        args.fixtures = [f for f in args.fixtures if f != "nogit"] or args.fixtures
    else:
        defaults = (5, 40, 8, 3, 2) if args.quick else (15, 150, 30, 5, 5)
        args.big_files = 10_000
    args.cold_runs = args.cold_runs or defaults[0]
    args.iterations = args.iterations or defaults[1]
    args.many_calls = args.many_calls or defaults[2]
    args.warmup = defaults[3]
    args.first_runs = defaults[4]
    return args


async def run(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    """Each asked-for peer's measurements: ``{"0.9.1": ..., "0.14": ...}``."""
    servers = make_servers(base, args.ours_root.resolve(), args.database_url)
    if args.smoke:
        servers = {"ours": servers["ours"]}
    out: dict[str, Any] = {}
    if args.peer in ("all", "0.9.1"):
        out["0.9.1"] = await run091(args, base, servers)
    if args.peer in ("all", "0.14"):
        out["0.14"] = await run14(args, base, servers["ours"])
    return out


async def run091(
    args: argparse.Namespace, base: Path, servers: dict[str, Server]
) -> dict[str, Any]:
    log(f"fixtures: building {', '.join(args.fixtures)} and {MANY_JOBS}-job projects under {base}")
    fixtures = build_fixtures(base, list(servers), args.fixtures, args.big_files)
    raw: dict[str, dict[str, list[float]]] = {key: {} for key in servers}
    started = time.perf_counter()

    log(f"cold start: {args.cold_runs} fresh spawns per server (interleaved)")
    first_fixture = fixtures.per_call[args.fixtures[0]]
    # A smoke run's timed spawn is the legacy one: its untimed spawns need not repeat it.
    warm_modes = ("auto",) if args.smoke else ("auto", "legacy")
    cold, protocol = await measure_cold_start(servers, first_fixture, args.cold_runs, warm_modes)
    for key in servers:
        raw[key]["cold_start"] = cold[key]
        raw[key]["cold_start_cpu"] = cold.get(f"{key}:cpu", [])
        raw[key]["first_answer"] = cold[f"{key}:first_answer"]
    if args.only == "cold-start":
        return _measured(raw, protocol, started, servers)

    for name in args.fixtures:
        label, is_git, _ = PER_CALL_FIXTURES[name]
        log(
            f"per call, {label}: {args.warmup} warm-up + {args.iterations} cycles per server "
            f"(interleaved), {args.think_ms:g} ms before each call"
            + (", the step's output written before finished_step" if is_git else "")
        )
        per_call = await measure_per_call(
            servers,
            fixtures.per_call[name],
            args.iterations,
            args.warmup,
            think=args.think_ms / 1000,
            write_outputs=is_git,
        )
        for key in servers:
            raw[key].update({_metric_key(m, name): v for m, v in per_call[key].items()})

    log(f"get_workflows over {MANY_JOBS} jobs: {args.many_calls} calls per server")
    many, first = await measure_many_jobs(servers, fixtures.many_jobs, args.many_calls, 2)
    for key in servers:
        raw[key]["get_workflows_200_jobs"] = many[key]
        raw[key]["get_workflows_200_jobs_first"] = [first[key]]
    if args.smoke:  # the same code as the cold start's spawns
        return _measured(raw, protocol, started, servers)
    log(f"get_workflows over {MANY_JOBS} jobs, first call of a new process: {args.first_runs} each")
    fresh = await measure_first_call(servers, fixtures.many_jobs, args.first_runs)
    for key in servers:
        raw[key]["get_workflows_200_jobs_new_process"] = fresh[key]
    return _measured(raw, protocol, started, servers)


def _measured(
    raw: dict[str, dict[str, list[float]]],
    protocol: dict[str, dict[str, str]],
    started: float,
    servers: dict[str, Server],
) -> dict[str, Any]:
    return {
        "raw": raw,
        "protocol": protocol,
        "measure_seconds": time.perf_counter() - started,
        "servers": {
            key: {"label": s.label, "command": [s.command, *s.args, "--path", "<project>"]}
            for key, s in servers.items()
        },
    }


def _protocols(protocol: dict[str, dict[str, str]]) -> str:
    names = {"ours": "ours", "ref": "0.9.1", "ref14": "0.14.0"}
    return ", ".join(
        f"{names.get(key, key)} {p.get('legacy')}/{p.get('auto')}" for key, p in protocol.items()
    )


def _git_head(root: Path) -> str | None:
    proc = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return proc.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    load_before = os.getloadavg()
    try:
        import fastmcp  # noqa: F401  (the shared client; fail early with a clear message)
    except ImportError as exc:
        log(f"error: run this with {OUR_PYTHON} (the FastMCP client comes from there): {exc}")
        return 1
    references: dict[str, dict[str, str]] = {}
    installs = {
        "0.9.1": (REF_VENV, REF_PINS, REF_INSTALL_LOG),
        "0.14": (REF014_VENV, REF014_PINS, REF014_INSTALL_LOG),
    }
    for peer, (venv, pins, install_log) in installs.items():
        if args.peer not in ("all", peer) or args.smoke:
            continue
        try:
            references[peer] = ensure_reference(venv, pins, install_log)
        except InstallError as exc:
            log(f"\nERROR: the reference DeepWork {pins['deepwork']} install failed.\n{exc}")
            return 2

    base = Path(tempfile.mkdtemp(prefix="deepwork-bench-"))
    try:
        measured = asyncio.run(run(args, base))
    except Exception as exc:
        traceback.print_exc()
        for path in sorted(base.glob("*.stderr.log")):
            tail = path.read_text(errors="replace").splitlines()[-15:]
            log(f"--- last lines of {path.name} ---\n" + "\n".join(tail))
        log(f"\nERROR: the benchmark harness failed: {type(exc).__name__}: {exc}")
        log(f"(fixtures and server logs kept in {base})")
        return 1
    if args.keep:
        log(f"fixtures and server logs kept in {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)

    import fastmcp

    # Each table: (peer, ours key, heading label, rows).
    tables: list[tuple[str, str, str, list[dict[str, Any]]]] = []
    scaling: list[dict[str, Any]] = []
    if "0.9.1" in measured:
        raw091 = measured["0.9.1"]["raw"]
        tables.append(("0.9.1", "ours", "ours", build_rows(raw091, smoke=args.smoke)))
        scaling = build_scaling_rows(raw091, smoke=args.smoke)
    if "0.14" in measured:
        for key, generation in OURS14.items():
            rows14 = build_rows14(measured["0.14"]["raw"], key)
            tables.append(("0.14", key, f"ours --generation {generation}", rows14))
    report = {
        "created": datetime.now(UTC).isoformat(),
        "quick": args.quick,
        "smoke": args.smoke,
        "only": args.only,
        "peer": args.peer,
        "settings": {
            "cold_runs": args.cold_runs,
            "iterations": args.iterations,
            "many_jobs": MANY_JOBS,
            "many_calls": args.many_calls,
            "think_ms": args.think_ms,
            "fixtures": {f: PER_CALL_FIXTURES[f][0] for f in args.fixtures},
            "big_repository_files": args.big_files,
            "warmup": args.warmup,
            "first_call_runs": args.first_runs,
            "client": f"fastmcp {fastmcp.__version__} (mcp {version('mcp')}), mode=legacy",
        },
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            # Other work on the machine skews results (especially cold start): check these.
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
        },
        "ours": {
            "root": str(args.ours_root.resolve()),
            "git_head": _git_head(args.ours_root.resolve()),
            "fastmcp": fastmcp.__version__,
        },
        "reference": references.get("0.9.1"),
        "references": references,
        "targets": {k: f"ours/0.9.1 p50 {op} {b:g}" for k, (b, op) in TARGETS.items()},
        "scaling": scaling,
        "targets_014": {k: f"ours/0.14.0 p50 {op} {b:g}" for k, (b, op) in TARGETS14.items()},
        "peers": {
            peer: {
                "negotiated_protocol": m["protocol"],
                "servers": m["servers"],
                "raw_seconds": m["raw"],
            }
            for peer, m in measured.items()
        },
        "tables": [
            {"peer": peer, "ours": key, "label": label, "rows": rows}
            for peer, key, label, rows in tables
        ],
        "total_seconds": time.perf_counter() - t0,
    }
    if "0.9.1" in measured:  # the keys earlier results.json files had
        report["rows"] = tables[0][3]
        report["negotiated_protocol"] = measured["0.9.1"]["protocol"]
        report["servers"] = measured["0.9.1"]["servers"]
        report["raw_seconds"] = measured["0.9.1"]["raw"]
    results = BENCH_DIR / "results-smoke.json" if args.smoke else RESULTS_JSON
    BENCH_DIR.mkdir(exist_ok=True)
    results.write_text(json.dumps(report, indent=2) + "\n")

    all_rows: list[dict[str, Any]] = []
    for peer, _key, label, rows in tables:
        pins = REF_PINS if peer == "0.9.1" else REF014_PINS
        ref_name = f"deepwork {pins['deepwork']}"
        print()
        if args.smoke:
            print(f"{label} (HEAD {report['ours']['git_head']}), smoke run: ours alone")
        else:
            print(
                f"{label} (HEAD {report['ours']['git_head']}) vs {ref_name} "
                f"({_fmt_pins(references[peer], pins)}); client fastmcp {fastmcp.__version__}, "
                f"legacy handshake; negotiated protocol (legacy/auto): "
                f"{_protocols(measured[peer]['protocol'])}; {args.think_ms:g} ms before each "
                "per-call request"
            )
        print(render_table(rows, ref=pins["deepwork"]))
        all_rows += [{**row, "label": f"{row['label']} [{label} vs {ref_name}]"} for row in rows]
    if scaling:
        print("\nA transition on the 10,000-file repository against the small one:")
        print(render_scaling(scaling))
        all_rows += [{**row, "label": f"{row['label']} [10k/small]"} for row in scaling]
    before, after = load_before[0], report["machine"]["loadavg_after"][0]
    print(f"load average (1 min) before/after: {before:.2f}/{after:.2f} on {os.cpu_count()} CPUs")
    failed = [row["label"] for row in all_rows if row["verdict"] == "FAIL"]
    print(
        f"\n{sum(r['verdict'] == 'PASS' for r in all_rows)} targets met, {len(failed)} missed"
        + (f" ({', '.join(failed)})" if failed else "")
        + f"; total {report['total_seconds']:.0f} s; results in {results.relative_to(ROOT)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
