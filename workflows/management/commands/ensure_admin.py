"""Create the first local admin account once, and say how to log in.

Run by ``make run`` and ``deepwork-server serve``. If any superuser exists it does nothing, so
it is safe to run every time.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from deepwork_site.process import manage_command


class Command(BaseCommand):
    help = "Create a local 'admin' superuser with a random password if there is no superuser yet."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, **options: Any) -> None:
        user_model = get_user_model()
        if user_model.objects.filter(is_superuser=True).exists():
            return
        password = secrets.token_urlsafe(12)
        user_model.objects.create_superuser(
            username=options["username"], email="", password=password
        )
        self.stdout.write(
            f"Created the first admin account.\n  username: {options['username']}\n"
            f"  password: {password}\n"
            "It is shown only now; change it with: "
            f"{manage_command()} changepassword {options['username']}"
        )
