"""``manage.py project_list``: every project, one a line: its id, whether it is served, its
folder and its name, separated by tabs (a first line names the columns).

``hosted``: served to tokens over ``/mcp`` and the REST API; ``local``: registered by a local
stdio server, served only to it until a person hosts it (``project_add``); ``removed``: served
nowhere, its sessions kept.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from workflows.models import Project
from workflows.selectors.catalog import project_list


def project_state(project: Project) -> str:
    if project.removed_at is not None:
        return "removed"
    return "hosted" if project.hosted else "local"


class Command(BaseCommand):
    help = "List the projects: id, state (hosted, local, removed), folder, name."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write("id\tstate\troot_path\tname")
        for project in project_list():
            self.stdout.write(
                f"{project.pk}\t{project_state(project)}\t{project.root_path}\t{project.name}"
            )
