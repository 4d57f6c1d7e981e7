"""The installed server's one top-level package.

Installed, every app of the server (``workflows``, ``api``, ``dashboard``, …) lives inside this
package, so an environment shared with other projects gains no generic top-level names that
could shadow theirs or be shadowed by them. The apps still import one another by their own
names, as in a clone (``from workflows.models import Project``), and Django finds them by those
names in ``INSTALLED_APPS``: so the server's own process puts the folder holding them first on
its import path before importing any of them. Only the server's entry points do that (the
``deepwork-server`` command and ``python -m deepwork_server``); importing this package changes
nothing, and nothing the server starts inherits the path through the environment.

In a clone this folder holds only this file and ``__main__.py``; the apps sit beside it.
"""

from __future__ import annotations

import sys
from pathlib import Path


def apps_folder() -> Path:
    """The folder holding the apps: this package's own when installed, the checkout in a
    clone."""
    here = Path(__file__).resolve().parent
    return here if (here / "deepwork_site").is_dir() else here.parent


def apps_on_path() -> None:
    """Put the apps' folder first on the import path, ahead of the current folder, where a
    project the server serves may have a ``workflows`` or ``api`` package of its own."""
    folder = str(apps_folder())
    if folder in sys.path:
        sys.path.remove(folder)
    sys.path.insert(0, folder)


def main() -> None:
    """The ``deepwork-server`` console command."""
    apps_on_path()
    from deepwork_site.cli import main as cli_main

    cli_main()
