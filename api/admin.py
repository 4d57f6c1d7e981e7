"""Admin: make API tokens for users (the secret is shown once), list and revoke them."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages

from api.models import ApiToken
from api.services import api_token_create, api_token_revoke


class ApiTokenAddForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ["user", "name"]

    def clean(self):
        cleaned = super().clean()
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
        return cleaned


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "user", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    list_select_related = ["user"]
    search_fields = ["prefix", "name", "user__username"]
    readonly_fields = ["user", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]
    raw_id_fields = ["user"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = ApiTokenAddForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        # A token never changes after it is made: only its revocation, through the action.
        return [] if obj is None else self.readonly_fields

    def get_fields(self, request, obj=None):
        return ["user", "name"] if obj is None else self.readonly_fields

    def has_delete_permission(self, request, obj=None) -> bool:
        # Revoked tokens stay listed: who had access, and until when.
        return False

    def save_model(self, request, obj, form, change) -> None:
        if change:
            return
        token, secret = api_token_create(user=obj.user, name=obj.name)
        # The admin logs and links the object it passed in: make it the saved token.
        for field in ApiToken._meta.concrete_fields:
            setattr(obj, field.attname, getattr(token, field.attname))
        obj._state.adding = False
        obj._state.db = token._state.db
        self.message_user(
            request,
            f"Token for {token.user.get_username()} made. Copy its secret now, it is not shown "
            f"again: {secret}",
            messages.WARNING,
        )

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke(self, request, queryset) -> None:
        revoked = sum(api_token_revoke(token=token) for token in queryset)
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)
