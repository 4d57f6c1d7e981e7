"""What every app's admin shares: read-only pages, links, and actions that ask a reason first.

It lives in the engine, which every context builds on, so that each app keeps its own admin
and none of them imports another's. It knows the domain only through the engine's models and
errors (a session id, a refused request), never through another admin.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.db.models import Field, Model, QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.text import Truncator

from workflows.errors import WorkflowError
from workflows.models import WorkflowSession

# How many selected objects the reason page names, and how many failures get a message each;
# a "select all" over a large table is summed up beyond these.
PREVIEW_LIMIT = 50
ERROR_MESSAGE_LIMIT = 20


class ReadOnlyAdmin(admin.ModelAdmin):
    """History and catalog rows are written only by the services: view, never add/change/delete."""

    # The related rows the change page links to, loaded with the object in one query.
    change_select_related: tuple[str, ...] = ()

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Model | None:
        queryset = self.get_queryset(request).select_related(*self.change_select_related)
        field = self.opts.pk if from_field is None else self.opts.get_field(from_field)
        if not isinstance(field, Field):
            # A reverse relation or generic key holds no value of its own to look up by.
            return None
        try:
            return queryset.get(**{field.name: field.to_python(object_id)})
        except (self.model.DoesNotExist, ValidationError, ValueError):
            return None

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True
    # What each row's label or cells read, loaded with the rows.
    select_related: tuple[str, ...] = ()

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request)
        return queryset.select_related(*self.select_related) if self.select_related else queryset

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        return self.fields

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class SessionSearch:
    """The search box finds a session's rows by its id through the session index first.

    Django's search ORs a case-insensitive match over every search field, which no index can
    answer: over a million events that is a full scan for every search. A session id is the
    common search, so it is resolved exactly; any other term falls back to ``search_fields``.
    """

    session_lookup = "session_id"  # the lookup from the model to its session's primary key

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        if term:
            found = WorkflowSession.objects.filter(session_id=term).values_list("pk", flat=True)
            if pks := list(found):
                return queryset.filter(**{self.session_lookup: pks[0]}), False
        return super().get_search_results(request, queryset, search_term)  # type: ignore[misc]


# Links and cells ---------------------------------------------------------------------------------


def admin_link(obj: Model | None, text: str | None = None) -> str:
    """A link to ``obj``'s admin page; builds a URL only, no query."""
    if obj is None:
        return "-"
    url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, text if text is not None else str(obj))


def changelist_link(model: type[Model], text: str, **filters: str | int) -> str:
    opts = model._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    return format_html('<a href="{}?{}">{}</a>', url, urlencode(filters), text)


def related_changelists(site: admin.AdminSite, obj: Model) -> str:
    """Links to the admin listings of the rows that point at ``obj``, each filtered to it.

    Found from the models rather than listed by hand, so an app that adds rows about ``obj``
    (reviews about a session) shows up here without the page's own app knowing of it.
    """
    links = []
    for relation in obj._meta.related_objects:
        model = relation.related_model
        # ``"self"`` is only a name before the app registry resolves it to the model.
        if isinstance(model, str) or not relation.one_to_many or not site.is_registered(model):
            continue
        target = relation.field.target_field.attname
        lookup = {f"{relation.field.name}__{target}__exact": getattr(obj, target)}
        links.append(changelist_link(model, str(model._meta.verbose_name_plural), **lookup))
    return format_html_join(" · ", "{}", ((link,) for link in links)) or "-"


def session_column(path: str = "session", ordering: str | None = "session") -> Any:
    """A list column linking to the session at ``path`` (dotted), labelled with its id."""

    def column(modeladmin: admin.ModelAdmin, obj: Model) -> str:
        session: Any = obj
        for name in path.split("."):
            session = getattr(session, name)
            if session is None:
                return "-"
        return admin_link(session, session.session_id)

    return admin.display(description="session", ordering=ordering)(column)


def compact_json(value: object, limit: int = 80) -> str:
    return Truncator(json.dumps(value, ensure_ascii=False, sort_keys=True)).chars(limit)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def admin_page(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    template: str,
    title: str,
    **context: object,
) -> TemplateResponse:
    """A page of the admin's own look (header, breadcrumbs of this model) outside its views."""
    return TemplateResponse(
        request,
        template,
        {
            **modeladmin.admin_site.each_context(request),
            "title": title,
            "opts": modeladmin.model._meta,
            **context,
        },
    )


# Actions that need a reason -------------------------------------------------------------------


class ReasonForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 5, "cols": 80}))

    def __init__(self, *args: Any, label: str, help_text: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["reason"].label = label
        self.fields["reason"].help_text = help_text


@dataclass(frozen=True)
class ReasonPage:
    """The wording of one action: its name in the menu (and the page's title), then the page's."""

    title: str
    intro: str
    help_text: str
    submit: str
    label: str = "Reason"


def ask_reason(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet,
    page: ReasonPage,
    action: str,
) -> str | TemplateResponse:
    """The reason the person gave on the intermediate page, or the page to (re)show.

    The page posts the selection back to the changelist with the same ``action``, the way
    Django's delete confirmation does; ``apply`` marks the second round.
    """
    label, help_text = page.label, page.help_text
    if "apply" in request.POST:
        form = ReasonForm(request.POST, label=label, help_text=help_text)
        if form.is_valid():
            return form.cleaned_data["reason"]
    else:
        form = ReasonForm(label=label, help_text=help_text)
    count = queryset.count()
    return admin_page(
        modeladmin,
        request,
        "admin/deepwork/action_reason.html",
        page.title,
        intro=page.intro,
        submit=page.submit,
        action=action,
        form=form,
        objects=list(queryset[:PREVIEW_LIMIT]),
        more=max(count - PREVIEW_LIMIT, 0),
        count=count,
        selected=request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
        select_across=request.POST.get("select_across", "0"),
        action_checkbox_name=helpers.ACTION_CHECKBOX_NAME,
    )


def apply_each(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    objects: Iterable[Any],
    call: Callable[[Any], object],
    *,
    name: Callable[[Any], str],
    done: Callable[[int], str],
) -> None:
    """Call one service per object; a refusal is that object's error, never the whole page's."""
    succeeded = 0
    failures: list[str] = []
    for obj in objects:
        try:
            call(obj)
        except WorkflowError as exc:
            failures.append(f"{name(obj)}: {exc}")
        else:
            succeeded += 1
    for failure in failures[:ERROR_MESSAGE_LIMIT]:
        modeladmin.message_user(request, failure, messages.ERROR)
    if len(failures) > ERROR_MESSAGE_LIMIT:
        modeladmin.message_user(
            request, f"… and {len(failures) - ERROR_MESSAGE_LIMIT} more failed.", messages.ERROR
        )
    if succeeded:
        modeladmin.message_user(request, done(succeeded), messages.SUCCESS)


# An admin action's body for one selected object: (the admin, the object, the reason, the
# person acting). It calls one service; a ``WorkflowError`` it raises is that object's error.
ReasonCall = Callable[[Any, Any, str, Any], object]
AdminAction = Callable[[Any, HttpRequest, QuerySet], TemplateResponse | None]


def reason_action(
    page: ReasonPage,
    *,
    permission: str,
    done: Callable[[int], str],
    name: Callable[[Any], str] = str,
    objects: Callable[[Any, QuerySet], Iterable[Any]] = lambda modeladmin, queryset: queryset,
) -> Callable[[ReasonCall], AdminAction]:
    """Make the decorated method an admin action that asks why on ``page``, then calls the
    method once per selected object with the reason and the person acting.

    ``objects`` maps the selection to what the method acts on (the step runs of selected
    reviews, say); ``name`` labels an object in an error message; the admin class needs a
    ``has_<permission>_permission`` method, as for any Django action with permissions.
    """

    def decorate(call: ReasonCall) -> AdminAction:
        def action(
            modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet
        ) -> TemplateResponse | None:
            reason = ask_reason(modeladmin, request, queryset, page, call.__name__)
            if not isinstance(reason, str):
                return reason
            apply_each(
                modeladmin,
                request,
                objects(modeladmin, queryset),
                lambda obj: call(modeladmin, obj, reason, request.user),
                name=name,
                done=done,
            )
            return None

        action.__name__ = call.__name__
        action.__doc__ = call.__doc__
        return admin.action(description=f"{page.title}…", permissions=[permission])(action)

    return decorate
