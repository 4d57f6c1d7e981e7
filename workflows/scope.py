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

from workflows import limits
from workflows.errors import InvalidInput


def _glob() -> Any:
    # Imported on first use: mcpserve loads this module at start and answers tools/list
    # without it.
    from wcmatch import glob

    return glob


def _flags(glob: Any) -> int:
    return int(glob.GLOBSTAR | glob.BRACE | glob.DOTGLOB | glob.NEGATE | glob.SPLIT)


_GLOB_CHARS = re.compile(r"[*?\[\]{}!]")
_CLASS = re.compile(r"\[!?\]?[^\]]*\]")
_RANGE = re.compile(r"(.)-(.)")


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
        glob = _glob()
        try:
            glob.translate(area, flags=_flags(glob))
        except Exception as exc:  # wcmatch raises several kinds; all mean "cannot use this"
            raise InvalidInput(f"{field} is not a valid glob: {exc}") from None


def _covers(area: str, path: str) -> bool:
    if _is_glob(area):
        glob = _glob()
        return bool(glob.globmatch(path, area, flags=_flags(glob)))
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
    """The seed's ``verification``: which ``paths`` lie outside every area (none declared: all
    in scope)."""
    if not areas:
        return Verification(scope_match=True, unexpected_files=[], warnings=[])
    unexpected = sorted(p for p in set(paths) if not any(_covers(a, p) for a in areas))
    warnings = []
    if unexpected:
        shown = ", ".join(unexpected[:10]) + (", …" if len(unexpected) > 10 else "")
        warnings.append(
            f"{len(unexpected)} file(s) {OUTSIDE_AREAS} "
            f"({', '.join(areas)}): {shown}"
        )
    return Verification(scope_match=not unexpected, unexpected_files=unexpected, warnings=warnings)
