"""Federation over real HTTP: a second instance of our server (uvicorn, its own SQLite
database) publishes its project's workflows; an ``mcpserve --workflow-source`` on the test
database, with no rows of its own for them, serves them as tools, starts and follows runs, and
keeps serving its last good list while the source is away."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests.conftest import DEMO_JOB
from tests.e2e.driver import Driver
from tests.support.factories import write_job
from tests.support.processes import MANAGE, child_env, start_uvicorn, stop, wait_for_port_async

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]

# Migrate the source's own database, register its project, and make a token that may read,
# start and cancel runs.
SETUP_SOURCE = """
import os
from django.core.management import call_command
call_command("migrate", interactive=False, verbosity=0)
from django.contrib.auth.models import Permission
from accounts.services import api_token_create
from tests.support.factories import make_user
from workflows.services.projects import project_add
project = project_add(root_path=os.environ['CENTRAL_PROJECT']).project
user = make_user(username="central", perms=[
    "workflows.view_workflowsession", "workflows.drive_session", "workflows.abort_session"])
print(project.pk, api_token_create(user=user, name="federation")[1])
"""


@pytest.fixture
def source_project(tmp_path: Path) -> Path:
    root = (tmp_path / "central").resolve()
    (root / ".deepwork" / "jobs").mkdir(parents=True)
    write_job(root, "demo", DEMO_JOB, ["gather", "part_a", "part_b", "wrap_up"])
    return root


class Source:
    """The second instance: uvicorn on its own database, restartable on the same port."""

    def __init__(self, var_dir: Path, project: Path) -> None:
        self.env = child_env(DEEPWORK_VAR_DIR=str(var_dir), DEEPWORK_LOG_LEVEL="ERROR")
        done = subprocess.run(
            [sys.executable, MANAGE, "shell", "-c", SETUP_SOURCE],
            env={**self.env, "PYTHONPATH": str(settings.BASE_DIR), "CENTRAL_PROJECT": str(project)},
            cwd=settings.BASE_DIR,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        project_id, self.token = done.stdout.strip().splitlines()[-1].split()
        self.process, self.port = start_uvicorn(self.env)
        self.url = f"http://127.0.0.1:{self.port}/api/projects/{project_id}/published-workflows"

    async def listening(self) -> None:
        await wait_for_port_async(self.process, self.port, "uvicorn")

    def stop(self) -> None:
        stop(self.process)

    async def restart(self) -> None:
        port = self.port
        self.process, _ = start_uvicorn(self.env, port=port)
        await self.listening()


@pytest.fixture
async def source(tmp_path: Path, source_project: Path):
    server = Source(tmp_path / "central-var", source_project)
    try:
        await server.listening()
        yield server
    finally:
        server.stop()


async def test_a_remote_source_feeds_tools_and_survives_going_away(
    source: Source, project_dir: Path
):
    async with Driver(
        project_dir,
        "--toolsets",
        "workflow-tools",
        "--workflow-source",
        source.url,
        env_extra={
            "DEEPWORK_WORKFLOW_SOURCE_TOKEN": source.token,
            "DEEPWORK_WORKFLOW_TOOLS_POLL_SECONDS": "0.2",
        },
    ) as agent:
        changes = await agent.call("refresh_workflow_tools")
        assert {"workflow_demo_main", "workflow_demo_quick"} <= set(changes["added"])
        # The standard jobs are local and remote: the remote ones take their ids.
        names = await agent.tool_names()
        assert "workflow_deepwork_jobs_repair" in names
        assert "workflow_deepwork_jobs_repair_deepwork_jobs_repair" in names

        refused = await agent.call_error("workflow_demo_main", {"goal": "Report"})
        assert refused == (
            "Invalid arguments for workflow_demo_main: at $: 'topic' is a required property "
            "(rule 'required')"
        )
        run = await agent.call("workflow_demo_main", {"goal": "Report", "topic": "owls"})
        assert run["status"] == "RUNNING"
        assert run["run_id"].startswith("remote-")
        assert run["result"]["begin_step"]["step_id"] == "gather"
        status = await agent.call("get_workflow_status", {"run_id": run["run_id"]})
        assert status["status"] == "RUNNING"
        assert status["progress"]["current_step"] == "gather"

        source.stop()
        unchanged = await agent.call("refresh_workflow_tools")
        assert unchanged["removed"] == []
        assert "workflow_demo_main" in await agent.tool_names()
        failed = await agent.call_error("get_workflow_status", {"run_id": run["run_id"]})
        assert "is unavailable" in failed
        assert "get_workflow_status" in await agent.tool_names()

        await source.restart()
        cancelled = await agent.call(
            "cancel_workflow_run", {"run_id": run["run_id"], "reason": "done with it"}
        )
        assert cancelled["status"] == "CANCELLED"
        assert cancelled["error"] == "done with it"
