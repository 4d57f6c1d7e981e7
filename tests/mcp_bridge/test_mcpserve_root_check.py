"""``mcpserve --path`` in a folder no project may be: a real stdio server exits at once with the
reason on stderr, nothing on stdout (the protocol's), and registers nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import MANAGE, child_env_on_test_db, handshake
from workflows.models import Project
from workflows.roots import KEPT_TO_ITSELF

pytestmark = pytest.mark.django_db(transaction=True)


def serve(path: str, *, cwd: Path | str | None = None, **env: str) -> subprocess.CompletedProcess:
    messages = "".join(json.dumps(message) + "\n" for message in handshake("root-check"))
    return subprocess.run(
        [sys.executable, MANAGE, "mcpserve", "--path", path],
        input=messages.encode(),
        capture_output=True,
        cwd=cwd,
        env=child_env_on_test_db(**env),
        timeout=120,
    )


@pytest.mark.parametrize("where", ["/", "/proc/self/root"])
def test_the_file_systems_root_is_refused(where: str):
    done = serve(".", cwd=where)
    assert done.returncode != 0
    assert done.stdout == b""
    assert b"root_path is the file system's root; give the project's own folder" in done.stderr
    assert not Project.objects.exists()


def test_the_data_folder_and_the_home_folder_are_refused(tmp_path: Path):
    data = tmp_path / "data"
    home = tmp_path / "home"
    data.mkdir()
    home.mkdir()
    for path in (data, tmp_path, home):
        done = serve(str(path), DEEPWORK_VAR_DIR=str(data), HOME=str(home))
        assert done.returncode != 0, path
        assert done.stdout == b""
        assert KEPT_TO_ITSELF.encode() in done.stderr
    assert not Project.objects.exists()
