"""Benchmark the insights pages and exports at scale.

1. Seeds a throwaway database (PostgreSQL with ``--database-url``, else SQLite under
   ``.bench/insights/``; reused while its counts match) with 100k sessions over the last 365
   days, 300k step runs, 1M events, 20k reviews, 1k rulings and a tracker's tasks, decisions
   and blockers. The big tables are written with COPY (PostgreSQL) or executemany (SQLite)
   rather than one ORM object per row: seeding takes a minute or two, not a quarter hour.
2. Server time and query count of each insights page and each export (dashboard CSV, REST
   JSON) and a session's history, in-process (p50/p95 over repeated requests after a
   warm-up), for the default range (the last 30 days) and for a whole year, unfiltered and
   filtered by a generation, a job and an agent. Every row is held to p95 < 200 ms.

Usage: .venv/bin/python tests/bench/insights_bench.py [--database-url postgres://...]
       [--runs 20] [--reseed]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import migrated  # the benchmarks' folder is the script's, first on the path

ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = ROOT / ".bench" / "insights"
VAR_DIR = BENCH_DIR / "var"
PROJECT_DIR = BENCH_DIR / "project"
SECRET = "insights-bench-not-secret"

SESSIONS = 100_000
RUNS_PER_SESSION = 3
EVENTS_PER_SESSION = 10
REVIEWS = 20_000
RULINGS = 1_000
AGENTS = 100
DAYS = 365
TARGET_MS = 200.0
COLD: dict = {}  # marks a page measured with its charts drawn on every request

JOB_YML = """\
name: bench
version: "1.0.0"
summary: "Benchmark job"
common_job_info_provided_to_all_steps_at_runtime: "Benchmark"
workflows:
  - name: main
    summary: "Three steps"
    steps: [gather, draft, wrap_up]
  - name: quick
    summary: "One step"
    steps: [gather]
steps:
"""
STEPS = ("gather", "draft", "wrap_up")
CRITERIA = ("Complete", "Clear", "Cites sources", "No placeholders")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def configure(database_url: str | None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deepwork_site.settings")
    os.environ["DEEPWORK_VAR_DIR"] = str(VAR_DIR)
    os.environ["SECRET_KEY"] = SECRET
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DEEPWORK_LOG_LEVEL", "WARNING")
    if database_url:
        os.environ["DATABASE_URL"] = database_url
        _create_postgres_database(database_url)
    else:
        os.environ.pop("DATABASE_URL", None)
        migrated.copy_into(VAR_DIR)
    sys.path.insert(0, str(ROOT))


def _create_postgres_database(url: str) -> None:
    import psycopg
    from psycopg import sql

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def write_project() -> None:
    job = PROJECT_DIR / ".deepwork" / "jobs" / "bench"
    (job / "steps").mkdir(parents=True, exist_ok=True)
    text = JOB_YML
    for step in STEPS:
        text += (
            f"  - id: {step}\n    name: {step}\n    description: {step}\n"
            f"    instructions_file: steps/{step}.md\n"
            f"    outputs:\n      {step}.md: {{type: file, description: out, required: true}}\n"
            "    reviews: []\n"
        )
        (job / "steps" / f"{step}.md").write_text(f"# {step}\n")
    (job / "job.yml").write_text(text)


class Writer:
    """Rows into one table, fast: COPY on PostgreSQL, executemany on SQLite."""

    def __init__(self, connection) -> None:
        self.connection = connection
        self.postgres = connection.vendor == "postgresql"

    def value(self, v):
        if isinstance(v, dt.datetime):
            if self.postgres:
                return v
            return v.astimezone(dt.UTC).replace(tzinfo=None).isoformat(sep=" ")
        if isinstance(v, (dict, list)):
            return json.dumps(v)
        if isinstance(v, bool) and not self.postgres:
            return int(v)
        return v

    def write(self, table: str, columns: list[str], rows) -> int:
        # A column added to the model since this benchmark was written gets its default, as
        # the ORM would give it (a NOT NULL column without one would fail PostgreSQL's COPY).
        defaults = _defaults_missing(table, columns)
        if defaults:
            columns = [*columns, *defaults]
            extra = tuple(defaults.values())
            rows = (tuple(row) + extra for row in rows)
        count = 0
        with self.connection.cursor() as cursor:
            if self.postgres:
                raw = cursor.cursor  # psycopg's own cursor under Django's wrapper
                names = ", ".join(columns)
                with raw.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row([self.value(v) for v in row])
                        count += 1
            else:
                marks = ", ".join("?" * len(columns))
                sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
                batch = []
                for row in rows:
                    batch.append([self.value(v) for v in row])
                    if len(batch) == 20_000:
                        cursor.executemany(sql, batch)
                        count += len(batch)
                        batch = []
                if batch:
                    cursor.executemany(sql, batch)
                    count += len(batch)
        return count


def _defaults_missing(table: str, columns: list[str]) -> dict[str, object]:
    """The columns of ``table``'s model left out of ``columns`` that have a default, and their
    default values."""
    from django.apps import apps

    for model in apps.get_models():
        if model._meta.db_table == table:
            return {
                field.column: field.get_default()
                for field in model._meta.concrete_fields
                if field.column not in columns and field.has_default()
            }
    return {}


def tally(rebuild) -> None:
    began = time.perf_counter()
    counted = rebuild()
    log(
        f"seed: tallies rebuilt ({counted.session_rows:,} session, {counted.agent_rows:,} "
        f"agent, {counted.step_time_rows:,} step-time rows), {time.perf_counter() - began:.0f} s"
    )


def seed(reseed: bool) -> None:
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.core.management.color import no_style
    from django.db import connection, transaction
    from django.utils import timezone

    from insights.models import SessionTally
    from insights.tallies import insight_tallies_rebuild
    from reviews.models import HumanDecision, ReviewResult
    from tracker.models import Decision, Issue, Task, TrackedWorkflow
    from workflows.models import Agent, Event, Job, StepRun, WorkflowSession
    from workflows.services.catalog import Catalog
    from workflows.services.projects import project_ensure

    call_command("migrate", verbosity=0)
    if not User.objects.filter(username="bench").exists():
        User.objects.create_superuser("bench", password="bench-password")
    if (
        not reseed
        and WorkflowSession.objects.count() >= SESSIONS
        and Event.objects.count() >= SESSIONS * EVENTS_PER_SESSION
    ):
        log("seed: reusing the seeded database")
        if not SessionTally.objects.exists():
            tally(insight_tallies_rebuild)
        # A migration since the last run may have added tables or columns: fresh statistics,
        # as autovacuum would have them on a live server.
        analyze(connection)
        return
    began = time.perf_counter()
    write_project()
    project = project_ensure(root_path=PROJECT_DIR)
    Catalog(project).view()
    job = Job.objects.get(project=project, name="bench", is_current=True)
    workflows = {w.name: w for w in job.workflows.all()}
    steps = {s.step_id: s for s in job.steps.all()}
    agents = [
        Agent.objects.get_or_create(project=project, agent_id=f"bench-{n:03d}")[0]
        for n in range(AGENTS)
    ]
    user = User.objects.get(username="bench")
    rng = random.Random(14)
    now = timezone.now()
    first_session = (
        WorkflowSession.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    ) + 1
    first_run = (StepRun.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
    writer = Writer(connection)
    # Ids rise with time, as they do when sessions are really started one after another.
    starts = sorted(
        now - dt.timedelta(seconds=rng.uniform(0, DAYS * 86400)) for _ in range(SESSIONS)
    )
    sessions = []  # (pk, started, agent pk, status, ended)
    durations: list[list[dt.timedelta]] = []  # each session's steps' times
    for n, started in enumerate(starts):
        recent = now - started < dt.timedelta(hours=2)
        roll = rng.random()
        status = "active" if recent and roll < 0.5 else "aborted" if roll < 0.12 else "completed"
        took = [
            dt.timedelta(seconds=rng.lognormvariate(4 + index, 0.8)) for index in range(len(STEPS))
        ]
        # A session ends with its last step, or (aborted) a while after its last finished one.
        ended = (
            None
            if status == "active"
            else started + sum(took, dt.timedelta())
            if status == "completed"
            else started + sum(took[:-1], dt.timedelta()) + dt.timedelta(minutes=rng.uniform(1, 9))
        )
        durations.append(took)
        sessions.append((first_session + n, started, agents[n % AGENTS].pk, status, ended))

    with transaction.atomic():
        s_cols = [
            "id",
            "session_id",
            "project_id",
            "agent_id",
            "job_id",
            "workflow_id",
            "job_name",
            "workflow_name",
            "goal",
            "status",
            "current_entry_index",
            "current_step_id",
            "revision",
            "aborted_by",
            "abort_reason",
            "started_at",
            "updated_at",
            "completed_at",
            "generation",
            "conversation_id",
            "conversation_agent",
            "inputs",
        ]
        written = writer.write(
            WorkflowSession._meta.db_table,
            s_cols,
            (
                (
                    pk,
                    f"i{pk:07x}",
                    project.pk,
                    agent,
                    job.pk,
                    workflows["quick" if pk % 10 == 0 else "main"].pk,
                    "bench",
                    "quick" if pk % 10 == 0 else "main",
                    f"Benchmark goal {pk}",
                    status,
                    2,
                    "wrap_up",
                    3,
                    "",
                    "stopped" if status == "aborted" else None,
                    started,
                    ended or started,
                    ended,
                    # A quarter of the sessions are DeepWork 0.14's (the dialect filter).
                    "0.14" if pk % 4 == 3 else "0.9",
                    "",
                    "",
                    {},
                )
                for pk, started, agent, status, ended in sessions
            ),
        )
        log(f"seed: {written:,} sessions, {time.perf_counter() - began:.0f} s")

        runs = []  # (pk, session pk, step, started, ended, status)
        pk = first_run
        for (session_pk, started, _agent, status, _ended), took_each in zip(
            sessions, durations, strict=True
        ):
            at = started
            for index, step in enumerate(STEPS):
                took = took_each[index]
                finished = at + took
                run_status = "completed"
                if status != "completed" and index == len(STEPS) - 1:
                    run_status = "active" if status == "active" else "aborted"
                runs.append(
                    (
                        pk,
                        session_pk,
                        step,
                        index,
                        at,
                        None if run_status != "completed" else finished,
                        run_status,
                    )
                )
                pk += 1
                at = finished
        written = writer.write(
            StepRun._meta.db_table,
            [
                "id",
                "session_id",
                "step_def_id",
                "step_id",
                "entry_index",
                "status",
                "outputs",
                "notes",
                "quality_attempts",
                "started_at",
                "completed_at",
                "handoffs",
                "input_values",
                "files_status",
                "files_warnings",
            ],
            (
                (
                    rpk,
                    spk,
                    steps[step].pk,
                    step,
                    index,
                    status,
                    {f"{step}.md": f"{step}.md"},
                    None,
                    0,
                    at,
                    ended,
                    0,
                    {},
                    "pending",
                    [],
                )
                for rpk, spk, step, index, at, ended, status in runs
            ),
        )
        log(f"seed: {written:,} step runs, {time.perf_counter() - began:.0f} s")

        reviewed = rng.sample(
            [r for r in runs if r[2] == "wrap_up" and r[5] is not None], REVIEWS // 2
        )
        reviews = []
        for rpk, spk, step, _index, _at, ended, _status in reviewed:
            for attempt in (1, 2):
                passed = attempt == 2
                criteria = [
                    {
                        "criterion": c,
                        "passed": passed or rng.random() < 0.6,
                        "feedback": None if passed else f"{c}: needs work ({rng.randint(1, 50)})",
                    }
                    for c in CRITERIA
                ]
                reviews.append(
                    (
                        rpk,
                        spk,
                        step,
                        # The session's project, generation, job and workflow, as seeded above.
                        project.pk,
                        "0.14" if spk % 4 == 3 else "0.9",
                        job.pk,
                        "bench",
                        "quick" if spk % 10 == 0 else "main",
                        attempt,
                        "wrap_up.md",
                        "wrap_up.md",
                        passed,
                        "Looks fine" if passed else "Needs another pass",
                        criteria,
                        "external",
                        "claude",
                        None,
                        None,
                        rng.randint(2_000, 60_000),
                        ended - dt.timedelta(seconds=10 * (3 - attempt)),
                    )
                )
        written = writer.write(
            ReviewResult._meta.db_table,
            [
                "step_run_id",
                "session_id",
                "step_id",
                "project_id",
                "generation",
                "job_id",
                "job_name",
                "workflow_name",
                "attempt",
                "run_each",
                "target_file",
                "passed",
                "feedback",
                "criteria_results",
                "reviewer_kind",
                "reviewer",
                "override_reason",
                "error",
                "duration_ms",
                "created_at",
            ],
            reviews,
        )
        log(f"seed: {written:,} reviews, {time.perf_counter() - began:.0f} s")

        ruled = rng.sample(reviewed, RULINGS)
        written = writer.write(
            HumanDecision._meta.db_table,
            [
                "step_run_id",
                "kind",
                "decided_by_id",
                "decided_by_name",
                "reason",
                "created_at",
                "consumed_at",
            ],
            (
                (
                    rpk,
                    "override" if rng.random() < 0.7 else "request_changes",
                    user.pk,
                    rng.choice(["dana", "eve", "bench"]),
                    "ruled",
                    ended - dt.timedelta(seconds=5),
                    ended,
                )
                for rpk, _spk, _s, _i, _at, ended, _st in ruled
            ),
        )
        kinds = [
            "session_started",
            "step_started",
            "step_finished",
            "step_started",
            "step_finished",
            "step_started",
            "review_failed",
            "review_passed",
            "step_finished",
            "session_completed",
        ]
        review_round = {
            "step_ids": ["wrap_up"],
            "attempt": 1,
            "reviews": 1,
            "failed": 1,
            "override_reason": None,
        }
        written = writer.write(
            Event._meta.db_table,
            ["project_id", "session_id", "agent_id", "kind", "payload", "created_at"],
            (
                (
                    project.pk,
                    spk,
                    agent,
                    kind,
                    review_round if kind.startswith("review") else {"step_id": "gather"},
                    started + dt.timedelta(seconds=30 * k),
                )
                for spk, started, agent, _status, _ended in sessions
                for k, kind in enumerate(kinds[:EVENTS_PER_SESSION])
            ),
        )
        log(f"seed: {written:,} events, {time.perf_counter() - began:.0f} s")

        # A tracker's work: 200 tracked workflows, 2,000 tasks, 1,000 decisions, 500 issues.
        tracked = TrackedWorkflow.objects.bulk_create(
            TrackedWorkflow(project=project, agent=agents[n % AGENTS], name=f"Tracked {n}")
            for n in range(200)
        )
        tasks = []
        for n in range(2_000):
            started = now - dt.timedelta(seconds=rng.uniform(0, DAYS * 86400))
            tasks.append(
                Task(
                    project=project,
                    agent=agents[n % AGENTS],
                    workflow=tracked[n % 200],
                    name=f"task {n}",
                    goal="g",
                    status="SUCCESS",
                    started_at=started,
                    completed_at=started + dt.timedelta(minutes=20),
                    files_changed={
                        "added": [f"a{n}.py"],
                        "modified": ["x.py", "y.py"],
                        "deleted": [],
                    },
                )
            )
        tasks = Task.objects.bulk_create(tasks)
        Decision.objects.bulk_create(
            Decision(
                project=project,
                agent=t.agent,
                workflow=t.workflow,
                task=t,
                category=rng.choice(["ARCHITECTURE", "TRADE_OFF", "WORKAROUND", "OTHER"]),
                question="q",
                chosen="c",
                reasoning="r",
                created_at=t.completed_at,
            )
            for t in tasks[:1_000]
        )
        Issue.objects.bulk_create(
            Issue(
                project=project,
                agent=t.agent,
                workflow=t.workflow,
                task=t,
                type="UNCLEAR_REQUIREMENT",
                description=f"Question {n}",
                resolution="asked",
                requires_human_review=True,
                created_at=t.started_at,
                resolved_at=None if n % 5 == 0 else t.started_at + dt.timedelta(hours=3),
            )
            for n, t in enumerate(tasks[:500])
        )
        seed_dags(writer, project, agents, rng, now)
        with connection.cursor() as cursor:
            for statement in connection.ops.sequence_reset_sql(
                no_style(), [WorkflowSession, StepRun]
            ):
                cursor.execute(statement)
    # The rows went in past the event writer, which keeps the tallies as work happens.
    tally(insight_tallies_rebuild)
    analyze(connection)
    log(f"seed: done in {time.perf_counter() - began:.0f} s")


def analyze(connection) -> None:
    with connection.cursor() as cursor:
        # What autovacuum does on a live server: statistics, and the visibility map that lets
        # a count read an index alone.
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")


DAG_RUNS = 1_000
DAG_ROLES = ("swe", "review", "docs", "ops", "human")


def seed_dags(writer, project, agents, rng, now) -> None:
    """Multi-agent DAG executions over the year: ``DAG_RUNS`` runs of one defined ten-step
    plan (a fan-out of eight between a first and a last step), each step waiting a while for
    an agent of its role. One plan shared by every run keeps the seeding short; the insights
    read the runs, not how many plans there are."""
    from django.db.models import Max

    from dag import services as dag
    from workflows.models import Step, StepRun, WorkflowSession

    plan = [{"step_id": "start", "description": "Start", "assigned_role": "swe"}]
    plan += [
        {
            "step_id": f"part{n}",
            "description": "Part",
            "assigned_role": DAG_ROLES[n % len(DAG_ROLES)],
            "depends_on": ["start"],
        }
        for n in range(8)
    ]
    plan.append(
        {
            "step_id": "finish",
            "description": "Finish",
            "assigned_role": "review",
            "depends_on": [f"part{n}" for n in range(8)],
        }
    )
    defined = dag.dag_define(
        project=project, creator_id="bench", name="Bench DAG", description="", steps=plan
    )
    job = defined.job
    workflow = job.workflows.get()
    steps = {s.step_id: s.pk for s in Step.objects.filter(job=job)}
    first_session = (WorkflowSession.objects.aggregate(m=Max("pk"))["m"] or 0) + 1
    first_run = (StepRun.objects.aggregate(m=Max("pk"))["m"] or 0) + 1
    sessions, runs = [], []
    for n in range(DAG_RUNS):
        pk = first_session + n
        started = now - dt.timedelta(seconds=rng.uniform(3600, DAYS * 86400))
        at = started
        stamps = []  # (step, level, ready, assigned, completed)
        for level, names in enumerate((["start"], [f"part{k}" for k in range(8)], ["finish"])):
            ends = []
            for name in names:
                claimed = at + dt.timedelta(seconds=rng.expovariate(1 / 120))
                done = claimed + dt.timedelta(seconds=rng.lognormvariate(5, 0.7))
                stamps.append((name, level, at, claimed, done))
                ends.append(done)
            at = max(ends)
        sessions.append((pk, f"bench-dag-{n}", started, at, agents[n % len(agents)].pk))
        for name, level, ready, claimed, done in stamps:
            runs.append((first_run + len(runs), pk, name, level, ready, claimed, done, n))
    writer.write(
        WorkflowSession._meta.db_table,
        [
            "id",
            "session_id",
            "project_id",
            "agent_id",
            "job_id",
            "workflow_id",
            "job_name",
            "workflow_name",
            "goal",
            "status",
            "current_entry_index",
            "current_step_id",
            "revision",
            "aborted_by",
            "started_at",
            "updated_at",
            "completed_at",
            "generation",
            "conversation_id",
            "conversation_agent",
            "inputs",
        ],  # fmt: skip
        (
            (
                pk,
                sid,
                project.pk,
                agent,
                job.pk,
                workflow.pk,
                job.name,
                workflow.name,
                "dag",
                "completed",
                0,
                "",
                0,
                "",
                started,
                ended,
                ended,
                "0.9",
                "",
                "",
                {},
            )
            for pk, sid, started, ended, agent in sessions
        ),  # fmt: skip
    )
    written = writer.write(
        StepRun._meta.db_table,
        [
            "id",
            "session_id",
            "step_def_id",
            "step_id",
            "entry_index",
            "status",
            "outputs",
            "quality_attempts",
            "started_at",
            "completed_at",
            "assigned_agent_id",
            "assigned_at",
            "ready_at",
            "handoffs",
            "input_values",
            "files_status",
            "files_warnings",
        ],  # fmt: skip
        (
            (
                rpk,
                spk,
                steps[name],
                name,
                level,
                "completed",
                {},
                0,
                ready,
                done,
                None if name.startswith("part4") else agents[(n + level) % len(agents)].pk,
                claimed,
                ready,
                0,
                {},
                "pending",
                [],
            )
            for rpk, spk, name, level, ready, claimed, done, n in runs
        ),  # fmt: skip
    )
    log(f"seed: {DAG_RUNS:,} DAG runs, {written:,} DAG step runs")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def measure(runs: int, only: list[str] | None = None) -> list[dict]:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from accounts.services import api_token_create
    from dashboard.insight_charts import forget_drawn_charts
    from insights.tables import INSIGHT_NAMES
    from workflows.models import WorkflowSession

    user = User.objects.get(username="bench")
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    _, secret = api_token_create(user=user, name=f"bench-{time.time_ns()}")
    token = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    today = timezone.now().date()
    year = f"since={today - dt.timedelta(days=365)}&until={today}"
    session = WorkflowSession.objects.filter(status="completed").order_by("-id")[100]
    targets: list[tuple[str, str, dict]] = []
    for scope, query in (("30 days", ""), ("year", year)):
        for path in ("", "time/", "reviews/", "tracker/", "dag/"):
            name = path.strip("/") or "activity"
            targets.append((f"page {name} ({scope})", f"/insights/{path}?{query}", {}))
            if scope == "30 days":
                # Every chart drawn anew, as when the figures changed since the last view.
                targets.append((f"page {name} (30 days, drawn)", f"/insights/{path}", COLD))
    for name in INSIGHT_NAMES:
        targets.append((f"CSV {name}", f"/insights/export/{name}.csv", {}))
        targets.append((f"REST {name}", f"/api/insights/{name}", token))
    for name in INSIGHT_NAMES:
        targets.append((f"REST {name} (year)", f"/api/insights/{name}?{year}", token))
    # The filters, over 30 days and over a year: one generation of DeepWork sessions, one job
    # (the benchmark's only one: every row), one agent.
    agent = "bench-007"
    for scope, query in (("30 days", ""), ("year", f"{year}&")):
        for path in ("", "time/", "reviews/"):
            name = path.strip("/") or "activity"
            for label, value in (
                ("0.14", "dialect=deepwork-0.14"),
                ("job", "job=bench"),
                ("agent", f"agent={agent}"),
            ):
                targets.append(
                    (f"page {name} ({scope}, {label})", f"/insights/{path}?{query}{value}", {})
                )
    targets.append(("history JSON", f"/sessions/{session.session_id}/history.json", {}))
    targets.append(
        ("REST history Markdown", f"/api/sessions/{session.session_id}/history/markdown", token)
    )
    if only:
        targets = [t for t in targets if any(word in t[0] for word in only)]
    results = []
    for label, url, headers in targets:
        for _ in range(2):
            response = client.get(url, **(headers or {}))
        if response.status_code != 200:
            log(f"{label}: HTTP {response.status_code} for {url}")
            results.append({"what": label, "url": url, "status": response.status_code})
            continue
        times, cpu = [], []
        cold = headers is COLD
        if cold:
            headers = {}
        for _ in range(runs):
            if cold:
                forget_drawn_charts()
            with CaptureQueriesContext(connection) as queries:
                begun, begun_cpu = time.perf_counter(), time.thread_time()
                client.get(url, **headers)
                times.append((time.perf_counter() - begun) * 1000)
                # This process's own CPU (Python: ORM, pygal, templates), which other load on
                # the machine barely moves; the database's share is the rest of the wall time.
                cpu.append((time.thread_time() - begun_cpu) * 1000)
        results.append(
            {
                "what": label,
                "url": url,
                "p50_ms": statistics.median(times),
                "p95_ms": percentile(times, 0.95),
                "cpu_p50_ms": statistics.median(cpu),
                "queries": len(queries),
            }
        )
        log(f"{label}: p95 {results[-1]['p95_ms']:.0f} ms")
    return results


def _shrink() -> None:
    """The smoke run's sizes, in a folder of its own (never the reused big database)."""
    import tempfile

    global SESSIONS, REVIEWS, RULINGS, DAG_RUNS, BENCH_DIR, VAR_DIR, PROJECT_DIR
    SESSIONS, REVIEWS, RULINGS, DAG_RUNS = 400, 40, 10, 5
    BENCH_DIR = Path(tempfile.mkdtemp(prefix="insights-bench-smoke-"))
    VAR_DIR, PROJECT_DIR = BENCH_DIR / "var", BENCH_DIR / "project"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL"))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--reseed", action="store_true")
    parser.add_argument(
        "--only",
        action="append",
        metavar="WORD",
        help="measure only the rows whose label holds WORD (repeatable), e.g. --only reviews",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest run, for the test suite: a few hundred sessions in a throwaway "
        "SQLite database, one request per row, no target (fails only on an error)",
    )
    args = parser.parse_args()
    if args.smoke:
        _shrink()
        args.runs, args.database_url = 1, None
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    configure(args.database_url)

    import django

    django.setup()
    from django.db import connection

    seed(args.reseed)
    results = measure(args.runs, args.only)
    ok = True
    print(
        f"\nInsights on {connection.vendor} with {SESSIONS:,} sessions, "
        f"{SESSIONS * RUNS_PER_SESSION:,} step runs, {SESSIONS * EVENTS_PER_SESSION:,} events, "
        f"{REVIEWS:,} reviews (target p95 < {TARGET_MS:.0f} ms, every row)"
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"(load average at the end: {load:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'what':40} {'p50 ms':>8} {'p95 ms':>8} {'cpu p50':>8} {'queries':>8}  result")
    for row in results:
        if "p95_ms" not in row:
            print(f"{row['what']:40} HTTP {row['status']}  FAIL")
            ok = False
            continue
        passed = row["p95_ms"] < TARGET_MS
        ok &= passed or args.smoke
        verdict = "smoke" if args.smoke else "PASS" if passed else "FAIL"
        print(
            f"{row['what']:40} {row['p50_ms']:8.1f} {row['p95_ms']:8.1f}"
            f" {row['cpu_p50_ms']:8.1f} {row['queries']:8d}"
            f"  {verdict}"
        )
    (BENCH_DIR / "results.json").write_text(json.dumps(results, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
