"""Recount the insight tallies from the sessions, runs and events.

The event writer keeps the tallies as work happens; this is for when rows changed past it: a
restore or import, sessions deleted by hand, or an upgrade that changed what is counted.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from insights.tallies import insight_tallies_rebuild
from workflows.models import Project


class Command(BaseCommand):
    help = "Recount the insights' daily tallies from the rows (all projects, or one)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", type=int, help="only this project's id")

    def handle(self, *args: Any, **options: Any) -> None:
        project_id = options["project"]
        if project_id is not None and not Project.objects.filter(pk=project_id).exists():
            raise CommandError(f"No project with id {project_id}; see the dashboard's project list")
        counted = insight_tallies_rebuild(project_id=project_id)
        self.stdout.write(
            f"Rebuilt {counted.session_rows} session, {counted.agent_rows} agent and "
            f"{counted.step_time_rows} step-time tally rows."
        )
