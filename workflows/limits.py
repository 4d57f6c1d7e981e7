"""The one set of input limits, applied by the services to every field a caller hands in.

The same field is refused the same way whether it arrives over MCP, REST or the dashboard,
because the services check it (interfaces may refuse earlier with their own schema, never
later). Each refusal names the field and the limit, e.g. "goal is 20,971,520 characters; the
limit is 1,000,000".

The limits are generous for real work and bounded for everything else: every stored text is
shown on pages, sent in API answers and live payloads, so a field is at most a long document
(a goal or notes of a megabyte is a book; a reason is a message).

| field                                   | max characters | line breaks/tabs |
|-----------------------------------------|---------------:|------------------|
| goal                                    |      1,000,000 | allowed          |
| notes                                   |      1,000,000 | allowed          |
| explanation (abort reason)              |         10,000 | allowed          |
| override_reason / reason / feedback     |         10,000 | allowed          |
| instance_id                             |            255 | refused          |
| job_name, workflow_name, step_id        |            255 | refused          |
| output names                            |            255 | refused          |
| output paths                            |          4,096 | refused          |
| outputs: names per hand-in              |            100 |                  |
| outputs: paths per ``files`` output     |          1,000 |                  |

Every text field refuses NUL (PostgreSQL cannot store it), the other C0 control characters
(they garble pages and terminals; tab, line feed and carriage return are allowed where line
breaks are) and lone surrogates (not Unicode text: they can be neither stored nor sent).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from workflows.errors import InvalidInput

# C0 controls except tab, line feed and carriage return; then the same with those too.
_CONTROL_MULTILINE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_CONTROL_ONE_LINE = re.compile(r"[\x00-\x1f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


@dataclass(frozen=True)
class TextLimit:
    """How long a field may be and whether it may span lines."""

    max_chars: int
    multiline: bool

    def check(self, field: str, value: str | None) -> None:
        """Raise ``InvalidInput`` naming ``field`` if ``value`` breaks the limit."""
        if value is None:
            return
        if len(value) > self.max_chars:
            raise InvalidInput(
                f"{field} is {len(value):,} characters; the limit is {self.max_chars:,}"
            )
        control = (_CONTROL_MULTILINE if self.multiline else _CONTROL_ONE_LINE).search(value)
        if control is not None:
            char, at = control.group(), control.start()
            if char == "\x00":
                raise InvalidInput(
                    f"{field} contains a NUL character (at position {at:,}); it is not allowed"
                )
            allowed = (
                "only tab, line feed and carriage return are allowed"
                if self.multiline
                else "it must be a single line without control characters"
            )
            raise InvalidInput(
                f"{field} contains the control character U+{ord(char):04X} at position "
                f"{at:,}; {allowed}"
            )
        surrogate = _SURROGATE.search(value)
        if surrogate is not None:
            raise InvalidInput(
                f"{field} contains a lone surrogate (U+{ord(surrogate.group()):04X}) at position "
                f"{surrogate.start():,}; it must be valid Unicode text"
            )


LONG_TEXT = TextLimit(max_chars=1_000_000, multiline=True)
REASON = TextLimit(max_chars=10_000, multiline=True)
NAME = TextLimit(max_chars=255, multiline=False)
PATH = TextLimit(max_chars=4_096, multiline=False)

GOAL = LONG_TEXT
NOTES = LONG_TEXT
EXPLANATION = REASON
OVERRIDE_REASON = REASON
DECISION_REASON = REASON
INSTANCE_ID = NAME
JOB_NAME = NAME
WORKFLOW_NAME = NAME
STEP_ID = NAME
OUTPUT_NAME = NAME
OUTPUT_PATH = PATH
MAX_OUTPUTS = 100
MAX_PATHS_PER_OUTPUT = 1_000


def check_outputs(outputs: Mapping[str, object]) -> None:
    """The shape and size of a hand-in's ``outputs``, before any path is looked at."""
    if len(outputs) > MAX_OUTPUTS:
        raise InvalidInput(f"outputs has {len(outputs):,} names; the limit is {MAX_OUTPUTS:,}")
    for name, value in outputs.items():
        OUTPUT_NAME.check("output name", name)
        paths = value if isinstance(value, list) else [value]
        if len(paths) > MAX_PATHS_PER_OUTPUT:
            raise InvalidInput(
                f"output '{name}' has {len(paths):,} paths; the limit is {MAX_PATHS_PER_OUTPUT:,}"
            )
        for path in paths:
            if isinstance(path, str):
                OUTPUT_PATH.check(f"output '{name}' path", path)


# --- The tracker (seed 002): the original's own limits, then ours for what it left open. ---
TRACKER_NAME = TextLimit(max_chars=200, multiline=False)  # workflow, phase, task, agent names
MILESTONE_MESSAGE = TextLimit(max_chars=500, multiline=True)
TRACKER_TEXT = LONG_TEXT  # objective, goal, summary, descriptions, decision texts
TRACKER_ITEM = REASON  # one entry of achievements, limitations, options_considered, ...
MAX_TRACKER_ITEMS = 100  # entries per list field (and areas per task)
TOTAL_PHASES_RANGE = (1, 20)
PHASE_NUMBER_RANGE = (1, 100)
PROGRESS_RANGE = (0, 100)
AREA = PATH


def check_items(field: str, values: list[str] | None, limit: TextLimit = TRACKER_ITEM) -> None:
    """A list of texts: at most ``MAX_TRACKER_ITEMS`` entries, each within ``limit``."""
    if values is None:
        return
    if len(values) > MAX_TRACKER_ITEMS:
        raise InvalidInput(
            f"{field} has {len(values):,} entries; the limit is {MAX_TRACKER_ITEMS:,}"
        )
    for index, value in enumerate(values):
        limit.check(f"{field}[{index}]", value)


def check_range(field: str, value: float | None, bounds: tuple[int, int]) -> None:
    if value is None:
        return
    low, high = bounds
    if not low <= value <= high:
        raise InvalidInput(f"{field} is {value}; it must be from {low} to {high}")
