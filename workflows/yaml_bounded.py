"""The one YAML loader of the server: every YAML it reads (job files, session jobs, files an
agent hands in, ``.deepreview`` files, DeepSchemas, tool filters) is parsed here, bounded.

YAML can say a lot in a few bytes: ``&a``/``*a`` aliases make a 400-byte file stand for
gigabytes once written out, and 2,000 nested brackets exhaust Python's stack in the composer.
Whatever reads the data afterwards (jsonschema, error messages, walks over the tree) pays for
the expanded size, so the document is refused while it is composed, before any Python object
is built: past ``Limits.depth`` levels of collections, ``Limits.nodes`` nodes or
``Limits.chars`` characters of scalars, each counted with every alias written out (an alias
costs what its anchored node cost, so a bomb is refused after a few hundred events). An alias
inside the node it names (``&a [*a]``) has no finite size and is refused.

Speed matters as much: PyYAML's pure-Python scanner reads about 100 KB a second, so a 1 MB
file would hold its caller for seconds. When libyaml is there, its parser produces the events
and only the bounded composer and the constructor run in Python; a document is refused after
at most ``Limits.nodes`` events. The pure-Python parser is still used where its wording
matters: a syntax error in a small document is reported in PyYAML's words (which clients of
the job formats see and compare), as is everything when libyaml is missing.

Errors are ``yaml.YAMLError`` (a refusal is ``LimitExceeded``, a ``ComposerError`` with the
mark of the offending node), or, as PyYAML raises them for scalars that look typed but are not
(``2001-13-45``, ``!!float x``), ``ValueError``/``TypeError``/``OverflowError``:
``LOAD_ERRORS`` holds them all. Nothing else escapes, ``RecursionError`` included.

Pure Python apart from PyYAML: job discovery parses jobs without Django configured.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.error import Mark, MarkedYAMLError
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.reader import Reader, ReaderError

# PyYAML built without libyaml has no CSafeLoader.
HAVE_LIBYAML = bool(getattr(yaml, "__with_libyaml__", False))


@dataclass(frozen=True)
class Limits:
    """How much one document may hold, aliases written out."""

    # Levels of nested collections, counted through aliases. jsonschema recurses a few frames
    # per level, so this keeps validation far from Python's recursion limit.
    depth: int = 32
    nodes: int = 100_000
    # Characters of scalar values: without aliases never more than the file's own size.
    chars: int = 1024 * 1024


# Far above any real job (the standard job is 12 KB, 8 steps, depth 7, under 1,000 nodes) and
# low enough that a refused document costs milliseconds.
DEFAULT_LIMITS = Limits()

LOAD_ERRORS: tuple[type[Exception], ...] = (yaml.YAMLError, ValueError, TypeError, OverflowError)

# A syntax error in a document up to this size is worded by the pure-Python parser (a few
# hundred milliseconds at most); a larger one keeps libyaml's words.
PURE_WORDING_CHARS = 16 * 1024

UNNAMED = "<unicode string>"


class LimitExceeded(ComposerError):
    """A document past one of its ``Limits``; str() names the limit and where it was hit."""


def _check(parser: Any, limits: Limits) -> None:
    """Read the events of ``parser``'s first document and refuse it past ``limits``, raising
    what PyYAML's composer would raise for an alias or anchor it cannot use, at the same event.

    Nothing is built: a collection's cost is known at its end event, and an anchored node's is
    kept so that each alias of it costs as much.
    """
    parser.get_event()  # stream start
    if parser.check_event(StreamEndEvent):
        return
    parser.get_event()  # document start
    # anchor -> the mark of the node it names; costs: anchor -> (nodes, chars, height).
    anchors: dict[str, Mark] = {}
    costs: dict[str, tuple[int, int, int]] = {}
    # One frame per open collection: [start mark, anchor, nodes and chars before it, height
    # of its tallest child]; the bottom frame stands for the document.
    frames: list[list[Any]] = [[None, None, 0, 0, 0]]
    nodes = chars = 0

    def charge(more_nodes: int, more_chars: int, mark: Mark) -> None:
        nonlocal nodes, chars
        nodes += more_nodes
        chars += more_chars
        if nodes > limits.nodes:
            raise LimitExceeded(
                None, None, f"more than {limits.nodes} nodes with aliases expanded", mark
            )
        if chars > limits.chars:
            raise LimitExceeded(
                None,
                None,
                f"more than {limits.chars} characters of values with aliases expanded",
                mark,
            )

    def finished(height: int, anchor: str | None, before: tuple[int, int], mark: Mark) -> None:
        # The parent sits at depth len(frames) - 1; through an alias a short path can reach
        # a deep node.
        if len(frames) - 1 + height > limits.depth:
            raise LimitExceeded(None, None, f"nesting deeper than {limits.depth} levels", mark)
        frames[-1][4] = max(frames[-1][4], height)
        if anchor is not None:
            costs[anchor] = (nodes - before[0], chars - before[1], height)

    get_event = parser.get_event
    while True:
        event = get_event()
        kind = type(event)
        if kind is AliasEvent:
            anchor = event.anchor
            if anchor not in anchors:
                raise ComposerError(
                    None, None, f"found undefined alias {anchor!r}", event.start_mark
                )
            if anchor not in costs:
                raise LimitExceeded(
                    None,
                    None,
                    f"found alias {anchor!r} inside the node it names",
                    event.start_mark,
                )
            alias_nodes, alias_chars, height = costs[anchor]
            charge(alias_nodes, alias_chars, event.start_mark)
            finished(height, None, (nodes, chars), event.start_mark)
        elif kind is ScalarEvent or kind is SequenceStartEvent or kind is MappingStartEvent:
            mark = event.start_mark
            if len(frames) > limits.depth:
                raise LimitExceeded(None, None, f"nesting deeper than {limits.depth} levels", mark)
            before = (nodes, chars)
            nodes += 1
            if nodes > limits.nodes:
                charge(0, 0, mark)
            anchor = event.anchor
            if anchor is not None:
                if anchor in anchors:
                    raise ComposerError(
                        f"found duplicate anchor {anchor!r}; first occurrence",
                        anchors[anchor],
                        "second occurrence",
                        mark,
                    )
                anchors[anchor] = mark
            if kind is ScalarEvent:
                chars += len(event.value)
                if chars > limits.chars:
                    charge(0, 0, mark)
                if anchor is not None:
                    finished(1, anchor, before, mark)
                elif frames[-1][4] == 0:
                    frames[-1][4] = 1
            else:
                frames.append([mark, anchor, before[0], before[1], 0])
        elif kind is SequenceEndEvent or kind is MappingEndEvent:
            mark, anchor, nodes_before, chars_before, tallest = frames.pop()
            finished(1 + tallest, anchor, (nodes_before, chars_before), mark)
        else:  # document end: the one root node is complete
            return


def _load_with(loader_class: Any, text: str, name: str | None, limits: Limits) -> Any:
    # Checked on one parser, built from a fresh one: the check reads events without keeping
    # them, and the document it passed is small enough to parse twice.
    checker = loader_class(_stream(text, name))
    try:
        _check(checker, limits)
    finally:
        checker.dispose()
    loader = loader_class(_stream(text, name))
    try:
        return loader.get_single_data()
    except RecursionError:
        # The depth limit comes first; this is only a backstop for a lower stack.
        raise LimitExceeded(None, None, "the document is nested too deeply", None) from None
    finally:
        loader.dispose()


def _stream(text: str, name: str | None) -> io.StringIO | str:
    # PyYAML names the stream in its marks ('in "<name>", line N'); a named stream keeps the
    # file's path there. Text given as a string is called "<unicode string>", and its marks
    # quote the offending line.
    if name is None:
        return text
    stream = io.StringIO(text)
    stream.name = name
    return stream


_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


def _remarked(exc: MarkedYAMLError, text: str) -> MarkedYAMLError:
    """``exc`` with marks that quote the offending line, as the pure-Python reader's do for an
    unnamed text (libyaml's marks carry no text)."""
    buffer = text + "\0"
    for attribute in ("context_mark", "problem_mark"):
        mark = getattr(exc, attribute)
        if mark is not None and 0 <= mark.index < len(buffer):
            setattr(
                exc,
                attribute,
                Mark(mark.name, mark.index, mark.line, mark.column, buffer, mark.index),
            )
    return exc


def load(text: str, *, name: str | None = None, limits: Limits = DEFAULT_LIMITS) -> Any:
    """The data of the YAML document ``text``, bounded by ``limits``.

    ``name`` is what error marks call the document (a file's path); None for text that was
    sent, whose marks then say "<unicode string>" and quote the line. Raises one of
    ``LOAD_ERRORS``.
    """
    if not HAVE_LIBYAML:
        return _load_with(yaml.SafeLoader, text, name, limits)
    # The pure-Python reader refuses some characters that libyaml would take (and libyaml
    # cannot take lone surrogates at all); refused here in the reader's own words.
    bad = Reader.NON_PRINTABLE.search(text)
    if bad is not None:
        raise ReaderError(
            name or UNNAMED,
            bad.start(),
            ord(bad.group()),
            "unicode",
            "special characters are not allowed",
        )
    try:
        return _load_with(yaml.CSafeLoader, text, name, limits)
    except (yaml.scanner.ScannerError, yaml.parser.ParserError) as exc:
        if exc.problem == "exceeded maximum nesting depth":
            # libyaml's own cap (1,000 levels), met while looking ahead, before any event:
            # far past ours.
            raise LimitExceeded(
                None, None, f"nesting deeper than {limits.depth} levels", exc.context_mark
            ) from None
        if len(text) <= PURE_WORDING_CHARS:
            return _load_with(yaml.SafeLoader, text, name, limits)
        if name is not None:
            raise
        raise _remarked(exc, text) from None
    except MarkedYAMLError as exc:
        if name is not None:
            raise
        raise _remarked(exc, text) from None
