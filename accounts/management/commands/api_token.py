"""``manage.py api_token create|list|revoke``: API tokens from the command line.

``create`` prints only the secret on stdout, so a script can capture it:
``TOKEN=$(python manage.py api_token create --user alice --name ci)``. Installed, the same is
``deepwork-server token create ...``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from accounts.identity import DRIVE
from accounts.selectors import api_token_find, api_token_list
from accounts.services import api_token_create, api_token_revoke, user_create
from deepwork_site.process import manage_command
from workflows.errors import NotFound, WorkflowError
from workflows.selectors.catalog import project_find

# The group migrate makes (dashboard/apps.py) whose people may drive sessions, which is what
# /mcp asks of a token's user; --create-user puts a new user there.
AGENT_GROUP = "Deciders"


class Command(BaseCommand):
    help = "Create, list or revoke REST API tokens."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        create = commands.add_parser("create", help="Make a token; prints its secret once.")
        create.add_argument("--user", required=True, help="Username the token acts as.")
        create.add_argument(
            "--name",
            help="What the token is for, e.g. 'ci' (default: 'mcp' or 'api' and the time).",
        )
        create.add_argument(
            "--create-user",
            action="store_true",
            help=f"Make the user if there is none, in the {AGENT_GROUP} group (who may drive "
            "sessions, as /mcp requires), with no password until one is set.",
        )
        create.add_argument(
            "--mcp",
            action="store_true",
            help="The token may connect to /mcp as an agent (its own identity and stack).",
        )
        create.add_argument(
            "--project",
            help="With --mcp: the only project (id or root path) the token may use over MCP.",
        )
        create.add_argument(
            "--roles",
            help="With --mcp: comma list of the token agent's roles, e.g. swe,qa (shown on the "
            "agents page; DAG steps of those roles go to it).",
        )
        listing = commands.add_parser("list", help="List tokens (never their secrets).")
        listing.add_argument("--user", help="Only this user's tokens.")
        revoke = commands.add_parser("revoke", help="Revoke a token at once.")
        revoke.add_argument("token", help="The token's id or its whole prefix as listed.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, f"_{options['action']}")(options)
        except WorkflowError as exc:
            raise CommandError(str(exc)) from None

    def _create(self, options: dict[str, Any]) -> None:
        username = options["user"]
        user = get_user_model().objects.filter(username=username).first()
        if user is None and options["create_user"]:
            user = user_create(username=username, group=AGENT_GROUP)
            self.stderr.write(f"Made user '{username}' in the {AGENT_GROUP} group.")
        if user is None:
            raise CommandError(
                f"No user named '{username}'. Add --create-user to make one (in the "
                f"{AGENT_GROUP} group, who may drive sessions), or make one with "
                f"'{manage_command()} createsuperuser' or in the admin."
            )
        if options["mcp"] and not user.has_perm(DRIVE):
            self.stderr.write(
                f"Warning: '{username}' lacks the permission '{DRIVE}', so /mcp will refuse "
                f"this token until they have it (e.g. in the {AGENT_GROUP} group)."
            )
        project = None
        if options["project"]:
            try:
                project = project_find(ref=options["project"])
            except NotFound as exc:
                raise CommandError(str(exc)) from None
        roles = [r for r in (options["roles"] or "").split(",") if r.strip()]
        token, secret = api_token_create(
            user=user,
            name=options["name"]
            or f"{'mcp' if options['mcp'] else 'api'} {timezone.now():%Y-%m-%d %H:%M:%S}",
            mcp=options["mcp"],
            mcp_project=project,
            mcp_roles=roles,
        )
        self.stderr.write(
            f"Token {token.prefix}… '{token.name}' for {user.get_username()} made. "
            "Its secret follows; it is not shown again."
        )
        self.stdout.write(secret)

    def _list(self, options: dict[str, Any]) -> None:
        for token in api_token_list(username=options["user"]):
            state = f"revoked {token.revoked_at:%Y-%m-%d %H:%M}" if token.is_revoked else "live"
            used = f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "never"
            if token.mcp:
                scope = f"project {token.mcp_project_id}" if token.mcp_project_id else "any project"
                state += f", MCP ({scope})"
            self.stdout.write(
                f"{token.pk}\t{token.prefix}…\t{token.user.get_username()}\t{token.name}\t"
                f"last used {used}\t{state}"
            )

    def _revoke(self, options: dict[str, Any]) -> None:
        token = api_token_find(ref=options["token"])
        if api_token_revoke(token=token):
            self.stdout.write(f"Revoked {token.prefix}… '{token.name}' of {token.user}")
        else:
            self.stdout.write(f"{token.prefix}… '{token.name}' was already revoked")
