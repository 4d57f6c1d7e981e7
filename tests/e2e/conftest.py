"""The installed wheel, built and installed once per test run for every test that drives
the ``deepwork-server`` command as a user installs it."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests.support.installed import APPS, CHECKOUT, DIST, INSTALL_TIMEOUT


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the checkout (a build writes beside its sources)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "setup.py", "README.md", "templates", DIST, *APPS):
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


@pytest.fixture(scope="session")
def venv(wheel: Path) -> Path:
    """A virtual environment holding the wheel and its dependencies (from PyPI once per set of
    dependencies), with none of the checkout's packages."""
    # A change to the dependencies, the command or the package layout makes a new environment;
    # a change to the apps' code only a new wheel, reinstalled below.
    packaging = [(CHECKOUT / name).read_text() for name in ("pyproject.toml", "setup.py")]
    key = hashlib.sha256(json.dumps([sys.version, *packaging]).encode()).hexdigest()[:16]
    folder = Path(settings.VAR_DIR) / "installed-venv"
    folder.mkdir(parents=True, exist_ok=True)
    env_dir = folder / key
    python = env_dir / "bin" / "python"
    with (folder / "lock").open("w") as lock:
        # Two test runs at once share the cache: one installs while the other waits.
        fcntl.flock(lock, fcntl.LOCK_EX)
        for stale in folder.iterdir():
            if stale.is_dir() and stale != env_dir:
                shutil.rmtree(stale, ignore_errors=True)
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
