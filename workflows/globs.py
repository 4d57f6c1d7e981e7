"""Glob matching in time linear in a path's depth: the one matcher for every glob the server
matches against paths (tracker areas, ``.deepreview`` include/exclude, DeepSchema matchers).

wcmatch turns a whole glob into one regular expression, and Python's backtracking engine
tries every way of sharing a path's folders among the glob's ``**``: exponential in their
number (``**/a/**/a/**/a/**/a/c`` against a path 60 folders deep ran for half a minute, holding
the GIL). Here a glob is cut at its ``**`` segments instead. What lies between two ``**``
covers a fixed number of segments and is still wcmatch's own expression (so classes, escapes,
dots and every other rule of a segment stay exactly wcmatch's); the ``**`` are matched by a
pass over the path that keeps, after each piece, the set of positions it can end at: work
proportional to the path's segments times the glob's pieces.

Paths are as git names them: relative, '/'-separated, with no empty, '.' or '..' segment. A
path of more than ``MAX_PATH_SEGMENTS`` segments matches no glob; callers that take paths from
a client refuse such paths first (``path_too_deep``).

wcmatch is imported on first use: mcpserve answers tools/list without it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Braces and '|' multiply a glob into several patterns (``{a,b}/{c,d}`` is four); each is
# matched against every path, so their number is bounded.
MAX_PATTERNS = 128

# Segments a matched path may have: far beyond any real tree, and low enough that matching
# one path against one glob stays well under a millisecond.
MAX_PATH_SEGMENTS = 256

_POSIX_CLASS = re.compile(
    r"\[:(alnum|alpha|ascii|blank|cntrl|digit|graph|lower|print|punct|space|upper|word|xdigit):\]"
)


def wcmatch_glob() -> Any:
    """wcmatch's ``glob`` module, imported on first use."""
    from wcmatch import glob

    return glob


def path_too_deep(path: str) -> str | None:
    """Why ``path`` cannot be matched against globs (it has too many segments), or None."""
    segments = path.count("/") + 1
    if segments <= MAX_PATH_SEGMENTS:
        return None
    return (
        f"has {segments} path segments, more than the {MAX_PATH_SEGMENTS} a matched path may have"
    )


@functools.lru_cache(maxsize=2048)
def compiled_glob(glob_text: str) -> Pattern:
    """One glob read with wcmatch's GLOBSTAR and DOTGLOB only (no braces, '|' or '!'), as
    ``.deepreview`` files and DeepSchemas write them, compiled."""
    return _compile_pattern(glob_text, wcmatch_glob())


def glob_matches(path: str, glob_text: str) -> bool:
    """Whether ``path`` matches ``glob_text`` as ``wcmatch.glob.globmatch`` with GLOBSTAR and
    DOTGLOB answers (``**/`` spans zero or more folders, ``*`` matches a leading dot and
    never a '/'); False for a path deeper than ``MAX_PATH_SEGMENTS``."""
    segments = path.split("/")
    if len(segments) > MAX_PATH_SEGMENTS:
        return False
    return compiled_glob(glob_text).matches(segments)


class TooManyPatterns(Exception):
    """A glob whose braces and '|' expand to more than ``MAX_PATTERNS`` patterns."""


_GLOBSTAR = None  # a ``**`` segment among a pattern's pieces


@dataclass(frozen=True)
class _Chunk:
    """Consecutive segments with no ``**``: ``size`` of them, matched by ``regex`` as one."""

    size: int
    regex: re.Pattern[str]


@dataclass(frozen=True)
class Pattern:
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
class Matcher:
    include: tuple[Pattern, ...]
    exclude: tuple[Pattern, ...]

    def matches(self, path: str) -> bool:
        segments = path.split("/")
        if len(segments) > MAX_PATH_SEGMENTS:
            return False
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


def _compile_pattern(pattern: str, glob: Any) -> Pattern:
    segments = _pieces(pattern)
    if segments is None or pattern == "" or segments[0] == "" or segments[-1] == "":
        return Pattern(None)
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
    return Pattern(tuple(pieces))


@functools.lru_cache(maxsize=512)
def expanded_matcher(glob_text: str) -> Matcher:
    """``glob_text`` compiled with wcmatch's BRACE, SPLIT and NEGATE read as wcmatch reads
    them (braces first, then '|', then a leading '!'); ``TooManyPatterns`` past the limit."""
    import bracex

    glob = wcmatch_glob()
    include: list[Pattern] = []
    exclude: list[Pattern] = []
    seen: set[str] = set()
    try:
        expanded = list(
            bracex.iexpand(glob_text, keep_escapes=True, limit=MAX_PATTERNS, return_empty=True)
        )
    except bracex.ExpansionLimitException:
        raise TooManyPatterns from None
    total = 0
    for braced in expanded:
        for pattern in _bar_split(braced):
            total += 1
            if total > MAX_PATTERNS:
                raise TooManyPatterns
            if pattern in seen:
                continue
            seen.add(pattern)
            if pattern.startswith("!"):
                exclude.append(_compile_pattern(pattern[1:], glob))
            else:
                include.append(_compile_pattern(pattern, glob))
    return Matcher(tuple(include), tuple(exclude))
