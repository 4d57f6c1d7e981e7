#!/usr/bin/env python
"""``make bench``: ``tools/list`` with 1,000 published workflows against the static tools alone.

Two ``mcpserve`` stdio processes on one project whose five jobs hold 200 workflows each
(1,000 published workflows), on a throwaway SQLite database (``DEEPWORK_VAR_DIR``):

- ``static``: ``--toolsets deepwork`` (the eight static tools);
- ``workflow-tools``: ``--toolsets deepwork,workflow-tools`` (those, three more and one tool per
  workflow: 1,013 tools with the standard jobs' two).

- ``paged``: the same with ``DEEPWORK_TOOLS_PAGE_SIZE`` (``--page-size``, 50 by default):
  its first page (one ``tools/list``) and the full walk (following ``nextCursor`` to the end).

Each is listed ``--runs`` times after a warm-up (the first listing syncs the catalog and
chooses the 1,000 names), interleaved, by the same client on the handshake era (no client-side
cache). Target: a ``tools/list`` with 1,000 workflows within 3x of the static p50. Paging is
off by default (see the README), so the unpaged listing is reported beside it: that one is
bound by the client's parsing and validation of ~1,000 tools (the server's part is a few ms),
and stays far from 3x. The database queries of one steady listing are counted in this process
through the provider itself, with 10 and with 1,000 workflows: they must be the same number.

The bar paging is off for: the **server's own time per listing**, with 10 and with 1,000
workflows (``--toolsets deepwork,workflow-tools``, unpaged), for a client on each protocol era.
A raw stdio client writes one ``tools/list`` line and reads the answer's line as bytes, never
parsing it, so what is timed is the server reading, listing, serializing and writing (and the
pipe), not the client's parse. ``--server-only`` runs this row alone.

Results go to stdout and ``.bench/workflow_tools.json``. A missed target does not fail the run.
``--smoke``, for the test suite: 2 jobs of 3 workflows, one listing of each kind, the larger
size alone for the server's own time, no results file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import migrated  # the benchmarks' folder is the script's, first on the path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / ".bench" / "workflow_tools.json"
JOBS = 5
WORKFLOWS_PER_JOB = 200  # the most one job.yml may hold
TARGET_RATIO = 3.0
# The server's own time per unpaged tools/list at 1,000 workflows to keep (p50, ms), as it was
# when paging was left off by default.
SERVER_BAR_MS = 12.0


def job_yaml(name: str, workflows: int) -> str:
    lines = [
        f"name: {name}",
        'version: "1.0.0"',
        f'summary: "Benchmark job {name}"',
        'common_job_info_provided_to_all_steps_at_runtime: "Benchmark."',
        "workflows:",
    ]
    for index in range(workflows):
        lines += [f"  - name: wf{index}", f'    summary: "Workflow {index}"', "    steps: [s]"]
    lines += [
        "steps:",
        "  - id: s",
        '    name: "S"',
        '    description: "The step"',
        "    instructions_file: steps/s.md",
        '    inputs: [{name: topic, description: "What it is about"}]',
        "    outputs:",
        '      out.md: {type: file, description: "Out", required: true}',
        "    reviews: []",
    ]
    return "\n".join(lines) + "\n"


def make_project(root: Path, jobs: int, per_job: int) -> Path:
    for index in range(jobs):
        job_dir = root / ".deepwork" / "jobs" / f"job{index}"
        (job_dir / "steps").mkdir(parents=True)
        (job_dir / "job.yml").write_text(job_yaml(f"job{index}", per_job))
        (job_dir / "steps" / "s.md").write_text("# S\n\nDo it.\n")
    return root


def env_for(var_dir: Path, page_size: int | None = None) -> dict[str, str]:
    paging = {} if page_size is None else {"DEEPWORK_TOOLS_PAGE_SIZE": str(page_size)}
    return {
        **paging,
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DJANGO_SETTINGS_MODULE": "deepwork_site.settings",
        "SECRET_KEY": "bench-not-secret",
        "DEEPWORK_LOG_LEVEL": "ERROR",
        "DEEPWORK_VAR_DIR": str(var_dir),
        # Nothing changes during the run; the watcher stays out of the way.
        "DEEPWORK_WORKFLOW_TOOLS_POLL_SECONDS": "30",
    }


async def measure(
    project: Path, var_dir: Path, runs: int, page_size: int
) -> tuple[dict[str, list[float]], dict[str, int]]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    def client(toolsets: str, page: int | None = None) -> Client:
        return Client(
            StdioTransport(
                command=sys.executable,
                args=[
                    str(ROOT / "manage.py"),
                    "mcpserve",
                    "--path",
                    str(project),
                    "--toolsets",
                    toolsets,
                ],
                env=env_for(var_dir, page),
                cwd=str(project),
            ),
            mode="legacy",
            timeout=300,
        )

    async with (
        client("deepwork") as static,
        client("deepwork,workflow-tools") as dynamic,
        client("deepwork,workflow-tools", page_size) as paged,
    ):
        # What each measurement lists: Client.list_tools follows nextCursor to the end.
        listings = {
            "static": static.list_tools,
            "workflow-tools": dynamic.list_tools,
            "paged first page": lambda: paged.list_tools_mcp(),
            "paged full walk": paged.list_tools,
        }
        counts: dict[str, int] = {}
        for key, listing in listings.items():
            answer = await listing()
            counts[key] = len(answer.tools if hasattr(answer, "tools") else answer)
        print(f"tools listed: {counts}", file=sys.stderr)
        for listing in listings.values():
            for _ in range(3):
                await listing()
        times: dict[str, list[float]] = {key: [] for key in listings}
        for run in range(runs):
            order = list(listings) if run % 2 == 0 else list(reversed(listings))
            for key in order:
                start = time.perf_counter()
                await listings[key]()
                times[key].append(time.perf_counter() - start)
    return times, counts


def exchange(server: subprocess.Popen[bytes], message: dict[str, object]) -> bytes:
    """Write ``message`` as one line; a request's answer is the next line, as bytes."""
    assert server.stdin is not None
    assert server.stdout is not None
    server.stdin.write(json.dumps(message).encode() + b"\n")
    server.stdin.flush()
    return b"" if "id" not in message else server.stdout.readline()


ERA_PARAMS: dict[str, dict[str, object]] = {
    "handshake": {},
    # A 2026-07-28 client names its version on every request, with no initialize.
    "2026-07-28": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}


def listing_times(project: Path, var_dir: Path, era: str, runs: int) -> tuple[list[float], int]:
    """Seconds of each of ``runs`` tools/list exchanges with one mcpserve, and the answer's
    size in bytes (the first three listings, which sync the catalog, are not timed)."""
    server = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "manage.py"),
            "mcpserve",
            "--path",
            str(project),
            "--toolsets",
            "deepwork,workflow-tools",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env_for(var_dir),
        cwd=str(project),
    )
    samples: list[float] = []
    size = 0
    try:
        if era == "handshake":
            exchange(
                server,
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "bench", "version": "1"},
                    },
                },
            )
            exchange(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        for request_id in range(1, 4 + runs):
            request = {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/list",
                "params": ERA_PARAMS[era],
            }
            start = time.perf_counter()
            answer = exchange(server, request)
            elapsed = time.perf_counter() - start
            if not answer.startswith(b'{"jsonrpc":"2.0","id":%d,"result"' % request_id):
                raise RuntimeError(f"tools/list failed: {answer[:300]!r}")
            if request_id > 3:
                samples.append(elapsed)
            size = len(answer)
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=60)
    return samples, size


def server_times(base: Path, runs: int) -> dict[str, dict[str, float]]:
    """p50 ms and size of one tools/list as the server spends it, per workflow count and era."""
    var_dir = base / "var-server"
    var_dir.mkdir()
    migrated.copy_into(var_dir)
    found: dict[str, dict[str, float]] = {}
    for label, jobs, per_job in sizes():
        project = make_project((base / f"s-{jobs}-{per_job}").resolve(), jobs, per_job)
        for era in ERA_PARAMS:
            samples, size = listing_times(project, var_dir, era, runs)
            found[f"{label}, {era}"] = {
                "p50_ms": statistics.median(samples) * 1000,
                "answer_kb": size / 1024,
            }
    return found


def count_queries(base: Path) -> tuple[dict[str, int], dict[str, float]]:
    """Queries of one steady listing of the provider, with 10 and with 1,000 workflows, and
    the provider's own time per listing (p50, ms): the rest of a listing's time is FastMCP's
    and the MCP SDK's per-tool work."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deepwork_site.settings")
    os.environ["DEEPWORK_VAR_DIR"] = str(base / "var-queries")
    migrated.copy_into(base / "var-queries")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from mcp_bridge.server import create_server

    call_command("migrate", interactive=False, verbosity=0)
    found: dict[str, int] = {}
    own: dict[str, float] = {}
    for label, jobs, per_job in sizes(both=True):
        project = make_project(base / f"q-{jobs}-{per_job}", jobs, per_job)
        provider = create_server(project, toolsets=["workflow-tools"]).workflow_tools
        provider._build()
        provider._build()
        with CaptureQueriesContext(connection) as queries:
            snapshot = provider._build()
        found[label] = len(queries)
        samples = []
        for _ in range(50):
            start = time.perf_counter()
            provider._build()
            samples.append(time.perf_counter() - start)
        own[label] = statistics.median(samples) * 1000
        print(
            f"{label}: {len(snapshot.tools)} tools, {len(queries)} queries, "
            f"provider {own[label]:.2f} ms",
            file=sys.stderr,
        )
    return found, own


SMOKE = False  # --smoke: the smallest sizes, and the server's own time at the larger alone


def sizes(both: bool = False) -> list[tuple[str, int, int]]:
    """(label, jobs, workflows per job): a few workflows, then the full count."""
    full = (f"{JOBS * WORKFLOWS_PER_JOB:,} workflows", JOBS, WORKFLOWS_PER_JOB)
    return [("10 workflows", 1, 10), full] if both or not SMOKE else [full]


def main() -> int:
    global SMOKE, JOBS, WORKFLOWS_PER_JOB
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--page-size", type=int, default=50)
    parser.add_argument(
        "--server-only", action="store_true", help="only the server's own time per listing"
    )
    # A listing takes milliseconds here: many are cheap, and steady the median on a busy machine.
    parser.add_argument("--server-runs", type=int, default=200)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest run, for the test suite: 6 workflows, one listing each, no target",
    )
    args = parser.parse_args()
    if args.smoke:
        SMOKE, JOBS, WORKFLOWS_PER_JOB = True, 2, 3
        args.runs, args.server_runs, args.page_size = 1, 1, 4
    with tempfile.TemporaryDirectory(prefix="wftools-bench-") as tmp:
        base = Path(tmp)
        server = server_times(base, args.server_runs)
        if args.server_only:
            print_server_times(server, args.server_runs)
            return 0
        project = make_project((base / "project").resolve(), JOBS, WORKFLOWS_PER_JOB)
        var_dir = base / "var"
        var_dir.mkdir()
        migrated.copy_into(var_dir)
        times, counts = asyncio.run(measure(project, var_dir, args.runs, args.page_size))
        queries, own = count_queries(base)
    p50 = {key: statistics.median(values) * 1000 for key, values in times.items()}
    ratios = {key: p50[key] / p50["static"] for key in p50 if key != "static"}
    constant = len(set(queries.values())) == 1
    result = {
        "runs": args.runs,
        "page_size": args.page_size,
        "tools_listed": counts,
        "p50_ms": p50,
        "ratios": ratios,
        "target_ratio": TARGET_RATIO,
        "first_page_ratio_met": ratios["paged first page"] <= TARGET_RATIO,
        "unpaged_ratio_met": ratios["workflow-tools"] <= TARGET_RATIO,
        "queries_per_listing": queries,
        "queries_constant": constant,
        "provider_ms_per_listing": own,
        "server_ms_per_listing": server,
        "server_bar_ms": SERVER_BAR_MS,
    }
    if not SMOKE:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"tools/list p50 (ms), {args.runs} runs, {JOBS * WORKFLOWS_PER_JOB:,} workflows; "
        f"target <= {TARGET_RATIO}x:"
    )
    print(f"  {'static tools alone':34s} {p50['static']:8.2f}  ({counts['static']} tools)")
    labels = {
        "workflow-tools": "unpaged (the default)",
        "paged first page": f"first page of {args.page_size}",
        "paged full walk": f"full walk, pages of {args.page_size}",
    }
    for key, label in labels.items():
        verdict = "smoke" if SMOKE else "met" if ratios[key] <= TARGET_RATIO else "MISSED"
        print(
            f"  {label:34s} {p50[key]:8.2f}  {ratios[key]:6.2f}x  {verdict}  ({counts[key]} tools)"
        )
    print(f"queries per listing: {queries} ({'constant' if constant else 'NOT constant'})")
    print(f"the provider's own time per listing (p50 ms): {own}")
    print_server_times(server, args.server_runs)
    return 0


def print_server_times(server: dict[str, dict[str, float]], runs: int) -> None:
    print(
        f"the server's own time per tools/list (p50 ms, {runs} runs; unpaged, deepwork and "
        f"workflow-tools; answer read as bytes, not parsed; bar at 1,000 workflows: "
        f"{SERVER_BAR_MS:g} ms):"
    )
    for key, row in server.items():
        verdict = ""
        if key.startswith(f"{JOBS * WORKFLOWS_PER_JOB:,} ") and not SMOKE:
            verdict = "  kept" if row["p50_ms"] <= SERVER_BAR_MS else "  OVER THE BAR"
        print(f"  {key:34s} {row['p50_ms']:8.2f}  ({row['answer_kb']:.0f} KB){verdict}")


if __name__ == "__main__":
    sys.exit(main())
