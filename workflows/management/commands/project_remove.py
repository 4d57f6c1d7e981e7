"""``manage.py project_remove PROJECT``: stop serving a project anywhere (hosted ``/mcp``, the
REST API, a local stdio server on its next start), keeping its sessions and their history,
read-only. PROJECT is its id, or its folder (a relative one is taken from the current folder).
Adding the folder again (``project_add``) brings it back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workflows.errors import WorkflowError
from workflows.selectors.catalog import project_find, project_ref_id
from workflows.services.projects import project_remove


class Command(BaseCommand):
    help = "Remove a project (by id or folder): served nowhere, its sessions kept."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", help="The project's id, or its folder.")

    def handle(self, *args: Any, **options: Any) -> None:
        ref = options["project"]
        # The operator is at the shell: a folder means what it does there, as for project_add.
        if project_ref_id(ref) is None and ref and "\x00" not in ref:
            ref = str(Path(ref).expanduser().absolute().resolve())
        try:
            project = project_find(ref=ref)
            was_removed = project.removed_at is not None
            project = project_remove(project=project, by="the command line")
        except WorkflowError as exc:
            raise CommandError(str(exc)) from None
        verb = "Already removed:" if was_removed else "Removed"
        self.stderr.write(
            f"{verb} project {project.pk} '{project.name}' at {project.root_path}; its sessions "
            "are kept, read-only"
        )
