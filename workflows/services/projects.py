"""Projects: the folders whose jobs are served."""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from workflows.errors import InvalidInput
from workflows.files import file_kind
from workflows.models import Project

logger = logging.getLogger(__name__)

# What ``Project.root_path`` holds; a longer path could never be stored.
MAX_ROOT_PATH = 1024


@dataclass(frozen=True)
class ProjectAdded:
    """A project as ``project_add`` left it: whether it was new, and what the server found
    (or did not find) at its folder."""

    project: Project
    created: bool
    folder_found: bool
    warnings: tuple[str, ...]


def project_ensure(*, root_path: Path) -> Project:
    """The project row for ``root_path`` (already resolved), created on first use."""
    return _project_get_or_create(root_path)[0]


def _project_get_or_create(root_path: Path) -> tuple[Project, bool]:
    root = str(root_path)
    project = Project.objects.filter(root_path=root).first()
    if project is not None:
        return project, False
    try:
        with transaction.atomic():
            return Project.objects.create(root_path=root, name=root_path.name or root), True
    except IntegrityError:
        # Another process registered the same folder at the same moment.
        return Project.objects.get(root_path=root), False


def project_root_clean(raw: str) -> Path:
    """``raw``, an absolute folder path as a person or client gave it, as the project root
    ``mcpserve --path`` would serve it under (symbolic links and ``..`` resolved, so both
    find the same row); ``InvalidInput`` naming the rule it breaks."""
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
    except (OSError, RuntimeError) as exc:  # a symbolic link loop
        raise InvalidInput(f"root_path {raw[:200]!r} cannot be resolved: {exc}") from None
    if len(str(root)) > MAX_ROOT_PATH:
        raise InvalidInput(
            f"root_path resolves to {len(str(root))} characters; at most {MAX_ROOT_PATH} are stored"
        )
    if root == Path(root.anchor):
        raise InvalidInput("root_path is the file system's root; give the project's own folder")
    return root


def _folder_warnings(root: Path) -> tuple[bool, list[str]]:
    """Whether ``root`` is a folder the server can read, with what to tell the person if not;
    ``InvalidInput`` when something else (a file) is in its place."""
    try:
        mode = root.stat().st_mode
    except FileNotFoundError:
        return False, [
            f"The folder {root} does not exist on this server (yet). The project is added; "
            "its jobs are read, and hosted /mcp serves its agents, once the folder is there "
            "(checked out or mounted on this server)."
        ]
    except OSError as exc:
        return False, [
            f"The folder {root} cannot be checked on this server ({exc.strerror or exc}). "
            "The project is added; its jobs are read once the server can reach it."
        ]
    if not stat.S_ISDIR(mode):
        raise InvalidInput(
            f"root_path {str(root)[:200]!r} is {file_kind(mode)} on this server; a project "
            "is a folder (the one holding .deepwork/jobs)"
        )
    if not os.access(root, os.R_OK | os.X_OK):
        return False, [
            f"The server's user cannot read the folder {root}. The project is added; its "
            "jobs are read once the folder's permissions let the server in."
        ]
    return True, []


def project_add(*, root_path: str) -> ProjectAdded:
    """Serve the folder ``root_path`` (absolute, on this server) as a project, or find the
    project that already serves it.

    A folder that is missing or unreadable is a warning, not a refusal: the row names a place
    on the server, and a server is often given its projects before the disk that holds them
    is mounted or checked out; nothing is read from it until an agent or a page asks, and
    each of those says again that the folder is missing. Something that is not a folder
    (a file) in its place is refused: it can never be served.
    """
    root = project_root_clean(root_path)
    found, warnings = _folder_warnings(root)
    project, created = _project_get_or_create(root)
    if created:
        logger.info("Project %s added (%s)", root, "found" if found else "folder missing")
    return ProjectAdded(
        project=project, created=created, folder_found=found, warnings=tuple(warnings)
    )


def project_review_commands_set(*, project: Project, allowed: bool, by: User) -> Project:
    """Allow or stop the web server running ``project``'s review precompute commands,
    recording who decided and when (also when nothing changes: the latest decision counts)."""
    # One UPDATE: the flag and its who-and-when change together.
    Project.objects.filter(pk=project.pk).update(
        review_commands_allowed=allowed,
        review_commands_changed_at=timezone.now(),
        review_commands_changed_by=by,
        review_commands_changed_by_name=by.get_username(),
    )
    project.refresh_from_db()
    logger.info(
        "Review commands of project %s %s by %s",
        project.root_path,
        "allowed" if allowed else "disallowed",
        by.get_username(),
    )
    return project
