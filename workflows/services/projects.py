"""Projects: the folders whose jobs are served."""

from __future__ import annotations

from pathlib import Path

from django.db import IntegrityError, transaction

from workflows.models import Project


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
