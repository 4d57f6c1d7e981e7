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
| agent_id, role                          |            128 | refused          |
| API token name (also no ``<`` or ``>``) |            100 | refused          |
| DAG step description, error_message     |         20,000 | allowed          |
| DAG: steps / ``depends_on`` entries     | 1,000 / 10,000 |                  |
| DAG: tool_arguments, result (JSON)      |   65,536 bytes |                  |
| DAG: a whole definition (JSON)          | 1,048,576 bytes|                  |

Every text field refuses NUL (PostgreSQL cannot store it), the other C0 control characters
(they garble pages and terminals; tab, line feed and carriage return are allowed where line
breaks are) and lone surrogates (not Unicode text: they can be neither stored nor sent).

Names and other single-line texts also refuse every invisible formatting character (Unicode
category Cf: direction overrides and marks, zero-width spaces, the byte-order mark...) and the
C1 controls: a name is what people and agents tell things apart by, and an invisible character
makes two names that look the same differ, or makes a name read backwards ("gnp.exe" shown for
"exe.png"). The zero-width joiners are the one exception, between two non-ASCII characters,
where Persian, Indic scripts and emoji need them. Multiline texts (goals, notes, descriptions)
refuse only the bidirectional embeddings, overrides and isolates (U+202A-U+202E,
U+2066-U+2069): they reorder what a reader sees against what an agent reads (the
"Trojan Source" trick), while the marks (U+200E, U+200F, U+061C), zero-width spaces and soft
hyphens are ordinary in right-to-left and pasted prose and reorder nothing.

A token's name is shown wherever the token acts (its agent id, who decided what and through
which credential), so it is plain text: it also refuses the markup characters ``<`` and ``>``.

JSON payloads (a DAG step's ``tool_arguments`` and ``result``, a whole DAG definition) are
measured in bytes of their compact UTF-8 JSON, the size they take on the wire.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workflows.errors import InvalidInput

# C0 controls except tab, line feed and carriage return; then the same with those too.
_CONTROL_MULTILINE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_CONTROL_ONE_LINE = re.compile(r"[\x00-\x1f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Bidirectional embeddings, overrides and isolates: refused in every text.
_BIDI_CONTROL = re.compile(r"[\u202a-\u202e\u2066-\u2069]")
_JOINERS = frozenset("\u200c\u200d")
_MARKUP = re.compile(r"[<>]")


def _code_point(char: str) -> str:
    """``U+202E (RIGHT-TO-LEFT OVERRIDE)``; the C1 controls have no name to add."""
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" ({name})" if name else "")


def _invisible(value: str) -> tuple[int, str] | None:
    """The first invisible (Cf) or C1 control character of a single-line text, with its place;
    a zero-width joiner between two non-ASCII characters is text, not a trick."""
    if value.isascii():
        return None
    last = len(value) - 1
    for at, char in enumerate(value):
        if char < "\x80" or unicodedata.category(char) not in ("Cf", "Cc"):
            continue
        if (
            char in _JOINERS
            and 0 < at < last
            and value[at - 1] >= "\x80"
            and value[at + 1] >= "\x80"
            and unicodedata.category(value[at - 1]) not in ("Cf", "Cc")
            and unicodedata.category(value[at + 1]) not in ("Cf", "Cc")
        ):
            continue
        return at, char
    return None


@dataclass(frozen=True)
class TextLimit:
    """How long a field may be and whether it may span lines."""

    max_chars: int
    multiline: bool
    # Also refuse the markup characters ``<`` and ``>``.
    plain: bool = False

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
        if self.multiline:
            bidi = _BIDI_CONTROL.search(value)
            if bidi is not None:
                char = bidi.group()
                raise InvalidInput(
                    f"{field} contains the direction-changing character {_code_point(char)} "
                    f"at position {bidi.start():,}; it makes text read "
                    "differently from how it is stored, so bidirectional embeddings, overrides "
                    "and isolates are not allowed"
                )
            return
        found = _invisible(value)
        if found is not None:
            at, char = found
            kind = "control" if unicodedata.category(char) == "Cc" else "invisible"
            raise InvalidInput(
                f"{field} contains the {kind} character {_code_point(char)} at position "
                f"{at:,}; names and single-line texts must not hold invisible or "
                "direction-changing characters"
            )
        markup = _MARKUP.search(value) if self.plain else None
        if markup is not None:
            raise InvalidInput(
                f"{field} contains {markup.group()!r} at position {markup.start():,}; it must "
                "be plain text, without the markup characters < and >"
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
AGENT_ID = TextLimit(max_chars=128, multiline=False)
ROLE = TextLimit(max_chars=128, multiline=False)
TOKEN_NAME = TextLimit(max_chars=100, multiline=False, plain=True)
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


# --- The tracker: the original's own limits, then ours for what it left open. ---
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


# --- Multi-agent DAG workflows: sizes that keep one definition, report or read a bounded piece
# of work. A plan an agent writes in one tool call is tens of steps, a big generated one a few
# hundred (the scheduler is benchmarked at 500); an edge list longer than ten per step is a
# generated mesh, not a plan. Payloads are what one agent hands another in a message: files
# and data sets belong in the project, named by path.
DAG_MAX_STEPS = 1_000
DAG_MAX_EDGES = 10_000  # all ``depends_on`` entries of one definition
DAG_MAX_PAYLOAD_BYTES = 64 * 1024  # one step's tool_arguments, one step's result
DAG_MAX_DEFINITION_BYTES = 1024 * 1024  # name, description and every step together
DAG_NAME = NAME  # workflow names, step ids, tool names
DAG_TEXT = TextLimit(max_chars=20_000, multiline=True)  # descriptions, error messages
# Reads: a payload is shown inline in a workflow's overview up to this many characters of
# JSON; bigger ones are left out with a note naming the per-step read, which pages.
DAG_INLINE_CHARS = 4_096
# The dependency results handed with one assignment, together (each whole or left out).
DAG_INLINE_BUDGET_CHARS = 256 * 1024
DAG_PAGE_CHARS = DAG_MAX_PAYLOAD_BYTES  # a result stored within its limit is one page


def json_size(field: str, value: Any) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON, or ``InvalidInput`` if it is not JSON."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{field} must be a JSON value: {exc}") from None
    except RecursionError:
        raise InvalidInput(f"{field} is nested too deeply") from None
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def check_json_size(field: str, value: Any, limit: int) -> None:
    """Refuse ``value`` if its JSON is more than ``limit`` bytes, naming both sizes."""
    size = json_size(field, value)
    if size > limit:
        raise InvalidInput(f"{field} is {size:,} bytes of JSON; the limit is {limit:,}")
