"""Review rules that DeepWork 0.14 derives from DeepSchemas.

A named schema (``.deepwork/schemas/<name>/deepschema.yml``) that has both ``requirements``
and ``matchers`` becomes the rule ``<name> DeepSchema Compliance``: one review per matching
file (strategy ``individual``), matchers read relative to the project root, defined at
``<schema dir>/deepschema.yml:0``. An anonymous schema ``.deepschema.<file>.yml`` does the same
for its sibling ``<file>``. The rule's instructions say what the file is an instance of, carry
the schema's summary and instructions, its requirements with the RFC 2119 reading, and its
examples; its ``references`` and ``json_schema_path`` files are handed to the reviewer as
reference files.

A schema's ``parent_deep_schemas`` (named schemas) lend it their requirements, listed before
its own, and their ``json_schema_path`` when it has none. Files are checked against a JSON
schema of the format (``reviews/deepschema_schema.json``). A schema that cannot be used is
reported as a parse failure of kind ``deepschema`` (shown in the warning block of
``get_review_instructions``, not listed by ``get_configured_reviews``); a missing reference
file is reported the same way but leaves the rest of the rule in force.

Only schemas inside the project are read (0.14 also ships stock schemas with its package; this
server ships none), each file through ``workflows.files`` like ``.deepreview`` files.

Unlike 0.14.0, on purpose: an anonymous schema in a sub-folder applies to its sibling
file there (0.14.0 looks for the file name at the project root, so such a schema never matches),
the instructions name the file rather than leaving a ``{file_path}`` placeholder in them, and
an inherited ``json_schema_path`` is found beside the schema that declares it (0.14.0 looks for
it beside the inheriting one).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wcmatch import glob

from reviews.deepreview.config import ConfigError, ReviewRule, _read_text
from reviews.deepreview.discovery import ParseFailure, is_skipped_dir
from workflows import json_schemas, yaml_bounded

SCHEMAS_DIR = ".deepwork/schemas"
SCHEMA_FILENAME = "deepschema.yml"
ANONYMOUS_PREFIX = ".deepschema."
ANONYMOUS_SUFFIX = ".yml"
FAILURE_KIND = "deepschema"

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "deepschema_schema.json"

REQUIREMENTS_POLICY = (
    "Check the file against each requirement below, read as RFC 2119 requirements. A MUST "
    "(or SHALL) that is not met fails the review; so does a SHOULD (or RECOMMENDED) that "
    "would have been easy to meet. Other unmet requirements that apply get feedback without "
    "failing the review; requirements that do not apply are ignored."
)


class SchemaError(ValueError):
    """A DeepSchema file that cannot be turned into a rule; str() is the reason."""


def _failure(path: Path, error: str) -> ParseFailure:
    return ParseFailure(Path(FAILURE_KIND), f"{path}: {error}", kind=FAILURE_KIND)


def _load(path: Path, project_root: Path) -> dict[str, Any]:
    try:
        text = _read_text(path, project_root)
    except FileNotFoundError as exc:
        raise SchemaError("file not found") from exc
    except ConfigError as exc:
        raise SchemaError(str(exc)) from None
    try:
        data = yaml_bounded.load(text, name=str(path))
    except yaml_bounded.LOAD_ERRORS as exc:
        raise SchemaError(f"invalid YAML: {exc}") from None
    if data is None:
        return {}
    error = json_schemas.best_error(_validator(), data)
    if error is not None:
        loc = " -> ".join(str(part) for part in error.path) if error.path else "root"
        raise SchemaError(
            f"Schema validation failed for {path}: Validation error at {loc}: {error.message}"
        )
    return data


@functools.cache
def _validator() -> Any:
    return json_schemas.validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def _text(data: Mapping[str, Any], key: str) -> str:
    return str(data.get(key) or "").strip()


def _entries(data: Mapping[str, Any], key: str) -> list[tuple[str, str]]:
    """``examples`` / ``references``: (path, description) pairs."""
    return [
        (item["path"], str(item.get("description") or "").strip()) for item in data.get(key) or []
    ]


@dataclass(frozen=True)
class _Schema:
    name: str
    file: Path
    data: Mapping[str, Any]


def _reference(
    base: Path, path: str, project_root: Path, what: str
) -> tuple[str | None, str | None]:
    """(project-relative path, None) for a usable file, else (None, the problem)."""
    target = Path(os.path.normpath(base / path))
    try:
        # Through links too: the reviewer is handed this file, and must not be led out.
        target.resolve().relative_to(project_root.resolve())
        rel = target.relative_to(project_root).as_posix()
    except (ValueError, OSError, RuntimeError):
        return None, f"{what} entry '{path}' is outside the project (resolved to {target})"
    if not target.is_file():
        return None, f"{what} entry '{path}' not found (resolved to {target})"
    return rel, None


def _inherited(
    schema: _Schema, named: Mapping[str, _Schema], failures: list[ParseFailure]
) -> tuple[dict[str, str], _Schema | None]:
    """Requirements from ``parent_deep_schemas`` (depth first, parents before the schema
    itself, which may restate one; a schema seen twice counts once, so a cycle ends) and the
    last ``json_schema_path`` found in that order."""
    requirements: dict[str, str] = {}
    json_holder: _Schema | None = None
    seen: set[str] = set()

    def visit(current: _Schema) -> None:
        nonlocal json_holder
        seen.add(current.name)
        for parent_name in current.data.get("parent_deep_schemas") or []:
            parent = named.get(parent_name)
            if parent is None:
                failures.append(
                    _failure(current.file, f"parent DeepSchema '{parent_name}' not found")
                )
            elif parent_name not in seen:
                visit(parent)
        for name, statement in (current.data.get("requirements") or {}).items():
            requirements[name] = statement.strip()
        if current.data.get("json_schema_path"):
            json_holder = current

    visit(schema)
    return requirements, json_holder


def _instructions(opening: str, data: Mapping[str, Any], requirements: Mapping[str, str]) -> str:
    parts = [opening]
    summary = _text(data, "summary")
    if summary:
        parts.append(summary)
    guidance = _text(data, "instructions")
    if guidance:
        parts.append(f"How to treat files of this kind:\n{guidance}")
    parts.append(REQUIREMENTS_POLICY)
    parts.append("\n".join(f"- **{name}**: {text}" for name, text in requirements.items()))
    examples = _entries(data, "examples")
    if examples:
        parts.append(
            "Examples you may read for comparison (open them only if you need them):\n"
            + "\n".join(
                f"- `{path}`" + (f" — {description}" if description else "")
                for path, description in examples
            )
        )
    return "\n\n".join(parts)


def _rule(
    schema: _Schema,
    *,
    opening: str,
    include: list[str],
    project_root: Path,
    named: Mapping[str, _Schema],
    failures: list[ParseFailure],
) -> ReviewRule | None:
    requirements, json_holder = _inherited(schema, named, failures)
    if not requirements or not include:
        return None
    # (declaring schema file, path, description, key): a problem is reported where it is.
    wanted = [
        (schema.file, path, description, "references")
        for path, description in _entries(schema.data, "references")
    ]
    if json_holder is not None:
        wanted.append(
            (
                json_holder.file,
                json_holder.data["json_schema_path"],
                f"JSON Schema for {schema.name}",
                "json_schema_path",
            )
        )
    references: list[tuple[str, str]] = []
    for declared_in, path, description, what in wanted:
        rel, problem = _reference(declared_in.parent, path, project_root, what)
        if rel is None:
            failure = _failure(declared_in, problem or path)
            # An inherited file's problem is the parent's, reported once.
            if failure not in failures:
                failures.append(failure)
        else:
            references.append((rel, description))
    return ReviewRule(
        name=f"{schema.name} DeepSchema Compliance",
        description=f"DeepSchema compliance review for {schema.name}",
        include=tuple(include),
        exclude=(),
        strategy="individual",
        instructions=_instructions(opening, schema.data, requirements),
        source_file=schema.file,
        # Matchers are relative to the project root, whatever folder the schema sits in.
        source_dir=project_root,
        source_line=0,
        reference_files=tuple(references),
    )


def _named_schemas(project_root: Path, failures: list[ParseFailure]) -> dict[str, _Schema]:
    folder = project_root / SCHEMAS_DIR
    try:
        entries = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return {}
    named: dict[str, _Schema] = {}
    for entry in entries:
        schema_file = entry / SCHEMA_FILENAME
        if not schema_file.is_file():
            continue
        try:
            named[entry.name] = _Schema(entry.name, schema_file, _load(schema_file, project_root))
        except SchemaError as exc:
            failures.append(_failure(schema_file, str(exc)))
    return named


def _anonymous_files(project_root: Path) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(project_root):
        dirnames[:] = [d for d in dirnames if not is_skipped_dir(d)]
        for name in filenames:
            if (
                name.startswith(ANONYMOUS_PREFIX)
                and name.endswith(ANONYMOUS_SUFFIX)
                and len(name) > len(ANONYMOUS_PREFIX) + len(ANONYMOUS_SUFFIX)
            ):
                found.append(Path(dirpath) / name)
    return sorted(found)


def load_deepschema_rules(project_root: Path) -> tuple[list[ReviewRule], list[ParseFailure]]:
    """Rules of the named schemas (by folder name), then of the anonymous ones (by path)."""
    failures: list[ParseFailure] = []
    named = _named_schemas(project_root, failures)
    rules = [
        _rule(
            schema,
            opening=f"The file under review is an instance of the `{name}` DeepSchema.",
            include=list(schema.data.get("matchers") or []),
            project_root=project_root,
            named=named,
            failures=failures,
        )
        for name, schema in named.items()
    ]
    for schema_file in _anonymous_files(project_root):
        target = schema_file.name[len(ANONYMOUS_PREFIX) : -len(ANONYMOUS_SUFFIX)]
        target_rel = (schema_file.parent / target).relative_to(project_root).as_posix()
        try:
            schema = _Schema(target, schema_file, _load(schema_file, project_root))
        except SchemaError as exc:
            failures.append(_failure(schema_file, str(exc)))
            continue
        rules.append(
            _rule(
                schema,
                opening=f"The file under review, `{target_rel}`, has requirements of its own "
                "that it must meet.",
                # Escaped: the file's own name is the pattern, brackets and all.
                include=[glob.escape(target_rel)],
                project_root=project_root,
                named=named,
                failures=failures,
            )
        )
    return [rule for rule in rules if rule is not None], failures
