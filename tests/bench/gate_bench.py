"""Benchmark: `finished_step` on a step with four independent reviews, each taking 0.5 s.

Runs `manage.py mcpserve --external-runner-cmd <fake reviewer>` over stdio on a throwaway
project and database, and times `finished_step` on a step whose `files` output of four files
is reviewed one file at a time. Reviews run concurrently, so the call should take close to
one review's time (0.5 s), not four (2 s). Prints p50/p95 and the ratio to one review.
Usage: .venv/bin/python tests/bench/gate_bench.py [--runs N] [--smoke]
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
import textwrap
import time
from pathlib import Path

import migrated  # the benchmarks' folder is the script's, first on the path

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "reviews" / "fake_reviewer.py"
REVIEW_SECONDS = 0.5
FILES = 4

JOB = textwrap.dedent(
    """\
    name: gate_bench
    version: "1.0.0"
    summary: "Four pages, each reviewed on its own"
    common_job_info_provided_to_all_steps_at_runtime: "Benchmark"
    workflows:
      - name: main
        summary: "One reviewed step"
        steps: [pages]
    steps:
      - id: pages
        name: "Pages"
        description: "Write pages"
        instructions_file: steps/pages.md
        outputs:
          pages: {type: files, description: "Pages", required: true}
        reviews:
          - run_each: pages
            quality_criteria: {"Readable": "The page reads well."}
    """
)


def make_project(base: Path) -> Path:
    project = base / "project"
    job = project / ".deepwork" / "jobs" / "gate_bench"
    (job / "steps").mkdir(parents=True)
    (job / "job.yml").write_text(JOB)
    (job / "steps" / "pages.md").write_text("# Pages\n")
    for n in range(FILES):
        (project / f"page{n}.md").write_text(f"page {n}\n")
    return project


async def measure(project: Path, var_dir: Path, runs: int) -> list[float]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DEEPWORK_VAR_DIR": str(var_dir),
        "DEEPWORK_LOG_LEVEL": "WARNING",
        "FAKE_REVIEW": "pass",
        "FAKE_SLEEP": str(REVIEW_SECONDS),
        "FAKE_REVIEW_LOG": str(var_dir / "reviews"),
    }
    transport = StdioTransport(
        command=sys.executable,
        args=[
            str(ROOT / "manage.py"),
            "mcpserve",
            "--path",
            str(project),
            "--external-runner-cmd",
            f"{sys.executable} {FAKE}",
        ],
        env=env,
        cwd=str(project),
    )
    pages = [f"page{n}.md" for n in range(FILES)]
    timings = []
    async with Client(transport, mode="legacy") as client:
        for _ in range(runs + 1):  # the first run warms up
            await client.call_tool(
                "start_workflow",
                {"goal": "bench", "job_name": "gate_bench", "workflow_name": "main"},
            )
            started = time.perf_counter()
            result = await client.call_tool("finished_step", {"outputs": {"pages": pages}})
            timings.append(time.perf_counter() - started)
            status = json.loads(result.content[0].text)["status"]
            if status != "workflow_complete":
                raise SystemExit(f"unexpected status {status!r}")
    return timings[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest run, for the test suite: one timed call, no target",
    )
    args = parser.parse_args()
    if args.smoke:
        args.runs = 1
    with tempfile.TemporaryDirectory(prefix="gate-bench-") as tmp:
        base = Path(tmp)
        var_dir = base / "var"
        var_dir.mkdir()
        project = make_project(base)
        if not migrated.copy_into(var_dir):
            subprocess.run(
                [sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"],
                env={**os.environ, "DEEPWORK_VAR_DIR": str(var_dir)},
                check=True,
            )
        timings = asyncio.run(measure(project, var_dir, args.runs))
    p50 = statistics.median(timings)
    p95 = sorted(timings)[max(0, round(0.95 * len(timings)) - 1)]
    ratio = p50 / REVIEW_SECONDS
    verdict = "smoke" if args.smoke else "PASS" if ratio < 1.5 else "FAIL"
    print(
        f"finished_step with {FILES} reviews of {REVIEW_SECONDS} s each: "
        f"p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms over {len(timings)} runs; "
        f"{ratio:.2f}x one review (sequential would be {FILES:.0f}x); "
        f"target < 1.5x one review: {verdict}"
    )


if __name__ == "__main__":
    main()
