"""``make bench``: how long a new install makes its first user wait, against a warm one.

Two rows, each measured on a new data folder ("fresh": no database yet) and on one whose
database a previous start made ("warm"), the two interleaved run by run:

- ``mcp``: spawn ``deepwork-server mcp --path <project>`` to the answer of its first tool call
  (``get_workflows``), with the official MCP client, as an agent's client sees it;
- ``serve``: spawn ``deepwork-server serve`` to the first 200 of its login page.

Targets: fresh at most 2x warm for ``mcp`` (p50), fresh at most warm + 5 s for ``serve``.
``--smoke`` makes one run of each and checks nothing (``make test`` runs it, so that a change
that breaks this benchmark fails the suite).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUR_PYTHON = ROOT / ".venv" / "bin" / "python"
MCP_RATIO_TARGET = 2.0
SERVE_EXTRA_TARGET = 5.0
JOB = """\
name: first_call
version: "1.0.0"
summary: "One step."
common_job_info_provided_to_all_steps_at_runtime: "Nothing."
workflows:
  - name: main
    summary: "One step."
    steps: [only]
steps:
  - id: only
    name: "Only"
    description: "The only step."
    instructions_file: steps/only.md
    outputs:
      out.md: {type: file, description: "Out.", required: true}
    reviews: []
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def command(*args: str) -> list[str]:
    """``deepwork-server <args>`` of this checkout (its apps first on the path, as the console
    script puts them)."""
    python = OUR_PYTHON if OUR_PYTHON.exists() else Path(sys.executable)
    return [str(python), "-P", "-m", "deepwork_site", *args]


def environment(data: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env.update(
        {"DEEPWORK_VAR_DIR": str(data), "PYTHONPATH": str(ROOT), "DEEPWORK_LOG_LEVEL": "WARNING"}
    )
    return env


def make_project(folder: Path) -> Path:
    jobs = folder / ".deepwork" / "jobs" / "first_call"
    (jobs / "steps").mkdir(parents=True)
    (jobs / "job.yml").write_text(JOB)
    (jobs / "steps" / "only.md").write_text("Write out.md.\n")
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


async def first_call(project: Path, data: Path) -> float:
    """Seconds from spawn to the answer of the first ``get_workflows``."""
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    argv = command("mcp", "--path", str(project))
    transport = StdioTransport(
        command=argv[0], args=argv[1:], env=environment(data), cwd=str(project)
    )
    began = time.perf_counter()
    async with Client(transport, timeout=300) as client:
        await client.call_tool("get_workflows", {})
        took = time.perf_counter() - began
    return took


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def login_page(data: Path) -> float:
    """Seconds from spawning ``serve`` to the first 200 of ``/login/``."""
    port = free_port()
    began = time.perf_counter()
    process = subprocess.Popen(
        command("serve", "--port", str(port)),
        env=environment(data),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"serve exited with status {process.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=5) as r:
                    if r.status == 200:
                        return time.perf_counter() - began
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.perf_counter() - began > 300:
                raise RuntimeError("serve did not answer within 300 s")
            time.sleep(0.05)
    finally:
        process.terminate()
        process.wait(timeout=30)


def p50(values: list[float]) -> float:
    return statistics.median(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each kind")
    parser.add_argument("--smoke", action="store_true", help="one run each, no targets")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    runs = 1 if args.smoke else args.runs
    scratch = Path(tempfile.mkdtemp(prefix="deepwork-first-call-"))
    results: dict[str, list[float]] = {
        "mcp_fresh": [],
        "mcp_warm": [],
        "serve_fresh": [],
        "serve_warm": [],
    }
    try:
        project = make_project(scratch / "project")
        warm = scratch / "warm"
        # The warm data folder is made by a first start, as a user's second start finds it.
        asyncio.run(first_call(project, warm))
        for run in range(runs):
            fresh = scratch / f"fresh-{run}"
            # Alternate which goes first, so the machine's drift falls on both.
            order = ["fresh", "warm"] if run % 2 == 0 else ["warm", "fresh"]
            for kind in order:
                data = fresh if kind == "fresh" else warm
                results[f"mcp_{kind}"].append(asyncio.run(first_call(project, data)))
            shutil.rmtree(fresh)
            for kind in order:
                data = scratch / f"serve-fresh-{run}" if kind == "fresh" else warm
                results[f"serve_{kind}"].append(login_page(data))
            shutil.rmtree(scratch / f"serve-fresh-{run}")
            log(
                f"run {run + 1}/{runs}: "
                + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in results.items())
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    mcp_ratio = p50(results["mcp_fresh"]) / p50(results["mcp_warm"])
    serve_extra = p50(results["serve_fresh"]) - p50(results["serve_warm"])
    print(f"\n| first call, p50 of {runs} runs | fresh data folder | warm | fresh / warm |")
    print("|---|---|---|---|")
    print(
        f"| `mcp`: spawn to first tool call answered | {p50(results['mcp_fresh']):.2f} s "
        f"| {p50(results['mcp_warm']):.2f} s | {mcp_ratio:.2f}x (target <= {MCP_RATIO_TARGET}x) |"
    )
    print(
        f"| `serve`: spawn to login page | {p50(results['serve_fresh']):.2f} s "
        f"| {p50(results['serve_warm']):.2f} s | +{serve_extra:.2f} s "
        f"(target <= +{SERVE_EXTRA_TARGET} s) |"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    if args.smoke:
        return 0
    missed = []
    if mcp_ratio > MCP_RATIO_TARGET:
        missed.append(f"mcp fresh/warm {mcp_ratio:.2f} > {MCP_RATIO_TARGET}")
    if serve_extra > SERVE_EXTRA_TARGET:
        missed.append(f"serve fresh - warm {serve_extra:.2f} s > {SERVE_EXTRA_TARGET} s")
    for miss in missed:
        log(f"MISSED: {miss}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
