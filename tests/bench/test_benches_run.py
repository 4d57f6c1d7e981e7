"""Smoke runs of ``make bench``'s benchmarks: each script in its smallest mode (``--smoke``: a few
rows, a few calls, no target checked, no reference install), so a change that breaks a
benchmark's harness fails the suite instead of waiting for the next ``make bench``. Speed is not
asserted: only that the script runs to its end and prints its report.

The benchmarks that can use PostgreSQL (the DAG and hosted ones) are database tests: on SQLite
they run on a throwaway SQLite database of their own, and CI's PostgreSQL lane (``make test-db``)
runs them on a throwaway database of the PostgreSQL server it tests against.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.bench import migrated
from tests.support.processes import child_database_url, child_env

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tests" / "bench"

pytestmark = pytest.mark.e2e

# script -> a line its report must print
SMOKE: dict[str, str] = {
    "run_bench.py": "A transition on the 10,000-file repository",
    "history_bench.py": "before and after the history",
    "gate_bench.py": "finished_step with 4 reviews",
    "files_bench.py": "start_task + complete_task: ",
    "dashboard_bench.py": "Server time with 200 sessions",
    "workflow_tools_bench.py": "queries per listing: ",
    "insights_bench.py": "Insights on sqlite",
    "tracker_bench.py": "2. get_context, every include",
    # One start each of `deepwork-server mcp` and `serve` on a new data folder and a warm one.
    "first_call_bench.py": "| `mcp`: spawn to first tool call answered |",
}
# On the test database's server when it is PostgreSQL (CI's PostgreSQL lane).
ON_THE_TEST_SERVER: dict[str, str] = {
    "dag_bench.py": "double assignments        0",
    "hosted_bench.py": "Hosted MCP: 2 agents x 2 steps",
}


# Smoke runs at a time: much of each is spent waiting on its own servers and clients.
AT_ONCE = 2


def migrate_once(base: Path) -> Path:
    """One database migrated for every smoke run: each benchmark copies it into the data
    folders it makes instead of migrating a new one (``tests/bench/migrated.py``)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "--noinput", "-v0"],
        cwd=ROOT,
        env=child_env(DEEPWORK_VAR_DIR=str(base / "var")),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"migrate failed:\n{done.stderr[-3000:]}")
    migrated.make(base / "var", base / "migrated.sqlite3")
    return base / "migrated.sqlite3"


def server_args(script: str) -> list[str]:
    """On PostgreSQL, a database of the benchmark's own beside the test database (it makes and
    drops it); on SQLite, none (a throwaway SQLite database)."""
    from django.db import connection

    if script not in ON_THE_TEST_SERVER or connection.vendor != "postgresql":
        return []
    server = child_database_url().rsplit("/", 1)[0]
    return ["--database-url", f"{server}/deepwork_{script.removesuffix('.py')}_smoke"]


def run_smoke(script: str, database: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")
    }
    return subprocess.run(
        [sys.executable, str(BENCH / script), "--smoke", *server_args(script)],
        cwd=ROOT,
        env={**env, "TMPDIR": str(tmp), migrated.ENV: str(database)},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def smoke_runs(request, tmp_path_factory) -> Iterator[dict[str, Future]]:
    """The smoke run of every benchmark whose test is selected, started together (``AT_ONCE`` at
    a time) after one migration; each test waits for its own."""
    scripts = [
        item.callspec.params["script"]
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    ]
    database = migrate_once(tmp_path_factory.mktemp("bench-migrated"))
    with ThreadPoolExecutor(AT_ONCE) as pool:
        yield {
            script: pool.submit(run_smoke, script, database, tmp_path_factory.mktemp(script))
            for script in scripts
        }
        pool.shutdown(cancel_futures=True)


def finished(script: str, smoke_runs: dict[str, Future]) -> str:
    done = smoke_runs[script].result()
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.parametrize("script", list(SMOKE))
def test_the_benchmark_runs_in_its_smallest_mode(script, smoke_runs):
    assert SMOKE[script] in finished(script, smoke_runs)


@pytest.mark.django_db
@pytest.mark.parametrize("script", list(ON_THE_TEST_SERVER))
def test_the_database_benchmark_runs_in_its_smallest_mode(script, smoke_runs):
    from django.db import connection

    out = finished(script, smoke_runs)
    assert ON_THE_TEST_SERVER[script] in out
    vendor = "PostgreSQL" if connection.vendor == "postgresql" else "SQLite"
    assert re.search(rf"\b{vendor}\b", out), out[-3000:]
