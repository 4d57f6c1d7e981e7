"""Projects: the folders whose jobs are served."""

from __future__ import annotations

import logging
from pathlib import Path

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from workflows.models import Project

logger = logging.getLogger(__name__)


def project_ensure(*, root_path: Path) -> Project:
    """The project row for ``root_path`` (already resolved), created on first use."""
    root = str(root_path)
    project = Project.objects.filter(root_path=root).first()
    if project is not None:
        return project
    try:
        with transaction.atomic():
            return Project.objects.create(root_path=root, name=root_path.name or root)
    except IntegrityError:
        # Another process registered the same folder at the same moment.
        return Project.objects.get(root_path=root)


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
