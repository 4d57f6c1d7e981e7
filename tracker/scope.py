"""Which changed files lie inside a task's declared ``areas`` (the tracker's scope check).

An area is a path prefix (``src/api`` covers ``src/api/x.py`` but not ``src/apix.py``) or a
glob (``src/**/*.py``, ``{docs,README.md}``), matched case-sensitively against paths relative
to the project root. The original matched raw substrings, so ``api`` covered ``rapid.txt``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from workflows import globs, limits
from workflows.errors import InvalidInput


def _flags(glob: Any) -> int:
    return int(glob.GLOBSTAR | glob.BRACE | glob.DOTGLOB | glob.NEGATE | glob.SPLIT)


_GLOB_CHARS = re.compile(r"[*?\[\]{}!]")
_CLASS = re.compile(r"\[!?\]?[^\]]*\]")
_RANGE = re.compile(r"(.)-(.)")

# Braces and '|' multiply an area into several patterns; their number is bounded.
MAX_AREA_PATTERNS = globs.MAX_PATTERNS


def _is_glob(area: str) -> bool:
    return _GLOB_CHARS.search(area) is not None


def areas_check(areas: Sequence[str]) -> None:
    """Refuse areas that cannot be matched, naming the area and the rule."""
    limits.check_items("areas", list(areas), limits.AREA)
    for index, area in enumerate(areas):
        field = f"areas[{index}] {area!r}"
        if not area.strip():
            raise InvalidInput(f"{field} is empty; give a path prefix or a glob")
        if area.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", area):
            raise InvalidInput(f"{field} is absolute; areas are relative to the project root")
        if ".." in area.replace("\\", "/").split("/"):
            raise InvalidInput(f"{field} contains '..'; areas stay inside the project root")
        if not _is_glob(area):
            continue
        if area.endswith("\\") and not area.endswith("\\\\"):
            raise InvalidInput(f"{field} is not a valid glob: it ends with a lone escape '\\'")
        for klass in _CLASS.findall(area):
            for low, high in _RANGE.findall(klass.strip("[]!")):
                if low > high:
                    raise InvalidInput(
                        f"{field} is not a valid glob: the character range '{low}-{high}' "
                        "is reversed"
                    )
        if area.count("{") != area.count("}"):
            raise InvalidInput(f"{field} is not a valid glob: its braces '{{' '}}' do not pair")
        try:
            globs.expanded_matcher(area)
        except globs.TooManyPatterns:
            raise InvalidInput(
                f"{field} expands to more than {MAX_AREA_PATTERNS} patterns (its braces and "
                f"'|' multiply); the limit is {MAX_AREA_PATTERNS}"
            ) from None
        except Exception as exc:  # wcmatch raises several kinds; all mean "cannot use this"
            raise InvalidInput(f"{field} is not a valid glob: {exc}") from None
        glob = globs.wcmatch_glob()
        try:
            glob.translate(area, flags=_flags(glob))
        except Exception as exc:
            raise InvalidInput(f"{field} is not a valid glob: {exc}") from None


def _covers(area: str, path: str) -> bool:
    if _is_glob(area):
        return globs.expanded_matcher(area).matches(path)
    prefix = area.strip("/")
    return prefix in ("", ".") or path == prefix or path.startswith(prefix + "/")


# What a task's warning about files outside its areas says (the dashboard shows those files
# in a list of their own and leaves that warning out).
OUTSIDE_AREAS = "changed outside the declared areas"


@dataclass(frozen=True)
class Verification:
    scope_match: bool
    unexpected_files: list[str]
    warnings: list[str]


def scope_verify(*, areas: Sequence[str], paths: Iterable[str]) -> Verification:
    """The tracker's ``verification``: which ``paths`` lie outside every area (none declared: all
    in scope)."""
    if not areas:
        return Verification(scope_match=True, unexpected_files=[], warnings=[])
    warnings = []
    usable = []
    for area in areas:
        try:
            if _is_glob(area):
                globs.expanded_matcher(area)
        except globs.TooManyPatterns:
            # Stored before the limit was set: matched as covering nothing, and said so.
            warnings.append(
                f"the area {area!r} expands to more than {MAX_AREA_PATTERNS} patterns; it was "
                "not matched"
            )
            continue
        usable.append(area)
    unexpected = sorted(p for p in set(paths) if not any(_covers(a, p) for a in usable))
    if unexpected:
        shown = ", ".join(unexpected[:10]) + (", …" if len(unexpected) > 10 else "")
        warnings.append(f"{len(unexpected)} file(s) {OUTSIDE_AREAS} ({', '.join(areas)}): {shown}")
    return Verification(scope_match=not unexpected, unexpected_files=unexpected, warnings=warnings)
