"""API tokens: how programs authenticate, to the REST API and to hosted /mcp, as a person."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class ApiToken(models.Model):
    """A bearer token of one user. Only the secret's SHA-256 is stored, never the secret.

    ``prefix`` is the secret's first characters: enough to tell tokens apart in a list, too
    short to use.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'ci'.")
    prefix = models.CharField(max_length=16, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Hosted MCP (`/mcp` of the web server): a token allowed there is one agent identity.
    mcp = models.BooleanField(
        default=False,
        help_text="May connect to /mcp as an agent, with its own stack.",
    )
    # A token bound to a project serves only that project; unbound, each request names one.
    mcp_project = models.ForeignKey(
        "workflows.Project",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="The only project this token may use over MCP (empty: any, named per request).",
    )
    # What the dashboard's agents page shows for the token's agent, and which DAG steps
    # (agents toolset) it takes; a request's X-Deepwork-Roles header may name others.
    mcp_roles = models.JSONField(
        default=list,
        blank=True,
        help_text='Roles of this token\'s agent over MCP, e.g. ["swe", "qa"] (empty: none).',
    )

    class Meta:
        # The table of the app the model began in: moving it changed no data.
        db_table = "api_apitoken"
        verbose_name = "API token"
        constraints = [
            # Also the index of the lookup every API request makes (hash of the bearer secret).
            models.UniqueConstraint(fields=["key_hash"], name="api_apitoken_unique_key_hash"),
            # Names tell a user's live tokens apart; a revoked token frees its name.
            models.UniqueConstraint(
                fields=["user", "name"],
                condition=Q(revoked_at__isnull=True),
                name="api_apitoken_unique_live_name",
            ),
            models.CheckConstraint(condition=~Q(name=""), name="api_apitoken_name_not_empty"),
        ]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None
