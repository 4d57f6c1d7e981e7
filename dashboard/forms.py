"""Input parsing for the dashboard's filters and decision forms.

The decision templates write their own HTML (each form needs its own element ids for the
browser tests); these forms only validate what comes back.
"""

from __future__ import annotations

from django import forms

from dashboard.selectors import SessionFilters
from workflows.models import WorkflowSession

REASON_REQUIRED = "A reason is required so the agent and the team know why"
FEEDBACK_REQUIRED = "Feedback is required so the agent knows what to change"


# Database ids are 64-bit; a larger number is no id at all (and would overflow the query).
MAX_ID = 2**63 - 1
# A reason is read by people and agents on every page of the session; keep it a message.
MAX_TEXT = 10_000


class SessionFilterForm(forms.Form):
    project = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID)
    job = forms.CharField(required=False, max_length=255, strip=True)
    status = forms.ChoiceField(
        required=False, choices=[("", "Any status"), *WorkflowSession.Status.choices]
    )
    agent = forms.CharField(required=False, max_length=128, strip=True)
    started_from = forms.DateField(required=False)
    started_to = forms.DateField(required=False)
    before = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, widget=forms.HiddenInput
    )
    after = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, widget=forms.HiddenInput
    )

    def filters(self) -> SessionFilters:
        """The valid filters; an invalid field is reported on the page and left out."""
        data = getattr(self, "cleaned_data", {})
        return SessionFilters(
            project_id=data.get("project"),
            job_name=data.get("job") or "",
            status=data.get("status") or "",
            agent_id=data.get("agent") or "",
            started_from=data.get("started_from"),
            started_to=data.get("started_to"),
        )


class ProjectFilterForm(forms.Form):
    project = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID)


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


def first_error(form: forms.Form) -> str:
    """One readable sentence for a flash message."""
    for name, errors in form.errors.items():
        plain = name == "__all__" or errors[0] in (REASON_REQUIRED, FEEDBACK_REQUIRED)
        label = "" if plain else f"{name}: "
        return f"{label}{errors[0]}"
    return "The form is not valid"
