"""The product as a user installs it: a wheel built from this checkout, installed into its own
virtual environment, driven only through its ``deepwork-server`` command.

Nothing here imports the checkout's code into the installed commands: they run from the
environment's ``bin/`` with a clean environment and a temporary data folder. The environment
is cached under ``var/`` by the hash of what decides how the project installs (the Python
version, pyproject.toml and setup.py), and the wheel, built from the checkout's sources, is
reinstalled into it on every run, so a changed app is always the one tested.

Installed, every app is nested in the one package ``deepwork_server``: an environment shared
with other projects gains no generic top-level package such as ``api`` or ``workflows``.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import queue
import re
import stat
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

from deepwork_site import connect
from tests.e2e.driver import call
from tests.support.installed import APPS, CHECKOUT, DIST, user_env
from tests.support.processes import free_port, stop, wait_for_port

pytestmark = pytest.mark.e2e


def _source_files(root: Path) -> set[str]:
    """Every file of the apps in the checkout, as the wheel names them: inside
    ``deepwork_server``."""
    found = set()
    for folder in (DIST, *APPS, "templates"):
        for path in (root / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                name = path.relative_to(root).as_posix()
                # The top-level site templates ship inside deepwork_site (setup.py).
                if folder == "templates":
                    name = f"deepwork_site/{name}"
                found.add(name if folder == DIST else f"{DIST}/{name}")
    return found


def _run(venv: Path, env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(venv / "bin" / "deepwork-server"), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"deepwork-server {' '.join(args)}: {done.stderr[-3000:]}"
    return done


def _assert_private(var_dir: Path) -> None:
    assert stat.S_IMODE(var_dir.stat().st_mode) == 0o700
    for name in ("deepwork.sqlite3", "secret_key"):
        assert stat.S_IMODE((var_dir / name).stat().st_mode) == 0o600, name


def test_wheel_holds_every_app_file_and_the_command(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
    shipped = {name for name in names if ".dist-info/" not in name}
    expected = _source_files(CHECKOUT)
    # One top-level package: no generic name (api, dashboard, workflows) beside it.
    assert {name.split("/")[0] for name in shipped} == {DIST}
    assert {"deepwork_site", "workflows", "reviews", "mcp_bridge", "tracker", "api"} <= set(APPS)
    # What each app reads at run time, named so that a missing kind says what broke.
    for kind in (
        "__init__.py",
        "__main__.py",
        "deepwork_site/templates/base.html",
        "deepwork_site/templates/registration/login.html",
        "dashboard/static/dashboard/dashboard.css",
        "accounts/templates/admin/accounts/apitoken/secret.html",
        "workflows/migrations/0001_initial.py",
        "workflows/jobdefs/job.schema.json",
        "workflows/jobdefs/job014.schema.json",
        "workflows/standard_jobs/deepwork_jobs/job.yml",
        "workflows/standard_jobs014/deepwork_jobs/job.yml",
        "reviews/deepreview_schema.json",
        "mcp_bridge/fresh_database.sql",
        # Every app's migrations: a missing one would leave its tables unmade.
        *(path.relative_to(CHECKOUT).as_posix() for path in CHECKOUT.glob("*/migrations/0*.py")),
    ):
        assert f"{DIST}/{kind}" in expected, kind
        assert f"{DIST}/{kind}" in shipped, kind
    # Every app, its templates and static files among them.
    for app in APPS:
        assert any(name.startswith(f"{DIST}/{app}/") for name in shipped), app
    assert sorted(expected - shipped) == []
    assert sorted(shipped - expected) == []  # no tests, manage.py or stray files
    assert "deepwork-server = deepwork_server:main" in scripts


def _site_packages(venv: Path) -> Path:
    (found,) = venv.glob("lib/python*/site-packages")
    return found


def test_installed_code_is_the_wheels_and_claims_one_top_level_name(
    venv: Path, tmp_path: Path
) -> None:
    site = _site_packages(venv)
    (dist_info,) = site.glob(f"{DIST}-*.dist-info")
    installed = {
        line.split(",")[0].split("/")[0] for line in (dist_info / "RECORD").read_text().split()
    }
    # Besides its script in bin/, the distribution owns its package and its dist-info only.
    assert installed - {"..", dist_info.name} == {DIST}
    assert [app for app in APPS if (site / app).exists()] == []
    assert (site / DIST / "workflows" / "models.py").is_file()

    shows = (
        "import importlib.util, deepwork_server; "
        "print(importlib.util.find_spec('workflows')); "
        "deepwork_server.apps_on_path(); "
        "import workflows; print(workflows.__file__)"
    )
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-P", "-c", shows],
        env=user_env(venv, tmp_path, tmp_path / "var"),
        cwd=CHECKOUT,  # even from the checkout, the installed apps are the ones imported
        capture_output=True,
        text=True,
        check=True,
    )
    untouched, imported = done.stdout.split()
    # No `workflows` in the environment, even once the package is imported: only the server's
    # entry points put the apps on the path.
    assert untouched == "None"
    assert Path(imported).is_relative_to(site / DIST)


async def test_mcp_runs_a_workflow_to_completion(
    venv: Path, demo_project: Path, tmp_path: Path
) -> None:
    var_dir = tmp_path / "data"
    transport = StdioTransport(
        command=str(venv / "bin" / "deepwork-server"),
        args=["mcp", "--path", str(demo_project)],
        env=user_env(venv, tmp_path, var_dir),
        cwd=str(demo_project),
    )
    async with Client(transport) as client:
        listed = await call(client, "get_workflows")
        names = [job["name"] for job in listed["jobs"]]
        assert {"demo", "nested", "deepwork_jobs"} <= set(names)  # the standard job ships too
        started = await call(
            client,
            "start_workflow",
            {"goal": "installed", "job_name": "nested", "workflow_name": "only"},
        )
        assert started["begin_step"]["step_id"] == "first"
        step = await call(client, "finished_step", {"outputs": {"first.md": "first.md"}})
        assert step["begin_step"]["step_id"] == "second"
        done = await call(client, "finished_step", {"outputs": {}})
        assert done["status"] == "workflow_complete"
    _assert_private(var_dir)


class _Browser:
    """A person's browser: cookies kept, redirects shown rather than followed."""

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    def __init__(self, base: str) -> None:
        self.base = base
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.cookies), self._NoRedirect()
        )

    def csrf(self) -> str:
        return next(c.value for c in self.cookies if c.name == "csrftoken") or ""

    def _open(self, request: urllib.request.Request) -> tuple[int, dict[str, str], str]:
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, dict(response.headers), response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read().decode(errors="replace")

    def get(self, path: str) -> tuple[int, dict[str, str], str]:
        return self._open(urllib.request.Request(self.base + path))

    def post(self, path: str, form: dict[str, str]) -> tuple[int, dict[str, str], str]:
        data = urllib.parse.urlencode(form).encode()
        return self._open(urllib.request.Request(self.base + path, data=data, method="POST"))


async def _hosted_jobs(url: str, headers: dict[str, str]) -> list[str]:
    async with Client(StreamableHttpTransport(url, headers=headers)) as agent:
        listed = await call(agent, "get_workflows")
    return [job["name"] for job in listed["jobs"]]


def _lines(stream: object, into: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.put(line)


def _admin_password(lines: queue.Queue[str]) -> str:
    seen = []
    while True:
        try:
            line = lines.get(timeout=60)
        except queue.Empty:
            pytest.fail(f"serve printed no admin password: {''.join(seen)}")
        seen.append(line)
        if found := re.match(r"\s*password: (\S+)", line):
            return found.group(1)


def test_serve_logs_in_and_serves_mcp_to_a_token_of_a_new_project(
    venv: Path, demo_project: Path, tmp_path: Path
) -> None:
    var_dir = tmp_path / "data"
    env = user_env(venv, tmp_path, var_dir)
    port = free_port()
    server = subprocess.Popen(
        [
            str(venv / "bin" / "deepwork-server"),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=_lines, args=(server.stdout, lines), daemon=True).start()
        password = _admin_password(lines)
        wait_for_port(server, port, "deepwork-server serve", timeout=60)  # type: ignore[arg-type]
        base = f"http://127.0.0.1:{port}"

        browser = _Browser(base)
        assert browser.get("/login/")[0] == 200
        status, headers, body = browser.post(
            "/login/",
            {"username": "admin", "password": password, "csrfmiddlewaretoken": browser.csrf()},
        )
        assert status == 302, body[:2000]
        assert headers["location"] == "/"
        status, _, overview = browser.get("/")
        assert status == 200
        assert "admin" in overview
        assert browser.get("/static/dashboard/dashboard.css")[0] == 200

        added = _run(venv, env, "project", "add", str(demo_project), cwd=tmp_path)
        project_id = added.stdout.strip()
        assert project_id.isdigit(), added.stdout
        missing = subprocess.run(
            [str(venv / "bin" / "deepwork-server"), "token", "create", "--user", "robot", "--mcp"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert missing.returncode != 0
        assert "No user named 'robot'. Add --create-user" in missing.stderr
        made = _run(
            venv, env, "token", "create", "--user", "robot", "--mcp", "--create-user",
            "--project", project_id, cwd=tmp_path,
        )  # fmt: skip
        secret = made.stdout.strip()
        assert secret.startswith("dwk_")

        configured = _run(
            venv, env, "connect", "--client", "claude-code", "--url", base, "--token", secret,
            cwd=tmp_path,
        )  # fmt: skip
        claude = next(
            config
            for config in connect.hosted_configs(url=f"{base}/mcp", token=secret)
            if config.key == "claude-code"
        )
        (file,) = (snippet for snippet in claude.snippets if snippet.is_file)
        # Only the file, which reads the token from the environment, as Claude Code expands it.
        assert configured.stdout == file.text
        assert secret not in configured.stdout
        assert f"export {connect.TOKEN_ENV}={secret}" in configured.stderr
        remote = json.loads(file.text)["mcpServers"]["deepwork"]
        headers = {
            name: value.replace(f"${{{connect.TOKEN_ENV}}}", secret)
            for name, value in remote["headers"].items()
        }
        assert "nested" in asyncio.run(_hosted_jobs(remote["url"], headers))
    finally:
        stop(server)  # type: ignore[arg-type]
    _assert_private(var_dir)


def test_connect_prints_each_clients_stdio_configuration(venv: Path, tmp_path: Path) -> None:
    env = user_env(venv, tmp_path, tmp_path / "data")
    for config in connect.stdio_configs():
        printed = _run(venv, env, "connect", "--client", config.key, cwd=tmp_path)
        assert printed.stdout == "".join(s.text for s in config.snippets if s.is_file)
    everything = _run(venv, env, "connect", cwd=tmp_path)
    assert everything.stdout == "".join(
        s.text for config in connect.stdio_configs() for s in config.snippets if s.is_file
    )
    assert "uvx deepwork-server mcp --path ." in everything.stderr
    # The command without its script, as ``python -m`` runs it.
    module = subprocess.run(
        [str(venv / "bin" / "python"), "-m", DIST, "connect"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert module.stdout == everything.stdout


def test_data_goes_to_the_users_data_folder_by_default(
    venv: Path, demo_project: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    added = _run(
        venv, user_env(venv, home, None), "project", "add", str(demo_project), cwd=tmp_path
    )
    assert added.stdout.strip() == "1"
    _assert_private(home / ".local" / "share" / "deepwork-server")
