"""The product as a user installs it: a wheel built from this checkout, installed into its own
virtual environment, driven only through its ``deepwork-server`` command.

Nothing here imports the checkout's code into the installed commands: they run from the
environment's ``bin/`` with a clean environment and a temporary data folder. The environment
is cached under ``var/`` by the hash of the project's dependencies, and the wheel is
reinstalled into it on every run, so a changed app is always the one tested.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import http.cookiejar
import json
import os
import queue
import re
import shutil
import stat
import subprocess
import sys
import threading
import tomllib
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

import pytest
from django.conf import settings
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

from deepwork_site import connect
from tests.e2e.driver import call
from tests.processes import free_port, stop, wait_for_port

pytestmark = pytest.mark.e2e

CHECKOUT = Path(settings.BASE_DIR)
APPS = (
    "deepwork_site",
    "workflows",
    "tracker",
    "reviews",
    "mcp_bridge",
    "dashboard",
    "accounts",
    "api",
)
# Long enough for a first install from PyPI on a slow link; a hang still fails.
INSTALL_TIMEOUT = 600


def _source_files(root: Path) -> set[str]:
    """Every file of the apps in the checkout, as the wheel names them."""
    found = set()
    for app in (*APPS, "templates"):
        for path in (root / app).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                name = path.relative_to(root).as_posix()
                # The top-level site templates ship inside deepwork_site (setup.py).
                found.add(f"deepwork_site/{name}" if app == "templates" else name)
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the checkout (a build writes beside its sources)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "setup.py", "README.md", "templates", *APPS):
        path = CHECKOUT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, source / name)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        check=True,
        timeout=INSTALL_TIMEOUT,
    )
    (built,) = dist.glob("deepwork_server-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path) -> Path:
    """A virtual environment holding the wheel and its dependencies (from PyPI once per set of
    dependencies), with none of the checkout's packages."""
    project = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]
    key = hashlib.sha256(json.dumps([sys.version, project["dependencies"]]).encode()).hexdigest()[
        :16
    ]
    folder = Path(settings.VAR_DIR) / "installed-venv"
    folder.mkdir(parents=True, exist_ok=True)
    env_dir = folder / key
    python = env_dir / "bin" / "python"
    with (folder / "lock").open("w") as lock:
        # Two test runs at once share the cache: one installs while the other waits.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (env_dir / ".complete").exists():
            shutil.rmtree(env_dir, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
            pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
            subprocess.run([*pip, str(wheel)], check=True, timeout=INSTALL_TIMEOUT)
            (env_dir / ".complete").touch()
        else:
            # Only this wheel changed: replace it (its old files go), keep the dependencies.
            subprocess.run(
                [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
                + ["--no-deps", "--force-reinstall", str(wheel)],
                check=True,
                timeout=INSTALL_TIMEOUT,
            )
        subprocess.run(
            [str(python), "-m", "pip", "check", "--disable-pip-version-check"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return env_dir


def _env(venv: Path, home: Path, var_dir: Path | None) -> dict[str, str]:
    """A user's shell: the environment's bin first, their own HOME, and no setting of ours but
    the data folder (``None``: the default one)."""
    env = {
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "DEEPWORK_LOG_LEVEL": "WARNING",
    }
    if var_dir is not None:
        env["DEEPWORK_VAR_DIR"] = str(var_dir)
    return env


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
    # What each app reads at run time, named so that a missing kind says what broke.
    for kind in (
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
    ):
        assert kind in expected, kind
        assert kind in shipped, kind
    assert sorted(expected - shipped) == []
    assert sorted(shipped - expected) == []  # no tests, manage.py or stray files
    assert "deepwork-server = deepwork_site.cli:main" in scripts


def test_installed_code_is_the_wheels(venv: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-P", "-c", "import workflows; print(workflows.__file__)"],
        env=_env(venv, tmp_path, tmp_path / "var"),
        cwd=CHECKOUT,  # even from the checkout, the installed apps are the ones imported
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(done.stdout.strip()).is_relative_to(venv)


async def test_mcp_runs_a_workflow_to_completion(
    venv: Path, demo_project: Path, tmp_path: Path
) -> None:
    var_dir = tmp_path / "data"
    transport = StdioTransport(
        command=str(venv / "bin" / "deepwork-server"),
        args=["mcp", "--path", str(demo_project)],
        env=_env(venv, tmp_path, var_dir),
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
    env = _env(venv, tmp_path, var_dir)
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
        assert configured.stdout == "".join(snippet.text for snippet in claude.snippets)
        remote = json.loads(claude.snippets[1].text)["mcpServers"]["deepwork"]
        assert "nested" in asyncio.run(_hosted_jobs(remote["url"], remote["headers"]))
    finally:
        stop(server)  # type: ignore[arg-type]
    _assert_private(var_dir)


def test_connect_prints_each_clients_stdio_configuration(venv: Path, tmp_path: Path) -> None:
    env = _env(venv, tmp_path, tmp_path / "data")
    for config in connect.stdio_configs():
        printed = _run(venv, env, "connect", "--client", config.key, cwd=tmp_path)
        assert printed.stdout == "".join(snippet.text for snippet in config.snippets)
    everything = _run(venv, env, "connect", cwd=tmp_path)
    assert everything.stdout == "".join(
        snippet.text for config in connect.stdio_configs() for snippet in config.snippets
    )
    assert "uvx deepwork-server mcp --path ." in everything.stdout


def test_data_goes_to_the_users_data_folder_by_default(
    venv: Path, demo_project: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    added = _run(venv, _env(venv, home, None), "project", "add", str(demo_project), cwd=tmp_path)
    assert added.stdout.strip() == "1"
    _assert_private(home / ".local" / "share" / "deepwork-server")
