"""Small presentation helpers for the dashboard templates."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django import template
from django.utils import formats, timezone
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

from workflows.models import Event

register = template.Library()

KIND_LABELS = dict(Event.Kind.choices)


@register.simple_tag
def when(moment: dt.datetime | str | None) -> str:
    """A ``<time>`` element in UTC, or a dash; a read model's ISO text reads the same."""
    if not moment:
        return "—"
    if isinstance(moment, str):
        moment = dt.datetime.fromisoformat(moment)
    moment = timezone.localtime(moment, dt.UTC)
    return format_html(
        '<time datetime="{}">{}</time>',
        moment.isoformat(),
        moment.strftime("%Y-%m-%d %H:%M:%S"),
    )


@register.filter
def kind_label(kind: str) -> str:
    return KIND_LABELS.get(kind, kind.replace("_", " "))


def _shorten(text: object, limit: int = 120) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _review_round(payload: dict[str, Any]) -> list[str]:
    """A review round: attempt, failures, steps, reason. Rows written before every round had
    one shape (external reviews without steps, a reason with one ``step_id``) still read."""
    parts: list[str] = []
    if payload.get("attempt"):
        parts.append(f"attempt {payload['attempt']}")
    if payload.get("reviews"):
        parts.append(f"{payload.get('failed', 0)} of {payload['reviews']} failed")
    steps = payload.get("step_ids")
    if not isinstance(steps, list):
        steps = [payload["step_id"]] if payload.get("step_id") else []
    if steps:
        parts.append(("step " if len(steps) == 1 else "steps ") + ", ".join(map(str, steps)))
    if payload.get("override_reason"):
        parts.append(_shorten(payload["override_reason"]))
    return parts


@register.filter
def event_detail(event: Event) -> str:
    """One line saying what the event's payload adds to its kind."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    parts: list[str] = []
    if event.kind == Event.Kind.SESSION_STARTED:
        parts.append(f"{payload.get('job', '')}/{payload.get('workflow', '')}")
        if payload.get("goal"):
            parts.append(f"goal: {_shorten(payload['goal'], 80)}")
    elif event.kind == Event.Kind.STEP_REOPENED:
        parts.append(f"back to {payload.get('step_id', '?')}")
        if payload.get("invalidated_steps"):
            parts.append("invalidated " + ", ".join(payload["invalidated_steps"]))
    elif event.kind in (Event.Kind.REVIEW_PASSED, Event.Kind.REVIEW_FAILED):
        parts.extend(_review_round(payload))
    elif event.kind == Event.Kind.CATALOG_SYNCED:
        parts.append(f"{payload.get('jobs', 0)} jobs, {payload.get('errors', 0)} load errors")
    elif event.kind == Event.Kind.REVIEW_REQUESTED:
        parts.append(str(payload.get("instructions", "")))
    else:
        if payload.get("step_id"):
            parts.append(f"step {payload['step_id']}")
        if payload.get("by"):
            via = f" via {payload['via']}" if payload.get("via") else ""
            parts.append(f"by {payload['by']}{via}")
        for key in ("reason", "explanation", "workflow"):
            if payload.get(key):
                parts.append(_shorten(payload[key]))
                break
    return " · ".join(part for part in parts if part)


@register.filter
def duration(ms: int | None) -> str:
    if ms is None:
        return ""
    return f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms} ms"


@register.filter
def filesize(size: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)


@register.simple_tag
def progress(done: int, total: int) -> str:
    """The progress bar: steps done of the workflow's steps. A tag, not an include: the
    overview draws one per active session."""
    return format_html(
        '<span class="progress" data-testid="progress" data-done="{0}" data-total="{1}">'
        '<progress value="{0}" max="{2}" aria-label="{0} of {1} steps done">{0}/{1}</progress> '
        '<span class="progress-label">{0}/{1} steps</span></span>',
        int(done),
        int(total),
        int(total) or 1,
    )


@register.filter
def table_body(table: Any) -> SafeString:
    """An insight's data table rows, each cell as the template would show it (localized,
    escaped; nothing for None). Built here rather than by template loops: a year's table has
    thousands of cells, and each template node costs far more than a string join."""
    rows = table.rows
    if not rows:
        return format_html('<tr><td colspan="{}">No rows.</td></tr>', len(table.columns))
    cells = (
        "".join(
            "<td></td>"
            if cell is None
            else f"<td>{conditional_escape(formats.localize(cell))}</td>"
            for cell in row
        )
        for row in rows
    )
    return mark_safe("".join(f"<tr>{row}</tr>" for row in cells))  # noqa: S308 - escaped above


# A step's result shown on its DAG page: enough to read, never a whole large report.
MAX_RESULT_SHOWN = 2_000


@register.filter
def result_text(value: Any) -> str:
    """A DAG step's result as text (JSON for anything but a string), cut at a few KB."""
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    if len(text) > MAX_RESULT_SHOWN:
        return f"{text[:MAX_RESULT_SHOWN]}\n… ({len(text) - MAX_RESULT_SHOWN:,} more characters)"
    return text
