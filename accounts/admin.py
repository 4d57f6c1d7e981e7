"""Admin: make API tokens (the secret is shown once, on its own page), list and revoke them.

A token acts with all of its user's permissions, so a superuser may make and revoke tokens
for anyone (picked from the list of users by name); any other staff user only for themselves,
and sees only their own tokens.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import ForeignKey, QuerySet
from django.forms import ModelChoiceField
from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers

from accounts.models import ApiToken
from accounts.people import signed_in_user
from accounts.services import api_token_create, api_token_revoke, api_token_roles_clean
from workflows.admin_base import admin_page, plural
from workflows.errors import InvalidInput


class _WithSecret(Protocol):
    # The token save_model just made carries its secret to response_add; never stored.
    secret: str


class ApiTokenAddForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ["user", "name", "mcp", "mcp_project", "mcp_roles"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        # Checked here, not only by the service, so a taken name shows on the form.
        user, name = cleaned.get("user"), (cleaned.get("name") or "").strip()
        if user is not None and not user.is_active:
            self.add_error("user", "This user is inactive.")
        if (
            user is not None
            and name
            and user.api_tokens.filter(name=name, revoked_at__isnull=True).exists()
        ):
            self.add_error("name", "This user already has a live token with this name.")
        if cleaned.get("mcp_project") is not None and not cleaned.get("mcp"):
            self.add_error("mcp_project", "A project binds MCP use: tick MCP too.")
        roles = cleaned.get("mcp_roles") or []
        if not isinstance(roles, list):
            self.add_error("mcp_roles", 'A JSON list of role names, e.g. ["swe", "qa"].')
        else:
            try:
                cleaned["mcp_roles"] = api_token_roles_clean(roles)
            except InvalidInput as exc:
                self.add_error("mcp_roles", str(exc))
            if roles and not cleaned.get("mcp"):
                self.add_error("mcp_roles", "Roles are those of the token's MCP agent: tick MCP.")
        return cleaned


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "user", "name", "mcp", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    list_select_related = ["user"]
    search_fields = ["prefix", "name", "user__username"]
    readonly_fields = [
        "user",
        "name",
        "mcp",
        "mcp_project",
        "mcp_roles",
        "prefix",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    actions = ["revoke"]
    secret_template = "admin/accounts/apitoken/secret.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiToken]:
        # The list, the change page and the revoke action all read through this.
        tokens = super().get_queryset(request)
        return tokens if request.user.is_superuser else tokens.filter(user=request.user)

    def formfield_for_foreignkey(
        self, db_field: ForeignKey[Any, Any], request: HttpRequest, **kwargs: Any
    ) -> ModelChoiceField | None:
        user = signed_in_user(request)
        if db_field.name == "user" and not user.is_superuser:
            # The only choice: a user given by id is validated against this queryset.
            kwargs["queryset"] = get_user_model().objects.filter(pk=user.pk)
            kwargs["initial"] = user.pk
            kwargs["empty_label"] = None
            kwargs["widget"] = forms.Select
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_form(
        self, request: HttpRequest, obj: ApiToken | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm[ApiToken]]:
        if obj is None:
            kwargs["form"] = ApiTokenAddForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> list[str]:
        # A token never changes after it is made: only its revocation, through the action.
        return [] if obj is None else self.readonly_fields

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> tuple[str, ...]:
        # A tuple: a list[str] is not the list of field groups the admin's signature promises.
        adding = ("user", "name", "mcp", "mcp_project", "mcp_roles")
        return adding if obj is None else tuple(self.readonly_fields)

    def has_delete_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        # Revoked tokens stay listed: who had access, and until when.
        return False

    def save_model(
        self, request: HttpRequest, obj: ApiToken, form: forms.ModelForm[ApiToken], change: bool
    ) -> None:
        if change:
            return
        token, secret = api_token_create(
            user=obj.user,
            name=obj.name,
            by=signed_in_user(request),
            mcp=obj.mcp,
            mcp_project=obj.mcp_project,
            mcp_roles=obj.mcp_roles or [],
        )
        # The admin logs and links the object it passed in: make it the saved token.
        for field in ApiToken._meta.concrete_fields:
            setattr(obj, field.attname, getattr(token, field.attname))
        obj._state.adding = False
        obj._state.db = token._state.db
        # For response_add only; never stored.
        cast(_WithSecret, obj).secret = secret

    def response_add(
        self, request: HttpRequest, obj: ApiToken, post_url_continue: str | None = None
    ) -> HttpResponse:
        # The secret goes out in this one response, not in a flash message: the default
        # message storage keeps messages in a cookie, readable by anything that sees it.
        response = admin_page(
            self,
            request,
            self.secret_template,
            "Copy the token's secret",
            token=obj,
            secret=cast(_WithSecret, obj).secret,
        )
        add_never_cache_headers(response)
        return response

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = sum(
            api_token_revoke(token=token, by=signed_in_user(request)) for token in queryset
        )
        self.message_user(request, f"Revoked {plural(revoked, 'token')}.", messages.SUCCESS)
