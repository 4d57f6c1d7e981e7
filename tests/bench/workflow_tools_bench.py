#!/usr/bin/env python
"""``make bench``: ``tools/list`` with 1,000 published workflows against the static tools alone.

Two ``mcpserve`` stdio processes on one project whose five jobs hold 200 workflows each
(1,000 published workflows), on a throwaway SQLite database (``DEEPWORK_VAR_DIR``):

- ``static``: ``--toolsets deepwork`` (the eight static tools);
- ``workflow-tools``: ``--toolsets deepwork,workflow-tools`` (those, three more and one tool per
  workflow: 1,013 tools with the standard jobs' two).

Each is listed ``--runs`` times after a warm-up (the first listing syncs the catalog and
chooses the 1,000 names), interleaved, by the same client on the handshake era (no client-side
cache). Target: the workflow-tools p50 is within 3x of the static p50. The database queries of
one steady listing are counted in this process through the provider itself, with 10 and with
1,000 workflows: they must be the same number.

Results go to stdout and ``.bench/workflow_tools.json``. A missed target does not fail the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / ".bench" / "workflow_tools.json"
JOBS = 5
WORKFLOWS_PER_JOB = 200  # the most one job.yml may hold
TARGET_RATIO = 3.0


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


def env_for(var_dir: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DJANGO_SETTINGS_MODULE": "deepwork_site.settings",
        "SECRET_KEY": "bench-not-secret",
        "DEEPWORK_LOG_LEVEL": "ERROR",
        "DEEPWORK_VAR_DIR": str(var_dir),
        # Nothing changes during the run; the watcher stays out of the way.
        "DEEPWORK_WORKFLOW_TOOLS_POLL_SECONDS": "30",
    }


async def measure(project: Path, var_dir: Path, runs: int) -> dict[str, list[float]]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    def client(toolsets: str) -> Client:
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
                env=env_for(var_dir),
                cwd=str(project),
            ),
            mode="legacy",
            timeout=300,
        )

    times: dict[str, list[float]] = {"static": [], "workflow-tools": []}
    async with client("deepwork") as static, client("deepwork,workflow-tools") as dynamic:
        clients = {"static": static, "workflow-tools": dynamic}
        counts = {key: len(await c.list_tools()) for key, c in clients.items()}
        print(f"tools listed: {counts}", file=sys.stderr)
        for c in clients.values():
            for _ in range(3):
                await c.list_tools()
        for run in range(runs):
            order = list(clients) if run % 2 == 0 else list(reversed(clients))
            for key in order:
                start = time.perf_counter()
                await clients[key].list_tools()
                times[key].append(time.perf_counter() - start)
    return times


def count_queries(base: Path) -> tuple[dict[str, int], dict[str, float]]:
    """Queries of one steady listing of the provider, with 10 and with 1,000 workflows, and
    the provider's own time per listing (p50, ms): the rest of a listing's time is FastMCP's
    and the MCP SDK's per-tool work."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deepwork_site.settings")
    os.environ["DEEPWORK_VAR_DIR"] = str(base / "var-queries")
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
    for label, jobs, per_job in (("10 workflows", 1, 10), ("1,000 workflows", JOBS, 200)):
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wftools-bench-") as tmp:
        base = Path(tmp)
        project = make_project((base / "project").resolve(), JOBS, WORKFLOWS_PER_JOB)
        var_dir = base / "var"
        var_dir.mkdir()
        times = asyncio.run(measure(project, var_dir, args.runs))
        queries, own = count_queries(base)
    p50 = {key: statistics.median(values) * 1000 for key, values in times.items()}
    ratio = p50["workflow-tools"] / p50["static"]
    constant = len(set(queries.values())) == 1
    result = {
        "runs": args.runs,
        "p50_ms": p50,
        "ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "ratio_met": ratio <= TARGET_RATIO,
        "queries_per_listing": queries,
        "queries_constant": constant,
        "provider_ms_per_listing": own,
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"tools/list p50: static {p50['static']:.2f} ms, 1,000 workflows "
        f"{p50['workflow-tools']:.2f} ms: {ratio:.2f}x (target <= {TARGET_RATIO}x: "
        f"{'met' if ratio <= TARGET_RATIO else 'MISSED'})"
    )
    print(f"queries per listing: {queries} ({'constant' if constant else 'NOT constant'})")
    print(f"the provider's own time per listing (p50 ms): {own}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
