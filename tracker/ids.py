"""The tracker's ids on the wire: agents send row ids as strings, and an id that names no row
of the caller's project is refused in one wording, whether the tool writes or reads."""

from __future__ import annotations

from workflows.errors import NotFound


def wire_pk(wire_id: str) -> int | None:
    text = str(wire_id).strip()
    return int(text) if text.isdigit() and len(text) < 19 else None


def not_found(field_name: str, wire_id: str, what: str) -> NotFound:
    return NotFound(f"{field_name} {wire_id!r}: no {what} with this id in this project")
