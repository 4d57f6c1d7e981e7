"""The ``deepwork-server`` command as a person runs it, in real processes on a fresh data
folder: its version, ``serve`` on a busy port and several first ``serve`` at once, and
``python -m deepwork_server`` in a project folder that holds packages of its own."""

from __future__ import annotations

import importlib.metadata
import os
import re
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from tests.support.processes import free_port, stop, wait_for_port

CHECKOUT = Path(settings.BASE_DIR)
# Migrating a fresh database on a loaded machine takes a while; a hang still fails.
SERVE_START = 180


def _env(var_dir: Path, **extra: str) -> dict[str, str]:
    """A person's shell: no SECRET_KEY, so the data folder's own key is made and read too."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DEEPWORK_VAR_DIR": str(var_dir),
        "DEEPWORK_LOG_LEVEL": "WARNING",
        **extra,
    }


def _command(var_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deepwork_site", *args],
        env=_env(var_dir),
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_version_names_the_server_for_the_command_and_for_mcp(tmp_path):
    # The checkout is installed into its environment (make does it), so it has a version.
    expected = f"deepwork-server {importlib.metadata.version('deepwork-server')}\n"
    for args in (["--version"], ["mcp", "--version"]):
        done = _command(tmp_path / "var", *args)
        assert done.returncode == 0, done.stderr
        assert done.stdout == expected, args


def test_serve_on_a_busy_port_says_so_before_migrating(tmp_path):
    var_dir = tmp_path / "var"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _command(var_dir, "serve", "--port", str(port))
    assert done.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in done.stderr
    assert f"--port {port + 1}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not var_dir.exists()  # nothing migrated, no admin made


def test_three_first_serves_at_once_all_come_up_with_one_admin(tmp_path):
    var_dir = tmp_path / "var"
    ports = [free_port() for _ in range(3)]
    servers = [
        subprocess.Popen(
            [sys.executable, "-m", "deepwork_site", "serve", "--port", str(port)],
            env=_env(var_dir),
            cwd=CHECKOUT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for port in ports
    ]
    try:
        for server, port in zip(servers, ports, strict=True):
            wait_for_port(server, port, "deepwork-server serve", timeout=SERVE_START)
    finally:
        for server in servers:
            stop(server)
    printed = [server.stdout.read().decode() for server in servers if server.stdout]
    assert sum(bool(re.search(r"^\s*password: \S+", out, re.M)) for out in printed) == 1
    with sqlite3.connect(var_dir / "deepwork.sqlite3") as database:
        assert database.execute("SELECT COUNT(*) FROM auth_user").fetchone() == (1,)


def test_python_m_in_a_project_folder_imports_none_of_its_packages(tmp_path):
    """``python -m`` puts the current folder first on the path, where a project may have a
    package named like one the server imports."""
    project = tmp_path / "project"
    ran = tmp_path / "ran"
    for name in ("django", "yaml", "pydantic", "platformdirs", "workflows", "deepwork_site"):
        (project / name).mkdir(parents=True)
        (project / name / "__init__.py").write_text(
            f"open({str(ran)!r}, 'a').write({name!r} + '\\n')\n"
        )
    done = subprocess.run(
        [sys.executable, "-m", "deepwork_server", "manage", "check"],
        # The checkout after the current folder, as an installed package would be.
        env=_env(tmp_path / "var", PYTHONPATH=str(CHECKOUT)),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert not ran.exists(), ran.read_text()
    assert done.returncode == 0, done.stderr
    assert "System check identified no issues" in done.stdout
