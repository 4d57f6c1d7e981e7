"""Builders for test data: files on disk, and people. Workflow rows come from the real services."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from django.contrib.auth.models import Group, Permission, User


def write_job(project_dir: Path, folder: str, job_yml: str, steps: list[str]) -> Path:
    """Write ``.deepwork/jobs/<folder>/job.yml`` and one instructions file per step id."""
    job_dir = project_dir / ".deepwork" / "jobs" / folder
    (job_dir / "steps").mkdir(parents=True, exist_ok=True)
    (job_dir / "job.yml").write_text(job_yml)
    for step in steps:
        (job_dir / "steps" / f"{step}.md").write_text(f"# {step}\n\nDo the {step} work.\n")
    return job_dir


def make_user(
    *,
    username: str,
    perms: Iterable[str] = (),
    groups: Iterable[str] = (),
    superuser: bool = False,
    staff: bool = False,
    password: str | None = None,
) -> User:
    """A person holding exactly ``perms`` ("app_label.codename") and the existing ``groups``.

    ``staff`` lets them into the admin; ``superuser`` implies it. Without ``password`` the
    password is unusable: most tests log in with ``force_login``, a session cookie or a token.
    """
    if superuser:
        user = User.objects.create_superuser(username=username, password=password)
    else:
        user = User.objects.create_user(username=username, password=password, is_staff=staff)
    for name in groups:
        user.groups.add(Group.objects.get(name=name))
    for perm in perms:
        app_label, dot, codename = perm.partition(".")
        if not dot:
            raise ValueError(f"perms: {perm!r} is not 'app_label.codename'")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user
