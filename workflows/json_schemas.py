"""The one place the product turns a JSON Schema into a validator.

Every schema the server checks data against passes through here: its own fixed schemas (job
formats, DeepSchemas, ``.deepreview``) and the ones a project, a session or a workflow source
hands it (``step_arguments[].json_schema``, a published workflow's ``inputSchema``). A schema
is accepted only when it is a valid schema of its dialect and every ``$ref`` in it points to a
place inside that same schema; nothing outside it is ever fetched, read or looked up (the
jsonschema library would otherwise download ``http(s)`` refs with no timeout). A ``$ref`` that
loops back to where it started without descending into the data (``{"$ref": "#"}``, or two
definitions naming each other through ``allOf``) would recurse until the stack runs out, so it
is refused too. Callers check a schema where they accept it (``check``) and turn
``SchemaProblem`` into their own load error or refusal; ``validator`` checks again, so a schema
stored before these rules is refused at use instead of fetched.

jsonschema and referencing are imported on first use: the stdio server starts without them.
"""

from __future__ import annotations

import itertools
import reprlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator
    from referencing.exceptions import Unresolvable

# "draft7": DeepWork's job formats, DeepSchemas and .deepreview, as DeepWork checks them.
# "declared": the dialect a schema names in ``$schema``, else 2020-12 (MCP tool schemas).
Dialect = Literal["draft7", "declared"]

# Keywords whose subschemas apply to the same value, not to a part of it: a $ref cycle that
# runs only through these never reaches the end of the data.
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAP = ("dependentSchemas", "dependencies")
_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
# (keyword, its value) of a ref inside a schema.
_Ref = tuple[str, str]

ONLY_INSIDE = (
    "only refs to a place inside the same schema (such as '#/definitions/name') are "
    "allowed; nothing outside the schema is fetched or read"
)


class SchemaProblem(ValueError):
    """A schema that cannot be used. ``message`` says why, ``path`` is where in the schema.

    ``kind`` is "invalid" (breaks its dialect's meta-schema), "ref" (a ``$ref`` that leaves
    the schema, points nowhere or loops) or "depth" (nested beyond what can be checked).
    """

    def __init__(self, message: str, *, path: Sequence[Any] = (), kind: str = "ref") -> None:
        super().__init__(message)
        self.message = message
        self.path = tuple(path)
        self.kind = kind


def _validator_class(schema: Any, dialect: Dialect) -> Any:
    from jsonschema import Draft7Validator, Draft202012Validator
    from jsonschema.validators import validator_for

    if dialect == "draft7":
        return Draft7Validator
    return validator_for(schema, default=Draft202012Validator)


def check(schema: Any, *, dialect: Dialect = "draft7") -> None:
    """Raise ``SchemaProblem`` unless ``schema`` is valid and self-contained (see above)."""
    _checked_class(schema, dialect)


def _checked_class(schema: Any, dialect: Dialect) -> Any:
    from jsonschema.exceptions import SchemaError

    cls = _validator_class(schema, dialect)
    try:
        cls.check_schema(schema)
        _check_refs(schema, cls)
    except SchemaError as exc:
        raise SchemaProblem(exc.message, path=exc.path, kind="invalid") from None
    except RecursionError:
        raise SchemaProblem("the schema nests too deeply", kind="depth") from None
    return cls


def validator(schema: Any, *, dialect: Dialect = "draft7") -> Validator:
    """A validator of ``schema``, checked as ``check`` does; it resolves no ``$ref`` outside
    the schema. Fixed schemas are worth caching by the caller (``functools.cache``)."""
    from referencing import Registry

    cls = _checked_class(schema, dialect)
    # An empty registry (jsonschema adds only its bundled meta-schemas) and no retrieve
    # function: even a ref that slipped past the check cannot reach the network or disk.
    validator: Validator = cls(schema, registry=Registry())
    return validator


MAX_ERRORS_WEIGHED = 1000


def best_error(validator: Validator, instance: Any) -> ValidationError | None:
    """The most relevant error of ``instance`` (jsonschema's ``best_match``), or None.

    Data nested deeper than Python's stack, or a ref that cannot be followed, is reported as
    an error of the data rather than escaping as RecursionError. Only the first
    ``MAX_ERRORS_WEIGHED`` errors are weighed: a list of 100,000 wrong items would otherwise
    build (and quote) 100,000 errors to show one."""
    from jsonschema.exceptions import best_match
    from referencing.exceptions import Unresolvable

    try:
        return best_match(itertools.islice(validator.iter_errors(instance), MAX_ERRORS_WEIGHED))
    except RecursionError:
        return _too_deep()
    except Unresolvable as exc:
        return _unresolvable(exc)


def all_errors(validator: Validator, instance: Any) -> list[ValidationError]:
    """Every error of ``instance``, guarded as ``best_error`` is."""
    from referencing.exceptions import Unresolvable

    try:
        return list(validator.iter_errors(instance))
    except RecursionError:
        return [_too_deep()]
    except Unresolvable as exc:
        return [_unresolvable(exc)]


# How much of a failing value an error shown to a client quotes.
EXCERPT_CHARS = 200

_EXCERPT = reprlib.Repr()
_EXCERPT.maxlevel = 3
_EXCERPT.maxdict = _EXCERPT.maxlist = _EXCERPT.maxtuple = _EXCERPT.maxset = 8
_EXCERPT.maxstring = _EXCERPT.maxother = 80


def excerpt(value: Any) -> str:
    """The start of ``value``'s repr, at most ``EXCERPT_CHARS``, built without ever writing
    the whole value out (it may be megabytes)."""
    shown = _EXCERPT.repr(value)
    return shown if len(shown) <= EXCERPT_CHARS else f"{shown[: EXCERPT_CHARS - 3]}..."


def error_brief(error: ValidationError) -> str:
    """What failed, which keyword and where: ``<what> (keyword '<k>' at <JSON path>)``.

    jsonschema's message quotes the whole failing value (``<value> is not of type ...``); it
    is kept only when short, else the value is shown as an excerpt. Nothing else of the
    checked data is quoted, so an error never carries a document back to whoever sent it."""
    what = error.message
    if len(what) > EXCERPT_CHARS:
        what = f"{excerpt(error.instance)} does not satisfy '{error.validator}'"
    return f"{what} (keyword '{error.validator}' at {error.json_path})"


def _too_deep() -> ValidationError:
    from jsonschema.exceptions import ValidationError

    return ValidationError("the value nests too deeply to be checked", validator="depth")


def _unresolvable(exc: Unresolvable) -> ValidationError:
    from jsonschema.exceptions import ValidationError

    return ValidationError(f"$ref '{exc.ref}' cannot be followed: {ONLY_INSIDE}", validator="$ref")


# --- refs ---------------------------------------------------------------------------------


def _check_refs(schema: Any, cls: Any) -> None:
    """Follow every ``$ref`` of ``schema`` inside it alone; refuse one that leaves it, points
    nowhere, or closes a loop that never descends into the data.

    Iterative, and each subschema is visited once, so neither a deep schema nor one whose
    parts are shared (YAML aliases) costs more than its size.
    """
    import referencing.jsonschema
    from referencing import Registry, Specification
    from referencing.exceptions import NoSuchAnchor, PointerToNowhere, Unresolvable

    if not isinstance(schema, dict):
        return
    spec = referencing.jsonschema.specification_with(
        cls.ID_OF(cls.META_SCHEMA) or "urn:unknown-dialect", default=Specification.OPAQUE
    )

    def enter(contents: Any, resolver: Any) -> Any:
        # A subschema with its own $id moves the base its relative refs resolve against.
        if isinstance(contents, dict):
            return resolver.in_subresource(spec.create_resource(contents))
        return resolver

    root = Registry().resolver_with_root(spec.create_resource(schema))
    seen: dict[int, Any] = {id(schema): schema}
    # id of a subschema -> (id of a subschema checked against the same value, the ref or None)
    in_place: dict[int, list[tuple[int, _Ref | None]]] = {}
    stack: list[tuple[Any, Any]] = [(schema, enter(schema, root))]
    while stack:
        contents, resolver = stack.pop()
        if not isinstance(contents, dict):
            continue
        edges = in_place.setdefault(id(contents), [])
        children = [sub.contents for sub in spec.create_resource(contents).subresources()]
        child_ids = {id(child) for child in children}
        for keyword in _REF_KEYWORDS:
            ref = contents.get(keyword)
            if not isinstance(ref, str):
                continue
            try:
                resolved = resolver.lookup(ref)
            except (PointerToNowhere, NoSuchAnchor):
                raise _ref_problem(
                    schema,
                    contents,
                    keyword,
                    f"{keyword} '{ref}' points to nothing inside the schema",
                ) from None
            except Unresolvable:
                raise _ref_problem(
                    schema,
                    contents,
                    keyword,
                    f"{keyword} '{ref}' points outside the schema: {ONLY_INSIDE}",
                ) from None
            target = resolved.contents
            if not isinstance(target, dict | bool):
                raise _ref_problem(
                    schema, contents, keyword, f"{keyword} '{ref}' does not point to a schema"
                )
            edges.append((id(target), (keyword, ref)))
            if id(target) not in seen:
                seen[id(target)] = target
                stack.append((target, enter(target, resolved.resolver)))
        for child in _same_value_children(contents):
            if id(child) in child_ids:
                edges.append((id(child), None))
        for child in children:
            if id(child) not in seen:
                seen[id(child)] = child
                stack.append((child, enter(child, resolver)))
    loop = _find_loop(in_place)
    if loop is not None:
        where, (keyword, ref) = loop
        raise _ref_problem(
            schema,
            seen[where],
            keyword,
            f"{keyword} '{ref}' loops back to where it started without descending into the data, "
            "so checking anything against it would never end; a schema may refer to itself "
            "only below a keyword such as 'properties' or 'items'",
        )


def _same_value_children(contents: dict[str, Any]) -> Iterable[Any]:
    for keyword in _IN_PLACE_ONE:
        if keyword in contents:
            yield contents[keyword]
    for keyword in _IN_PLACE_MANY:
        if isinstance(contents.get(keyword), list):
            yield from contents[keyword]
    for keyword in _IN_PLACE_MAP:
        if isinstance(contents.get(keyword), dict):
            yield from contents[keyword].values()


def _find_loop(edges: dict[int, list[tuple[int, _Ref | None]]]) -> tuple[int, _Ref] | None:
    """A (subschema holding the $ref, the $ref) on a cycle of ``edges``, or None."""
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for start in edges:
        if start in state:
            continue
        path: list[tuple[int, _Ref | None]] = [(start, None)]
        todo: list[list[tuple[int, _Ref | None]]] = [list(edges.get(start, ()))]
        state[start] = 1
        while todo:
            if not todo[-1]:
                state[path.pop()[0]] = 2
                todo.pop()
                continue
            node, ref = todo[-1].pop()
            if state.get(node) == 1:
                # The loop runs from ``node`` along the path; name a $ref on it.
                holder = path[-1][0]
                if ref is None:
                    index = next(i for i, (n, _) in enumerate(path) if n == node)
                    step = next(
                        (
                            (path[i - 1][0], r)
                            for i in range(len(path) - 1, index, -1)
                            if (r := path[i][1]) is not None
                        ),
                        None,
                    )
                    if step is None:  # a loop of shared YAML nodes, with no ref at all
                        return holder, ("$ref", "(none)")
                    holder, ref = step
                return holder, ref
            if node in state:
                continue
            state[node] = 1
            path.append((node, ref))
            todo.append(list(edges.get(node, ())))
    return None


def _location(schema: Any, target: Any) -> list[Any]:
    """The keys from ``schema`` down to the object ``target`` (the first way found)."""
    stack: list[tuple[Any, list[Any]]] = [(schema, [])]
    seen: set[int] = set()
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            stack.extend((value, [*path, key]) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((value, [*path, index]) for index, value in enumerate(node))
    return []


def _ref_problem(schema: Any, holder: Any, keyword: str, message: str) -> SchemaProblem:
    return SchemaProblem(message, path=[*_location(schema, holder), keyword])
