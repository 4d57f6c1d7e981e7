"""``manage.py project_add PATH``: serve a folder on this server as a hosted project (a new
one, or the existing one a local stdio server registered or that was removed).

Prints only the project's id on stdout, so a script can capture it
(``ID=$(python manage.py project_add /srv/repo)``); what it found at the folder goes to
stderr. A relative PATH is taken from the current folder, as ``mcpserve --path`` takes it.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workflows.errors import WorkflowError
from workflows.services.projects import project_add


class Command(BaseCommand):
    help = "Add (or host) a folder on this server as a project (prints its id)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="The project folder (the one holding .deepwork/jobs).")

    def handle(self, *args: Any, **options: Any) -> None:
        path = options["path"]
        # The server's operator is at the shell: '~' and a relative path mean what they do
        # there. Over REST and in the admin there is no such place, so they must be absolute.
        if path and "\x00" not in path:
            path = os.path.abspath(os.path.expanduser(path))
        try:
            added = project_add(root_path=path)
        except WorkflowError as exc:
            raise CommandError(str(exc)) from None
        project = added.project
        verb = (
            "Added" if added.created else "Already a project:" if added.hosted_before else "Hosted"
        )
        self.stderr.write(f"{verb} project {project.pk} '{project.name}' at {project.root_path}")
        for warning in added.warnings:
            self.stderr.write(f"Warning: {warning}")
        # The operator is at the server's shell and may see what is at the path; over the
        # network only the warning's one wording is given.
        if added.folder_detail is not None:
            self.stderr.write(f"Found: {added.folder_detail}")
        self.stdout.write(str(project.pk))
