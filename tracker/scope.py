"""Which changed files lie inside a task's declared ``areas`` (the tracker's scope check).

An area is a path prefix (``src/api`` covers ``src/api/x.py`` but not ``src/apix.py``) or a
glob (``src/**/*.py``, ``{docs,README.md}``), matched case-sensitively against paths relative
to the project root. The original matched raw substrings, so ``api`` covered ``rapid.txt``.
"""

from __future__ import annotations

import functools
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
_POSIX_CLASS = re.compile(
    r"\[:(alnum|alpha|ascii|blank|cntrl|digit|graph|lower|print|punct|space|upper|word|xdigit):\]"
)

# Braces and '|' multiply an area into several patterns (``{a,b}/{c,d}`` is four); each is
# matched against every changed file, so their number is bounded.
MAX_AREA_PATTERNS = 128


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
            _matcher(area)
        except _TooMany:
            raise InvalidInput(
                f"{field} expands to more than {MAX_AREA_PATTERNS} patterns (its braces and "
                f"'|' multiply); the limit is {MAX_AREA_PATTERNS}"
            ) from None
        except Exception as exc:  # wcmatch raises several kinds; all mean "cannot use this"
            raise InvalidInput(f"{field} is not a valid glob: {exc}") from None
        glob = _glob()
        try:
            glob.translate(area, flags=_flags(glob))
        except Exception as exc:
            raise InvalidInput(f"{field} is not a valid glob: {exc}") from None


# --- Matching a glob in time linear in the path's depth ---------------------------------------
#
# wcmatch turns a whole glob into one regular expression, and Python's backtracking engine
# tries every way of sharing a path's folders among the glob's ``**``: exponential in their
# number (``**/a/**/a/**/a/**/a/c`` against a path 80 folders deep ran for most of a minute).
# Here a glob is cut at its ``**`` segments instead. What lies between two ``**`` covers a
# fixed number of segments and is still wcmatch's own expression (so classes, escapes, dots
# and every other rule of a segment stay exactly wcmatch's); the ``**`` are matched by a
# pass over the path that keeps, after each piece, the set of positions it can end at: work
# proportional to the path's segments times the glob's pieces. Braces, '|' and a leading
# '!' are handled as wcmatch handles them (braces first, then '|', then negation).
#
# Paths are as git names them: relative, '/'-separated, with no empty, '.' or '..' segment.


class _TooMany(Exception):
    pass


_GLOBSTAR = None  # a ``**`` segment among a pattern's pieces


@dataclass(frozen=True)
class _Chunk:
    """Consecutive segments with no ``**``: ``size`` of them, matched by ``regex`` as one."""

    size: int
    regex: re.Pattern[str]


@dataclass(frozen=True)
class _Pattern:
    # None: the pattern can match no path of that kind (an empty one, or one that starts or
    # ends with '/').
    pieces: tuple[_Chunk | None, ...] | None

    def matches(self, segments: Sequence[str]) -> bool:
        if self.pieces is None:
            return False
        count = len(segments)
        # ends[k]: the pieces so far can cover exactly the first k segments.
        ends = [True] + [False] * count
        last = len(self.pieces) - 1
        for index, piece in enumerate(self.pieces):
            if piece is _GLOBSTAR:
                # A trailing ``**`` after other pieces needs a segment: ``a/**`` is not ``a``.
                at_least = 1 if index == last and index > 0 else 0
                seen = False
                new = [False] * (count + 1)
                for k in range(count + 1):
                    if k - at_least >= 0 and ends[k - at_least]:
                        seen = True
                    new[k] = seen
                ends = new
            else:
                assert isinstance(piece, _Chunk)
                new = [False] * (count + 1)
                for k in range(count - piece.size + 1):
                    if ends[k] and piece.regex.match("/".join(segments[k : k + piece.size])):
                        new[k + piece.size] = True
                ends = new
            if not any(ends):
                return False
        return ends[count]


@dataclass(frozen=True)
class _Matcher:
    include: tuple[_Pattern, ...]
    exclude: tuple[_Pattern, ...]

    def matches(self, path: str) -> bool:
        segments = path.split("/")
        return any(p.matches(segments) for p in self.include) and not any(
            p.matches(segments) for p in self.exclude
        )


def _bar_split(pattern: str) -> list[str]:
    """``pattern`` split at each '|' that is neither escaped nor inside a ``[...]`` class, as
    wcmatch splits it."""
    parts: list[str] = []
    start = 0
    i = 0
    bad = -1
    n = len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "|":
            parts.append(pattern[start : i - 1])
            start = i
        elif c == "\\":
            if i < n:
                i += 1
        elif c == "[" and (bad == -1 or i > bad):
            end, failed_at = _class_end(pattern, i)
            if end is None:
                bad = failed_at
            else:
                i = end
    parts.append(pattern[start:])
    return parts


def _class_end(pattern: str, i: int) -> tuple[int | None, int]:
    """Where the ``[...]`` class opened just before ``i`` ends (after its ']'), or None and
    where reading it failed: it reaches the end, or holds a '/' (then '[' is a plain
    character)."""
    n = len(pattern)

    def take() -> str:
        nonlocal i
        if i >= n:
            raise IndexError
        i += 1
        return pattern[i - 1]

    try:
        c = take()
        if c in ("!", "^"):
            c = take()
        if c in ("-", "]"):
            c = take()
        while c != "]":
            if c == "\\":
                if take() == "/":
                    return None, i
            elif c == "/":
                return None, i
            elif c == "[":
                found = _POSIX_CLASS.match(pattern, i - 1)
                if found:
                    i = found.end()
            c = take()
    except IndexError:
        return None, i
    return i, i


def _pieces(pattern: str) -> list[str] | None:
    """``pattern``'s segments: split at every '/', escaped or not (wcmatch reads both as the
    separator), with the escape of an escaped one dropped. None when it asks for an empty
    segment, which no path has: wcmatch folds '//' into one separator, but an escaped '/'
    right after a separator is a second one."""
    segments: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            if pattern[i + 1] == "/":
                if not current:
                    return None
                segments.append("".join(current))
                current = []
            else:
                current.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "/":
            segments.append("".join(current))
            current = []
        else:
            current.append(c)
        i += 1
    segments.append("".join(current))
    return segments


def _compile_pattern(pattern: str, glob: Any) -> _Pattern:
    segments = _pieces(pattern)
    if segments is None or pattern == "" or segments[0] == "" or segments[-1] == "":
        return _Pattern(None)
    pieces: list[_Chunk | None] = []
    run: list[str] = []

    def close_run() -> None:
        if run:
            [regex] = glob.translate("/".join(run), flags=int(glob.GLOBSTAR | glob.DOTGLOB))[0]
            pieces.append(_Chunk(len(run), re.compile(regex)))
            run.clear()

    for segment in segments:
        if segment == "":  # 'a//b' is 'a/b'
            continue
        if segment == "**":
            close_run()
            if not pieces or pieces[-1] is not _GLOBSTAR:  # '**/**' is '**'
                pieces.append(_GLOBSTAR)
        else:
            run.append(segment)
    close_run()
    return _Pattern(tuple(pieces))


@functools.lru_cache(maxsize=512)
def _matcher(area: str) -> _Matcher:
    """The compiled form of a glob ``area`` (raises ``_TooMany`` past the limit)."""
    import bracex

    glob = _glob()
    include: list[_Pattern] = []
    exclude: list[_Pattern] = []
    seen: set[str] = set()
    try:
        expanded = list(
            bracex.iexpand(area, keep_escapes=True, limit=MAX_AREA_PATTERNS, return_empty=True)
        )
    except bracex.ExpansionLimitException:
        raise _TooMany from None
    total = 0
    for braced in expanded:
        for pattern in _bar_split(braced):
            total += 1
            if total > MAX_AREA_PATTERNS:
                raise _TooMany
            if pattern in seen:
                continue
            seen.add(pattern)
            if pattern.startswith("!"):
                exclude.append(_compile_pattern(pattern[1:], glob))
            else:
                include.append(_compile_pattern(pattern, glob))
    return _Matcher(tuple(include), tuple(exclude))


def _covers(area: str, path: str) -> bool:
    if _is_glob(area):
        return _matcher(area).matches(path)
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
                _matcher(area)
        except _TooMany:
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
