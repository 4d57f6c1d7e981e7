"""Hostile job.yml files (issue 9, defects 3-5), each reproduced as it was found.

Job files come from anyone with commit access. Each one below took the whole catalog down, or
filled the database and every answer with tens of megabytes, or held the write lock while it
was parsed. Each must now be that one job's load error, a few KB long and naming where the
problem is, while every other job, ``get_workflows``, ``start_workflow`` (the standard
``deepwork_jobs/repair`` workflow included) and the REST jobs endpoint go on working.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from django.db import connection, connections
from django.test import Client as HttpClient
from fastmcp import Client

from accounts.services import api_token_create
from mcp_bridge.server import create_server
from tests.conftest import DEMO_JOB, NESTED_JOB
from tests.support.factories import make_user, write_job
from workflows.jobdefs import base as jobdef
from workflows.jobdefs import parse as jobdef_parse
from workflows.liveness import ProcessHolder
from workflows.models import Job, JobLoadError, WorkflowSession
from workflows.services import catalog as catalog_service
from workflows.services.agents import agent_claim
from workflows.services.catalog import Catalog, catalog_view
from workflows.services.projects import project_add, project_ensure
from workflows.services.sessions import session_start

SUMMARY = 'summary: "A one-workflow job used for nesting"'


def _with_summary(value: str) -> str:
    return NESTED_JOB.replace(SUMMARY, f"summary: {value}")


def _steps(count: int) -> str:
    """A schema-valid job of ``count`` one-line steps, all in one workflow."""
    lines = [
        "name: many",
        'version: "1.0.0"',
        "summary: Many steps",
        "common_job_info_provided_to_all_steps_at_runtime: Context",
        "workflows:",
        "  - name: all",
        "    summary: Every step",
        "    steps: [" + ", ".join(f"s{i}" for i in range(count)) + "]",
        "steps:",
    ]
    lines += [
        f"  - {{id: s{i}, name: n, description: d, instructions_file: steps/s.md, "
        "outputs: {}, reviews: []}"
        for i in range(count)
    ]
    return "\n".join(lines) + "\n"


def _laughs(levels: int) -> str:
    """The 'billion laughs': each level a list of nine aliases of the level below."""
    items = ["[" + ", ".join(['"lol"'] * 9) + "]"]
    items[0] = "&l0 " + items[0]
    for level in range(1, levels):
        items.append(f"&l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]")
    return "[" + ", ".join(items) + "]"


def _deep_through_alias() -> str:
    # Each half is within the depth limit; the alias puts one inside the other.
    half = jobdef.MAX_DEPTH // 2 + 2
    return "&deep " + "[" * half + "x" + "]" * half + ", " + "[" * half + "*deep" + "]" * half


# (folder, job.yml text, a fragment of the expected error). Each text as it was found, or the
# shape of the finding pushed just past the limit it now meets.
HOSTILE = [
    # 9.3: RecursionError escaped get_workflows, start_workflow and REST.
    ("nested_brackets", _with_summary("[" * 500 + "]" * 500), "nesting deeper than 32 levels"),
    # 9.4: 1.5 KB expanding to 39 MB of error text (one more level: out of memory).
    ("anchors_bomb", _with_summary(_laughs(9)), "more than 100000 nodes with aliases expanded"),
    ("alias_in_itself", _with_summary("&loop [*loop]"), "found alias 'loop' inside the node"),
    ("deep_through_alias", _with_summary(f"[{_deep_through_alias()}]"), "nesting deeper than"),
    # 9.5: 50,000 steps, parsed and inserted inside the write transaction for 43 s.
    ("fifty_thousand_steps", _steps(50_000), "is larger than 1048576 bytes"),
    ("oversized", NESTED_JOB + "#" * jobdef.MAX_FILE_BYTES + "\n", "is larger than 1048576 bytes"),
    (
        "too_many_steps",
        _steps(jobdef.MAX_STEPS + 1),
        "Validation error at steps: 5001 steps given; a job may define at most 5000",
    ),
    # A value whose repr is huge makes a huge schema error, without any alias.
    (
        "huge_value",
        _with_summary("[" + ", ".join(["abcdefghij"] * 20_000) + "]"),
        "Job definition validation failed: Validation error at summary: ['abcdefghij'",
    ),
    # Found alongside: PyYAML's constructors raise ValueError, not YAMLError, for these.
    ("bad_date", _with_summary("2001-13-45"), "ValueError: month must be in 1..12"),
    # Rows the schema lets through but the database refuses (PostgreSQL rejected the whole
    # sync): a NUL in a string, a name longer than its column.
    ("nul_in_text", _with_summary('"a\\0b"'), "summary: a NUL character cannot be stored"),
    (
        "long_name",
        NESTED_JOB.replace("name: nested", "name: " + "a" * 300),
        "Validation error at name: 300 characters given; at most 255 can be stored",
    ),
]


def _write_hostile(project_dir: Path) -> None:
    for folder, text, _ in HOSTILE:
        job_dir = project_dir / ".deepwork" / "jobs" / folder
        (job_dir / "steps").mkdir(parents=True)
        (job_dir / "steps" / "s.md").write_text("# s\n")
        (job_dir / "job.yml").write_text(text)


def _viewer_token() -> str:
    user = make_user(
        username="operator",
        perms=("workflows.view_workflowsession", "workflows.drive_session"),
    )
    return api_token_create(user=user, name="test")[1]


def _assert_bounded(error: str, folder: str, fragment: str) -> None:
    assert fragment in error
    assert len(error) <= jobdef.MAX_ERROR_CHARS
    # The location survives the cut: the file, or the JSON path in the job.
    assert f"jobs/{folder}" in error or "Validation error at " in error


@pytest.mark.django_db
@pytest.mark.parametrize(("folder", "text", "fragment"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_job_is_one_bounded_load_error(project_dir, folder, text, fragment):
    write_job(project_dir, "demo", DEMO_JOB, ["gather", "part_a", "part_b", "wrap_up"])
    job_dir = write_job(project_dir, folder, text, ["s"])
    project = project_ensure(root_path=project_dir)

    view = catalog_view(project=project)

    (error,) = view.errors
    assert (error.dir_name, error.job_dir) == (folder, str(job_dir))
    _assert_bounded(error.error, folder, fragment)
    assert JobLoadError.objects.get(project=project).error == error.error
    assert [job.dir_name for job in view.jobs] == ["demo", "deepwork_jobs"]

    # REST serves the same catalog, error included.
    http = HttpClient(headers={"Authorization": f"Bearer {_viewer_token()}"})
    response = http.get(f"/api/projects/{project.pk}/jobs")
    assert response.status_code == 200, response.content[:500]
    body = response.json()
    assert [job["dir_name"] for job in body["jobs"]] == ["demo", "deepwork_jobs"]
    assert [(e["dir_name"], e["error"]) for e in body["errors"]] == [(folder, error.error)]


@pytest.mark.django_db(transaction=True)
async def test_every_hostile_job_at_once_leaves_the_tools_and_rest_working(demo_project):
    _write_hostile(demo_project)
    server = create_server(demo_project)

    async with Client(server, mode="legacy") as client:
        result = await client.call_tool("get_workflows", {}, raise_on_error=False)
        assert not result.is_error, result.content
        listed = json.loads(result.content[0].text)
        errors = {error["job_name"]: error["error"] for error in listed["errors"]}
        assert set(errors) == {folder for folder, _, _ in HOSTILE}
        for folder, _, fragment in HOSTILE:
            # The repair hint comes after the bounded text.
            _assert_bounded(
                errors[folder].split("\nIf this job.yml was edited")[0], folder, fragment
            )
        assert [job["name"] for job in listed["jobs"]] == ["demo", "nested", "deepwork_jobs"]

        for job_name, workflow_name in (("demo", "main"), ("deepwork_jobs", "repair")):
            started = await client.call_tool(
                "start_workflow",
                {"goal": "g", "job_name": job_name, "workflow_name": workflow_name},
                raise_on_error=False,
            )
            assert not started.is_error, started.content
        refused = await client.call_tool(
            "start_workflow",
            {"goal": "g", "job_name": "nested_brackets", "workflow_name": "only"},
            raise_on_error=False,
        )
        assert refused.is_error
        assert "Failed to parse job 'nested_brackets': Failed to load job.yml" in (
            refused.content[0].text
        )

    from asgiref.sync import sync_to_async

    @sync_to_async
    def over_rest() -> None:
        # Added as a person adds it: REST acts only on hosted projects.
        project = project_add(root_path=str(demo_project)).project
        http = HttpClient(headers={"Authorization": f"Bearer {_viewer_token()}"})
        jobs = http.get(f"/api/projects/{project.pk}/jobs")
        assert jobs.status_code == 200
        assert len(jobs.json()["errors"]) == len(HOSTILE)
        started = http.post(
            "/api/sessions",
            {
                "project": project.pk,
                "job_name": "deepwork_jobs",
                "workflow_name": "repair",
                "goal": "fix the broken jobs",
            },
            content_type="application/json",
        )
        assert started.status_code == 201, started.content[:500]
        assert WorkflowSession.objects.filter(job_name="deepwork_jobs").count() == 2

    await over_rest()


@pytest.mark.django_db
def test_a_repeated_step_id_loads_as_in_0_9_1(project_dir):
    # 0.9.1 accepts it and uses the first step of that id; the unique row per id used to fail
    # the insert and, with it, every job of the project.
    text = NESTED_JOB.replace("  - id: second", "  - id: first").replace(
        "[first, second]", "[first]"
    )
    write_job(project_dir, "repeated", text, ["first"])
    project = project_ensure(root_path=project_dir)
    view = Catalog(project).view()
    assert view.errors == ()
    job = Job.objects.get(project=project, dir_name="repeated")
    assert [(s.step_id, s.name) for s in job.steps.all()] == [("first", "First")]


# 9.5: parsing under the write lock. A job file is read and parsed while another project's
# agent starts a workflow; the start must not wait for it.


def _gate(
    monkeypatch,
    target: object,
    name: str,
    job_dir: Path,
    entered: threading.Event,
    release: threading.Event,
) -> list[bool]:
    """Make ``target.name``, called for a file of ``job_dir``, stop until ``release``; record
    whether the calling thread had a transaction open then. Other files pass straight on."""
    real: Callable = getattr(target, name)
    in_transaction: list[bool] = []

    def gated(*args, **kwargs):
        path = kwargs.get("yml_path", args[0] if args else None)
        if Path(path).parent == job_dir:
            in_transaction.append(connection.in_atomic_block)
            entered.set()
            assert release.wait(timeout=60), "the test never released the gate"
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, gated)
    return in_transaction


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("text", "seam", "outcome"),
    [
        # Refused on its size: the gate holds it while it is being read.
        (_steps(50_000), (catalog_service, "read_regular_file"), "is larger than"),
        # Within every limit: the gate holds it while it is being parsed, then it is stored.
        (_steps(3000), (jobdef_parse, "parse_job_text"), None),
    ],
    ids=["fifty_thousand_steps", "three_thousand_steps"],
)
def test_a_big_job_file_holds_no_lock_while_it_is_read(tmp_path, monkeypatch, text, seam, outcome):
    big_root = tmp_path / "big"
    many = write_job(big_root, "many", text, ["s"])
    big = project_ensure(root_path=big_root)
    other_root = tmp_path / "other"
    write_job(other_root, "demo", DEMO_JOB, ["gather", "part_a", "part_b", "wrap_up"])
    other = project_ensure(root_path=other_root)
    other_agent = agent_claim(project=other, holder=ProcessHolder.for_this_process())

    entered, release = threading.Event(), threading.Event()
    in_transaction = _gate(monkeypatch, *seam, many, entered, release)
    result: dict[str, object] = {}

    def sync_big() -> None:
        try:
            result["view"] = Catalog(big).view()
        except BaseException as exc:
            result["error"] = exc
        finally:
            release.set()
            connections.close_all()

    worker = threading.Thread(target=sync_big)
    worker.start()
    try:
        assert entered.wait(timeout=60), "the big project's sync never reached the file"
        # While the big file is in hand: another project's catalog sync and start both write.
        started = session_start(
            project=other,
            agent=other_agent,
            catalog=Catalog(other).view(),
            job_name="demo",
            workflow_name="main",
            goal="unaffected",
        )
        assert started.begun.steps[0].step_id == "gather"
    finally:
        release.set()
        worker.join(timeout=60)
    assert not worker.is_alive()

    assert in_transaction == [False]
    assert "error" not in result, result.get("error")
    view = result["view"]
    if outcome is None:
        assert [job.dir_name for job in view.jobs][0] == "many"
        assert Job.objects.get(project=big, dir_name="many").steps.count() == 3000
    else:
        (error,) = view.errors
        assert error.dir_name == "many"
        assert outcome in error.error
        assert [job.dir_name for job in view.jobs] == ["deepwork_jobs"]


@pytest.mark.django_db
def test_a_job_folder_named_in_bytes_that_are_not_utf8_is_a_load_error(project_dir):
    write_job(project_dir, "demo", DEMO_JOB, ["gather", "part_a", "part_b", "wrap_up"])
    jobs = bytes(project_dir / ".deepwork" / "jobs")
    os.mkdir(jobs + b"/caf\xe9")
    with open(jobs + b"/caf\xe9/job.yml", "w") as handle:
        handle.write(NESTED_JOB)

    view = catalog_view(project=project_ensure(root_path=project_dir))

    (error,) = view.errors
    assert error.dir_name == "caf\\xe9"
    assert error.error.endswith("caf\\xe9 is not valid UTF-8")
    assert JobLoadError.objects.get().dir_name == "caf\\xe9"
    assert [job.dir_name for job in view.jobs] == ["demo", "deepwork_jobs"]
