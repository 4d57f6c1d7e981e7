"""Smoke runs of ``make bench``'s benchmarks: each script in its smallest mode (a few rows, a
few calls, no target checked, no reference install), so a change that breaks a benchmark's
harness fails the suite instead of waiting for the next ``make bench``. Speed is not asserted:
only that the script runs to its end and prints its table.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tests" / "bench"

pytestmark = pytest.mark.e2e

# script -> (its smallest mode's arguments, a line its report must print)
SMOKE: dict[str, tuple[list[str], str]] = {
    "run_bench.py": (["--smoke"], "A transition on the 10,000-file repository"),
    "insights_bench.py": (["--smoke"], "Insights on sqlite"),
    "history_bench.py": (["--sessions", "20", "--cycles", "2"], "before and after the history"),
    "files_bench.py": (["--runs", "2", "--files", "200", "--changed", "10"], "git status"),
    "gate_bench.py": (["--runs", "1"], "finished_step with 4 reviews"),
}


@pytest.mark.parametrize("script", list(SMOKE))
def test_the_benchmark_runs_in_its_smallest_mode(script, tmp_path):
    args, expected = SMOKE[script]
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")
    }
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        cwd=ROOT,
        env={**env, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stderr[-3000:]}"
    assert expected in done.stdout, done.stdout[-3000:]
