"""A JSON Schema from a project, a session or a source never makes the server fetch anything.

A ``$ref`` outside the schema (``http://``, ``file://``, a relative file) is refused where the
schema is accepted: a job load error, a refused ``register_session_job``, a remote workflow
skipped with a logged reason. A ref loop that never descends into the data (``{"$ref": "#"}``)
is refused the same way instead of recursing until the stack runs out. The "remote host" is a
real listener on 127.0.0.1 that records every request and holds it for a while, as a host that
wants to stall the server would.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from mcp_bridge.server import create_server
from mcp_bridge.toolsets.specs import SourceConfig
from reviews.deepreview.deepschema import load_deepschema_rules
from tests.support.demo14 import DEMO14_JOB, write_demo14
from workflows.errors import InvalidInput
from workflows.jobdefs.base import JobParseError
from workflows.jobdefs.parse import parse_job_bytes
from workflows.models import Job
from workflows.services.session_jobs import session_job_register

HOLD_SECONDS = 5.0  # how long the listener holds a schema request: the old code waited it out
ONLY_INSIDE = "only refs to a place inside the same schema"
SCHEMA_OF_DATA = "    json_schema:\n      type: object\n      required: [title]\n"


@dataclass
class Listener:
    base: str
    listing: list[dict[str, Any]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def schema_requests(self) -> list[str]:
        return [r for r in self.requests if not r.endswith("/workflows")]


@pytest.fixture
def listener() -> Iterator[Listener]:
    state = Listener(base="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            state.requests.append(self.path)
            if self.path.endswith("/workflows"):
                body = json.dumps(state.listing).encode()
            else:
                time.sleep(HOLD_SECONDS)
                body = b'{"type": "object"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def with_schema(job_text: str, schema_yaml: str) -> str:
    assert SCHEMA_OF_DATA in job_text
    return job_text.replace(SCHEMA_OF_DATA, f"    json_schema: {schema_yaml}\n", 1)


def parse(text: str, tmp_path: Path) -> None:
    parse_job_bytes(text.encode(), job_dir=tmp_path, yml_path=tmp_path / "job.yml")


# --- session jobs and job.yml ----------------------------------------------------------------


@pytest.mark.django_db
def test_a_session_job_with_a_remote_ref_is_refused_at_registration(project, listener):
    url = f"{listener.base}/x"
    text = with_schema(DEMO14_JOB.replace("name: demo14", "name: tmpjob"), f'{{"$ref": "{url}"}}')
    with pytest.raises(InvalidInput) as info:
        session_job_register(
            project=project,
            platform="claude",
            conversation_id="S1",
            job_name="tmpjob",
            yaml_text=text,
        )
    message = str(info.value)
    assert (
        "step_arguments -> 2 -> json_schema: the JSON schema of 'data.json' is invalid at "
        f"$ref: $ref '{url}' points outside the schema: {ONLY_INSIDE}"
    ) in message
    assert "register_session_job again" in message
    # Nothing runnable was stored, and the host never heard from the server.
    assert not Job.objects.filter(source="session").exists()
    assert listener.requests == []


@pytest.mark.django_db
def test_a_job_yml_with_a_remote_ref_is_a_load_error(project, catalog, demo_project, listener):
    write_demo14(demo_project)
    path = demo_project / ".deepwork/jobs/demo14/job.yml"
    url = f"{listener.base}/x"
    path.write_text(
        with_schema(path.read_text(), f'{{"properties": {{"title": {{"$ref": "{url}"}}}}}}')
    )
    view = catalog.view()
    assert view.find("demo14") is None
    (error,) = view.errors
    assert (
        "the JSON schema of 'data.json' is invalid at properties -> title -> $ref: "
        f"$ref '{url}' points outside the schema"
    ) in error.error
    assert listener.requests == []


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            '{"$ref": "file:///etc/passwd"}',
            "invalid at $ref: $ref 'file:///etc/passwd' points outside the schema: " + ONLY_INSIDE,
        ),
        (
            '{"$ref": "other.schema.json"}',
            "invalid at $ref: $ref 'other.schema.json' points outside the schema",
        ),
        (
            '{"$ref": "#/definitions/missing"}',
            "invalid at $ref: $ref '#/definitions/missing' points to nothing inside the schema",
        ),
        (
            '{"$ref": "#"}',
            "invalid at $ref: $ref '#' loops back to where it started without descending into "
            "the data",
        ),
        (
            '{"$ref": "#/definitions/a", "definitions": {"a": {"allOf": [{"$ref": '
            '"#/definitions/b"}]}, "b": {"anyOf": [{"$ref": "#/definitions/a"}]}}}',
            "loops back to where it started without descending into the data",
        ),
    ],
)
def test_refs_that_leave_the_schema_or_loop_are_load_errors(tmp_path, schema, expected):
    with pytest.raises(JobParseError) as info:
        parse(with_schema(DEMO14_JOB, schema), tmp_path)
    message = str(info.value)
    assert "step_arguments -> 2 -> json_schema: the JSON schema of 'data.json' is " in message
    assert expected in message
    assert "RecursionError" not in message
    assert "Traceback" not in message


def test_refs_inside_the_schema_still_work(tmp_path):
    # A tree: recursion below 'properties' descends into the data, so it ends.
    schema = json.dumps(
        {
            "type": "object",
            "required": ["title"],
            "properties": {
                "title": {"$ref": "#/definitions/text"},
                "children": {"type": "array", "items": {"$ref": "#"}},
            },
            "definitions": {"text": {"type": "string"}},
        }
    )
    parse(with_schema(DEMO14_JOB, schema), tmp_path)


# --- a remote workflow source ---------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_source_workflow_with_a_remote_ref_is_skipped(project_dir, listener, caplog):
    url = f"{listener.base}/x"
    listener.listing = [
        {
            "id": "wf-bad",
            "name": "Bad one",
            "description": "Refers to a schema on its host",
            "inputSchema": {"type": "object", "properties": {"a": {"$ref": url}}},
        },
        {
            "id": "wf-loop",
            "name": "Looping one",
            "description": "Refers to itself",
            "inputSchema": {"type": "object", "allOf": [{"$ref": "#"}]},
        },
        {
            "id": "wf-good",
            "name": "Good one",
            "description": "Plain",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}},
        },
    ]
    mcp = create_server(
        project_dir,
        toolsets=["workflow-tools"],
        workflow_sources=[SourceConfig(f"{listener.base}/workflows", "t")],
    )
    caplog.set_level(logging.WARNING, logger="deepwork.workflow_tools")
    async with Client(mcp) as client:
        await client.call_tool("refresh_workflow_tools", {})
        names = {tool.name for tool in await client.list_tools()}
        for name in ("workflow_bad_one", "workflow_looping_one"):
            # Had the tool been served, checking its arguments is where the old code fetched.
            result = await client.call_tool(name, {"a": "x"}, raise_on_error=False)
            assert result.is_error
    assert "workflow_good_one" in names
    assert not names & {"workflow_bad_one", "workflow_looping_one"}
    logged = [r.getMessage() for r in caplog.records]
    assert any(
        "workflow 'wf-bad' skipped: inputSchema: $ref" in m
        and f"'{url}' points outside the schema: {ONLY_INSIDE}" in m
        for m in logged
    ), logged
    assert any(
        "workflow 'wf-loop' skipped: inputSchema: $ref '#' loops back" in m for m in logged
    ), logged
    assert listener.schema_requests() == []


# --- DeepSchemas and .deepreview -------------------------------------------------------------


def test_deepschemas_and_deepreview_never_follow_a_ref_they_hold(tmp_path, listener):
    """Their files are data checked against the server's own schemas: a ``$ref`` in them, or
    in the JSON Schema a DeepSchema names for its reviewer, is text, never a URL to open."""
    from reviews.deepreview.config import ConfigError, parse_deepreview_file

    url = f"{listener.base}/x"
    folder = tmp_path / ".deepwork/schemas/notes"
    folder.mkdir(parents=True)
    (folder / "deepschema.yml").write_text(
        "matchers: ['*.md']\nrequirements:\n  a: 'MUST be short.'\n"
        "json_schema_path: notes.schema.json\n"
    )
    (folder / "notes.schema.json").write_text(json.dumps({"$ref": url}))
    (tmp_path / ".deepwork/schemas/odd").mkdir()
    (tmp_path / ".deepwork/schemas/odd/deepschema.yml").write_text(f"$ref: '{url}'\n")
    rules, failures = load_deepschema_rules(tmp_path)
    assert [rule.name for rule in rules] == ["notes DeepSchema Compliance"]
    assert any("'$ref' was unexpected" in failure.error for failure in failures)

    (tmp_path / ".deepreview").write_text(f"$ref: '{url}'\n")
    with pytest.raises(ConfigError, match="Schema validation failed"):
        parse_deepreview_file(tmp_path / ".deepreview", project_root=tmp_path)
    assert listener.requests == []


def test_data_nested_past_the_stack_is_an_error_of_the_data_not_a_recursion_error():
    from workflows import json_schemas

    validator = json_schemas.validator(
        {"type": "object", "properties": {"child": {"$ref": "#"}}}, dialect="declared"
    )
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(5000):
        node["child"] = {}
        node = node["child"]
    error = json_schemas.best_error(validator, deep)
    assert error is not None
    assert error.message == "the value nests too deeply to be checked"
    assert [e.message for e in json_schemas.all_errors(validator, deep)] == [error.message]
