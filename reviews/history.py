"""A session's whole history as one document: the session, its step runs with their outputs
and notes, every review verdict and person's ruling, its child sessions and its events, as
JSON or as Markdown (for a post-mortem, or to attach to a pull request).

Read in five queries whatever the session's size (``session_with_reviews`` is four, the
events one more); at most ``MAX_EVENTS`` events, the oldest first, with ``events_truncated``
saying when there were more.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from reviews.selectors import session_with_reviews
from workflows.models import Event, WorkflowSession

MAX_EVENTS = 10_000
HISTORY_FORMAT = "deepwork-session-history/1"


def _when(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def session_history(*, session_id: str) -> dict[str, Any]:
    """The history document of one session (``NotFound`` if there is none)."""
    session = session_with_reviews(session_id=session_id)
    events = list(
        Event.objects.filter(session=session)
        .order_by("id")
        .values("id", "kind", "payload", "created_at")[: MAX_EVENTS + 1]
    )
    children = list(
        WorkflowSession.objects.filter(parent=session)
        .order_by("id")
        .values_list("session_id", flat=True)
    )
    runs = []
    for run in session.runs.all():
        runs.append(
            {
                "step_id": run.step_id,
                "entry_index": run.entry_index,
                "status": run.status,
                "started_at": _when(run.started_at),
                "completed_at": _when(run.completed_at),
                "outputs": run.outputs,
                "notes": run.notes,
                "reviews": [
                    {
                        "attempt": review.attempt,
                        "review": review.run_each,
                        "target_file": review.target_file,
                        "passed": review.passed,
                        "reviewer_kind": review.reviewer_kind,
                        "reviewer": review.reviewer,
                        "feedback": review.feedback,
                        "criteria_results": review.criteria_results,
                        "override_reason": review.override_reason,
                        "error": review.error,
                        "duration_ms": review.duration_ms,
                        "created_at": _when(review.created_at),
                    }
                    for review in run.reviews.all()
                ],
                "decisions": [
                    {
                        "kind": decision.kind,
                        "by": decision.decided_by_name,
                        "via": decision.via,
                        "reason": decision.reason,
                        "created_at": _when(decision.created_at),
                        "delivered_at": _when(decision.consumed_at),
                    }
                    for decision in run.decisions.all()
                ],
            }
        )
    return {
        "format": HISTORY_FORMAT,
        "session": {
            "session_id": session.session_id,
            "project": session.project.name,
            "project_root": session.project.root_path,
            "agent": session.agent.agent_id,
            "job": session.job_name,
            "workflow": session.workflow_name,
            "instance_id": session.instance_id,
            "goal": session.goal,
            "status": session.status,
            "current_step_id": session.current_step_id,
            "parent": session.parent.session_id if session.parent else None,
            "children": children,
            "abort_reason": session.abort_reason,
            "aborted_by": session.aborted_by or None,
            "started_at": _when(session.started_at),
            "completed_at": _when(session.completed_at),
        },
        "steps": runs,
        "events": [
            {
                "id": event["id"],
                "kind": event["kind"],
                "created_at": _when(event["created_at"]),
                "payload": event["payload"],
            }
            for event in events[:MAX_EVENTS]
        ],
        "events_truncated": len(events) > MAX_EVENTS,
    }


def _block(text: str) -> str:
    """Text as a fenced block long enough that no fence inside it closes it."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}text\n{text}\n{fence}"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def history_markdown(history: dict[str, Any]) -> str:
    """The history document as Markdown: headings per step, verdicts and rulings as lists,
    free text (goal, notes, feedback) in fenced blocks so it cannot break the layout."""
    s = history["session"]
    lines = [
        f"# Session {s['session_id']}: {s['job']}/{s['workflow']}",
        "",
        f"- Project: {s['project']}",
        f"- Agent: {s['agent']}",
        f"- Status: {s['status']}",
        f"- Started: {s['started_at']}",
        f"- Ended: {s['completed_at'] or '-'}",
    ]
    if s["instance_id"]:
        lines.append(f"- Instance: {s['instance_id']}")
    if s["parent"]:
        lines.append(f"- Started inside: {s['parent']}")
    if s["children"]:
        lines.append(f"- Nested sessions: {', '.join(s['children'])}")
    if s["abort_reason"]:
        who = f" by {s['aborted_by']}" if s["aborted_by"] else ""
        lines += ["", f"Aborted{who}:", "", _block(s["abort_reason"])]
    lines += ["", "## Goal", "", _block(s["goal"]), "", "## Steps"]
    for run in history["steps"]:
        lines += [
            "",
            f"### {run['step_id']} ({run['status']})",
            "",
            f"- Entry: {run['entry_index']}",
            f"- Started: {run['started_at']}",
            f"- Completed: {run['completed_at'] or '-'}",
        ]
        for name, value in sorted(run["outputs"].items()):
            paths = value if isinstance(value, list) else [value]
            lines.append(f"- Output `{name}`: {', '.join(f'`{p}`' for p in paths)}")
        if run["notes"]:
            lines += ["", "Notes:", "", _block(run["notes"])]
        for review in run["reviews"]:
            verdict = "passed" if review["passed"] else "failed"
            lines += [
                "",
                f"- Review attempt {review['attempt']} of {review['review']}: **{verdict}** "
                f"({review['reviewer_kind']}: {review['reviewer'] or '-'})",
            ]
            for item in review["criteria_results"] or []:
                if isinstance(item, dict):
                    mark = "pass" if item.get("passed") else "fail"
                    extra = f": {_cell(item['feedback'])}" if item.get("feedback") else ""
                    lines.append(f"  - {mark}: {_cell(item.get('criterion', '?'))}{extra}")
            if review["feedback"]:
                lines += ["", _block(review["feedback"])]
        for decision in run["decisions"]:
            lines += [
                "",
                f"- Ruling by {decision['by']}"
                + (f" via {decision['via']}" if decision.get("via") else "")
                + f" ({decision['kind']}) at {decision['created_at']}:",
                "",
                _block(decision["reason"]),
            ]
    lines += ["", "## Events", "", "| id | when | kind | details |", "|---|---|---|---|"]
    for event in history["events"]:
        details = json.dumps(event["payload"], sort_keys=True)
        if len(details) > 200:
            details = details[:197] + "..."
        lines.append(
            f"| {event['id']} | {event['created_at']} | {event['kind']} | {_cell(details)} |"
        )
    if history["events_truncated"]:
        lines += ["", f"Only the first {MAX_EVENTS:,} events are listed."]
    return "\n".join(lines) + "\n"
