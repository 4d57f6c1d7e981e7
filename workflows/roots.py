"""Which folders may be a project: the one check every way a project comes to exist runs
(``mcpserve --path``, ``project add`` on the command line, ``POST /api/projects``, the admin).

A project's files become readable through its sessions: an agent names an output, and the
server reads it, shows it on the dashboard and checks it against schemas. So a project root
must never hold what the server keeps to itself. Kept free of models, so that ``mcpserve``
can check its ``--path`` before it sets Django up.
"""

from __future__ import annotations

import contextlib
import os
import pwd
from pathlib import Path

from django.conf import settings

from workflows.errors import InvalidInput

# What ``Project.root_path`` holds; a longer path could never be stored.
MAX_ROOT_PATH = 1024

# Folders the operating system keeps, with everything inside them. Serving one is a warning,
# not a refusal: a person may mean it (a configuration repository under /etc, a checkout under
# /usr/local/src), and the server reads only what its own user may read. What the server keeps
# to itself (its data folder, its home) is refused instead: no project needs those.
SYSTEM_TREES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
)
# These themselves, and the system's parts of /var; /var/www and /srv stay quiet, since
# projects live there.
SYSTEM_FOLDERS = (
    "/home",
    "/var",
    "/var/backups",
    "/var/cache",
    "/var/lib",
    "/var/log",
    "/var/mail",
    "/var/spool",
)

KEPT_TO_ITSELF = (
    "root_path is or contains a folder this server keeps to itself (its data folder or its "
    "user's home folder); give the project's own folder"
)


def project_root_clean(raw: str) -> Path:
    """``raw``, an absolute folder path as a person or client gave it, as the project root
    ``mcpserve --path`` would serve it under (symbolic links and ``..`` resolved, so both
    find the same row); ``InvalidInput`` naming the rule it breaks. Says nothing about what
    is at the path, and nothing of which folders may be projects (``project_root_check``)."""
    if not raw:
        raise InvalidInput("root_path is empty; give the project folder's absolute path")
    if "\x00" in raw:
        raise InvalidInput("root_path contains a NUL byte")
    if any(ord(char) < 32 or ord(char) == 127 for char in raw):
        raise InvalidInput("root_path contains a control character (a newline, a tab...)")
    if len(raw) > MAX_ROOT_PATH:
        raise InvalidInput(
            f"root_path is {len(raw)} characters; at most {MAX_ROOT_PATH} are stored"
        )
    given = Path(raw)
    if not given.is_absolute():
        raise InvalidInput(
            f"root_path must be absolute (a folder on the server), got {raw[:200]!r}"
        )
    try:
        root = given.resolve()
    except (OSError, RuntimeError):  # a symbolic link loop, or a part that cannot be read
        raise InvalidInput(f"root_path {raw[:200]!r} cannot be resolved on this server") from None
    if len(str(root)) > MAX_ROOT_PATH:
        raise InvalidInput(
            f"root_path resolves to {len(str(root))} characters; at most {MAX_ROOT_PATH} are stored"
        )
    return root


def _resolved(folder: Path) -> Path:
    try:
        return folder.resolve()
    except (OSError, RuntimeError):
        return folder


def _homes() -> set[Path]:
    """The server's user's home folder, as ``$HOME`` and the account database name it (a
    server started with another ``HOME`` still has its own)."""
    homes = [os.environ.get("HOME", "")]
    # A user id with no account entry (some containers) has only $HOME.
    with contextlib.suppress(KeyError):
        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    return {_resolved(Path(home)) for home in homes if home and Path(home).is_absolute()}


def project_root_check(root: Path) -> tuple[str, ...]:
    """Whether ``root`` (absolute, resolved) may be a project: ``InvalidInput`` for the file
    system's root, the server's data folder or anything in it, its user's home folder, or any
    folder that contains one of them; else the warnings to give, for a system folder."""
    if root == Path(root.anchor):
        raise InvalidInput("root_path is the file system's root; give the project's own folder")
    data = _resolved(Path(settings.VAR_DIR))
    if root == data or data in root.parents or root in data.parents:
        raise InvalidInput(KEPT_TO_ITSELF)
    homes = _homes()
    for home in homes:
        if root == home or root in home.parents:
            raise InvalidInput(KEPT_TO_ITSELF)
    if any(home in root.parents for home in homes):
        return ()  # the server's user's own folders (its home may be /root)
    text = root.as_posix()
    if text not in SYSTEM_FOLDERS and not any(
        text == tree or text.startswith(tree + "/") for tree in SYSTEM_TREES
    ):
        return ()
    return (
        f"{root} is a system folder: every file in it the server's user can read becomes "
        "readable through this project's sessions. Remove the project (project remove) "
        "unless that is what you mean.",
    )
