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

from workflows.errors import Forbidden
from workflows.files import file_kind
from workflows.models import Project
from workflows.roots import project_root_check, project_root_clean

logger = logging.getLogger(__name__)


class ProjectRemoved(Forbidden):
    """The project was removed; nothing serves it until a person adds its folder again."""


@dataclass(frozen=True)
class ProjectAdded:
    """A project as ``project_add`` left it: whether it was new, whether it was served to
    tokens before (``hosted_before``), and what the server found (or did not find) at its
    folder.

    ``warnings`` may be shown to anyone who may add projects; ``folder_detail`` says what is
    at the path (a file, a device, missing, unreadable) and is for the server's log and its
    operator only: over the network it would tell a caller what any path on the server is.
    """

    project: Project
    created: bool
    hosted_before: bool
    folder_found: bool
    warnings: tuple[str, ...]
    folder_detail: str | None = None


def project_ensure(*, root_path: Path) -> Project:
    """The project row for the folder a local stdio server serves (``root_path``, already
    resolved), created on first use, not hosted: only a person makes a folder served to
    tokens. ``InvalidInput`` for a folder no project may be (``project_root_check``),
    ``ProjectRemoved`` for a removed project."""
    project_root_check(root_path)
    project = _project_get_or_create(root_path, hosted=False)[0]
    if project.removed_at is not None:
        raise ProjectRemoved(
            f"The project at {root_path} was removed from this server; a person with the "
            "permission 'workflows.add_project' brings it back with "
            f"'deepwork-server project add {root_path}'"
        )
    return project


def _project_get_or_create(root_path: Path, *, hosted: bool) -> tuple[Project, bool]:
    root = str(root_path)
    project = Project.objects.filter(root_path=root).first()
    if project is not None:
        return project, False
    try:
        with transaction.atomic():
            return Project.objects.create(
                root_path=root, name=root_path.name or root, hosted=hosted
            ), True
    except IntegrityError:
        # Another process registered the same folder at the same moment.
        return Project.objects.get(root_path=root), False


NOT_A_READABLE_FOLDER = (
    "The server cannot read a folder at this path (yet). The project is added; its jobs are "
    "read, and hosted /mcp serves its agents, once a folder the server can read is there "
    "(checked out or mounted on this server)."
)


def _folder_detail(root: Path) -> str | None:
    """What is at ``root`` when it is not a folder the server can read, in words for the
    operator; None when it is one."""
    try:
        mode = root.stat().st_mode
    except FileNotFoundError:
        return f"{root} does not exist"
    except OSError as exc:
        return f"{root} cannot be checked ({exc.strerror or exc})"
    if not stat.S_ISDIR(mode):
        return f"{root} is {file_kind(mode)}, not a folder"
    if not os.access(root, os.R_OK | os.X_OK):
        return f"the server's user cannot read the folder {root}"
    return None


def project_add(*, root_path: str) -> ProjectAdded:
    """Serve the folder ``root_path`` (absolute, on this server) as a hosted project, a
    person's decision: a new project, or the existing one for that folder made hosted (one a
    stdio server registered) or brought back (a removed one).

    Whatever is at the path, or nothing, the answer is the same but for one generic warning
    when it is not a folder the server can read: a server is often given its projects before
    the disk that holds them is mounted or checked out, and an answer naming what a path is
    (a file, a device, unreadable) would let a caller map the server's disk. What was found
    goes to the log and ``folder_detail``, for the operator.
    """
    root = project_root_clean(root_path)
    warnings = list(project_root_check(root))
    detail = _folder_detail(root)
    if detail is not None:
        warnings.append(NOT_A_READABLE_FOLDER)
    project, created = _project_get_or_create(root, hosted=True)
    hosted_before = project.hosted and not created
    if not created and not project.hosted:
        # Compare-and-set: two people hosting at once both see it hosted, once.
        Project.objects.filter(pk=project.pk, hosted=False).update(hosted=True, removed_at=None)
        project.refresh_from_db()
    if created or not hosted_before:
        logger.info(
            "Project %s %s (%s)",
            root,
            "added" if created else "hosted",
            detail or "folder found",
        )
    return ProjectAdded(
        project=project,
        created=created,
        hosted_before=hosted_before,
        folder_found=detail is None,
        warnings=tuple(warnings),
        folder_detail=detail,
    )


def project_remove(*, project: Project, by: str) -> Project:
    """Stop serving ``project`` anywhere (hosted /mcp, the REST API, a local stdio server on
    its next start); its sessions and their history stay, read-only. ``by`` names who
    removed it, for the log. Removing a removed project changes nothing."""
    removed = Project.objects.filter(pk=project.pk, removed_at__isnull=True).update(
        removed_at=timezone.now(), hosted=False
    )
    project.refresh_from_db()
    if removed:
        logger.info("Project %s removed by %s", project.root_path, by)
    return project


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
