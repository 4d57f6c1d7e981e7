"""Benchmark: a task's exact file changes on a 10,000-file repository with 100 files changed.

Generates a git repository of 10,000 committed files, then changes 100 of them (modified,
deleted, staged, plus new untracked files) and times, in the same run and on the same
repository:

- ``git status --porcelain``: git's own change detection, the floor;
- ``snapshot_take`` and ``changes_since`` alone (``workflows.changes``);
- the tracker's ``start_task`` + ``complete_task`` services (database included, a throwaway
  SQLite database), whose p50 must be within 3x of ``git status --porcelain``;
- a DeepWork step's ``changes_and_snapshot`` (the finished step's changes and the next step's
  start snapshot from one look at the repository), which a transition's answer waits for
  up to 100 ms.

Usage: .venv/bin/python tests/bench/files_bench.py [--runs N] [--files N] [--changed N]
       [--smoke]
Missed targets are reported, not failed (this is a measurement); exit 1 only if the harness
breaks.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import migrated  # the benchmarks' folder is the script's, first on the path

ROOT = Path(__file__).resolve().parents[2]
TARGET_RATIO = 3.0


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def make_repo(base: Path, files: int, changed: int) -> Path:
    repo = base / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "bench@example.com")
    _git(repo, "config", "user.name", "bench")
    for n in range(files):
        folder = repo / f"pkg{n // 500:02d}" / f"mod{(n // 50) % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file{n:05d}.py").write_text(f"# file {n}\nVALUE = {n}\n" + "x = 1\n" * 20)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "initial")
    # A quarter each: modified on disk, modified and staged, deleted, new and untracked.
    quarter = max(1, changed // 4)
    paths = sorted(p for p in repo.rglob("*.py"))
    step = max(1, len(paths) // (3 * quarter))
    picked = paths[::step][: 3 * quarter]
    for path in picked[:quarter]:
        path.write_text(path.read_text() + "# changed\n")
    for path in picked[quarter : 2 * quarter]:
        path.write_text(path.read_text() + "# staged\n")
        _git(repo, "add", str(path.relative_to(repo)))
    for path in picked[2 * quarter :]:
        path.unlink()
    for n in range(changed - 3 * quarter):
        folder = repo / f"pkg{n % 20:02d}"  # a new one when there are fewer than 20 packages
        folder.mkdir(exist_ok=True)
        (folder / f"new{n:03d}.py").write_text(f"NEW = {n}\n")
    return repo


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    fn()  # warm caches (page cache, git's index refresh) so every method sees the same disk
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--changed", type=int, default=100)
    parser.add_argument("--keep", action="store_true", help="keep the temporary repository")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest run, for the test suite: 200 files, 12 changed, one run each, no "
        "target (fails only on an error)",
    )
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.files, args.changed = 1, 200, 12

    base = Path(tempfile.mkdtemp(prefix="dw-files-bench-"))
    os.environ["DEEPWORK_VAR_DIR"] = str(base / "var")
    os.environ.pop("DATABASE_URL", None)
    migrated.copy_into(base / "var")
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deepwork_site.settings")
    try:
        import django

        django.setup()
        from django.core.management import call_command

        from tracker import services as tracker
        from workflows import changes
        from workflows.services.agents import agent_ensure
        from workflows.services.projects import project_ensure

        call_command("migrate", verbosity=0)
        print(f"Generating {args.files:,} files with {args.changed} changed ...", flush=True)
        repo = make_repo(base, args.files, args.changed)
        project = project_ensure(root_path=repo)
        agent = agent_ensure(project=project, agent_id="bench")
        workflow = tracker.tracked_workflow_start(project=project, agent=agent, name="bench")

        def porcelain() -> None:
            subprocess.run(
                ["git", "-C", str(repo), "status", "--porcelain"], check=True, capture_output=True
            )

        snapshot = changes.snapshot_take(root=repo)

        def task_pair() -> None:
            started = tracker.task_start(
                project=project,
                agent=agent,
                workflow_id=str(workflow.pk),
                name="t",
                goal="g",
                root=repo,
            )
            tracker.task_complete(
                project=project,
                agent=agent,
                task_id=str(started.task.pk),
                status="success",
                summary="s",
                root=repo,
            )

        rows = [
            ("git status --porcelain", timed(porcelain, args.runs)),
            ("snapshot_take", timed(lambda: changes.snapshot_take(root=repo), args.runs)),
            (
                "changes_since",
                timed(lambda: changes.changes_since(root=repo, snapshot=snapshot), args.runs),
            ),
            *(
                [
                    (
                        "changes_and_snapshot",
                        timed(
                            lambda: changes.changes_and_snapshot(root=repo, snapshot=snapshot),
                            args.runs,
                        ),
                    )
                ]
                if hasattr(changes, "changes_and_snapshot")
                else []
            ),
            ("start_task + complete_task", timed(task_pair, args.runs)),
        ]
        found = changes.changes_since(root=repo, snapshot=changes.snapshot_take(root=repo))
        assert not found.paths(), f"an untouched repository reported changes: {found}"
        floor = statistics.median(rows[0][1])
        print(f"\n{args.files:,} files, {args.changed} changed, {args.runs} runs each")
        print(f"{'':30} {'p50 ms':>8} {'p95 ms':>8} {'x git':>6}")
        for name, samples in rows:
            p50 = statistics.median(samples)
            p95 = sorted(samples)[max(0, int(len(samples) * 0.95) - 1)]
            print(f"{name:30} {p50:8.1f} {p95:8.1f} {p50 / floor:6.2f}")
        ratio = statistics.median(rows[-1][1]) / floor
        verdict = "smoke" if args.smoke else "PASS" if ratio <= TARGET_RATIO else "FAIL"
        print(f"\nstart_task + complete_task: {ratio:.2f}x git status (target <= 3x): {verdict}")
        return 0
    finally:
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
