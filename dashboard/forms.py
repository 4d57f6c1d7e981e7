"""Input parsing for the dashboard's filters and decision forms.

The decision templates write their own HTML (each form needs its own element ids for the
browser tests); these forms only validate what comes back.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from django import forms
from django.core.validators import RegexValidator

from workflows.models import Project, WorkflowSession
from workflows.selectors.catalog import project_not_found
from workflows.selectors.sessions import SESSION_CURSOR_PATTERN, SessionFilter

REASON_REQUIRED = "A reason is required so the agent and the team know why"
FEEDBACK_REQUIRED = "Feedback is required so the agent knows what to change"
ABORT_UNCONFIRMED = "Tick the box to confirm: an aborted session cannot be resumed"


# Database ids are 64-bit; a larger number is no id at all (and would overflow the query).
MAX_ID = 2**63 - 1
# A reason is read by people and agents on every page of the session; keep it a message.
MAX_TEXT = 10_000
CURSOR = RegexValidator(SESSION_CURSOR_PATTERN, "Not a page of this list; start from the first")


class SessionFilterForm(forms.Form):
    project = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID)
    job = forms.CharField(required=False, max_length=255, strip=True)
    status = forms.ChoiceField(
        required=False, choices=[("", "Any status"), *WorkflowSession.Status.choices]
    )
    agent = forms.CharField(required=False, max_length=128, strip=True)
    started_from = forms.DateField(required=False)
    started_to = forms.DateField(required=False)
    # Page cursors, as the pager hands them out.
    before = forms.CharField(
        required=False, validators=[CURSOR], max_length=40, widget=forms.HiddenInput
    )
    after = forms.CharField(
        required=False, validators=[CURSOR], max_length=40, widget=forms.HiddenInput
    )

    def filters(self) -> SessionFilter:
        """The valid filters; an invalid field is reported on the page and left out. The dates
        are whole UTC days: ``started_to`` includes its day."""
        data = getattr(self, "cleaned_data", {})
        started_from: dt.date | None = data.get("started_from")
        started_to: dt.date | None = data.get("started_to")
        return SessionFilter(
            project_id=data.get("project"),
            job=data.get("job") or None,
            status=data.get("status") or None,
            agent_id=data.get("agent") or None,
            started_after=None if started_from is None else _start_of_day(started_from),
            # The last day has no next one: up to it is everything.
            started_before=None
            if started_to is None or started_to == dt.date.max
            else _start_of_day(started_to + dt.timedelta(days=1)),
        )


def _start_of_day(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time.min, tzinfo=dt.UTC)


class ProjectFilterForm(forms.Form):
    project = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID)

    def __init__(self, *args: Any, projects: Sequence[Project], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.known = {project.pk for project in projects}

    def clean_project(self) -> int | None:
        project_id: int | None = self.cleaned_data.get("project")
        if project_id is not None and project_id not in self.known:
            raise forms.ValidationError(project_not_found(project_id))
        return project_id


class OverrideForm(forms.Form):
    """Pass the review of one step of the session's current entry."""

    step_id = forms.CharField(max_length=255)
    reason = forms.CharField(
        strip=True, max_length=MAX_TEXT, error_messages={"required": REASON_REQUIRED}
    )


class ChangesForm(forms.Form):
    """Send one step of the session's current entry back with feedback."""

    step_id = forms.CharField(max_length=255)
    feedback = forms.CharField(
        strip=True, max_length=MAX_TEXT, error_messages={"required": FEEDBACK_REQUIRED}
    )


class AbortForm(forms.Form):
    reason = forms.CharField(
        strip=True, max_length=MAX_TEXT, error_messages={"required": REASON_REQUIRED}
    )
    # Aborting cannot be undone: the form asks for a second, deliberate act.
    confirm = forms.BooleanField(error_messages={"required": ABORT_UNCONFIRMED})


def first_error(form: forms.Form) -> str:
    """One readable sentence for a flash message."""
    for name, errors in form.errors.items():
        plain = name == "__all__" or errors[0] in (
            REASON_REQUIRED,
            FEEDBACK_REQUIRED,
            ABORT_UNCONFIRMED,
        )
        label = "" if plain else f"{name}: "
        return f"{label}{errors[0]}"
    return "The form is not valid"


class ConnectTokenForm(forms.Form):
    """A new MCP token for the person signed in, bound to one project."""

    project = forms.IntegerField(min_value=1, max_value=MAX_ID)
    # Blank: a name with the time it was made (a person's live tokens have distinct names).
    name = forms.CharField(required=False, max_length=100, strip=True)

    def __init__(self, *args: Any, projects: Sequence[Project], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.projects = {project.pk: project for project in projects}

    def clean_project(self) -> Project:
        project_id: int = self.cleaned_data["project"]
        if project_id not in self.projects:
            raise forms.ValidationError(project_not_found(project_id))
        return self.projects[project_id]
