"""The product as a user installs it: what the tests of the installed wheel share (the
fixtures that build and install it are in ``tests/e2e/conftest.py``)."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings

CHECKOUT = Path(settings.BASE_DIR)
DIST = "deepwork_server"
# Every top-level Python package of the checkout but the tests and the distribution package.
APPS = tuple(
    sorted(
        path.parent.name
        for path in CHECKOUT.glob("*/__init__.py")
        if path.parent.name not in ("tests", DIST)
    )
)
# Long enough for a first install from PyPI on a slow link; a hang still fails.
INSTALL_TIMEOUT = 600


def user_env(venv: Path, home: Path, var_dir: Path | None) -> dict[str, str]:
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
