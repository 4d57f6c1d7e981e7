"""Review rules that DeepWork 0.14 derives from DeepSchemas (digest §3.10, §5.3).

A named schema (``.deepwork/schemas/<name>/deepschema.yml``) that has both ``requirements``
and ``matchers`` becomes the rule ``<name> DeepSchema Compliance``: one review per matching
file (strategy ``individual``), matchers read relative to the project root, defined at
``<schema dir>/deepschema.yml:0``. An anonymous schema ``.deepschema.<file>.yml`` does the same
for its sibling ``<file>``. The rule's instructions say what the file is an instance of, carry
the schema's summary and instructions, its requirements with the RFC 2119 reading, and its
examples; its ``references`` and ``json_schema_path`` files are handed to the reviewer as
reference files.

A schema that cannot be used is reported as a parse failure of kind ``deepschema`` (shown in the
warning block of ``get_review_instructions``, not listed by ``get_configured_reviews``); a
missing reference file is reported the same way but leaves the rest of the rule in force.

Only schemas inside the project are read (0.14 also ships stock schemas with its package; this
server ships none), each file through ``workflows.files`` like ``.deepreview`` files.

Where 0.14.0 differs on purpose: an anonymous schema in a sub-folder applies to its sibling
file there (0.14.0 looks for the file name at the project root, so such a schema never matches),
and the instructions name the file rather than leaving a ``{file_path}`` placeholder in them.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from wcmatch import glob

from reviews.deepreview.config import ConfigError, ReviewRule, _read_text
from reviews.deepreview.discovery import ParseFailure, is_skipped_dir

SCHEMAS_DIR = ".deepwork/schemas"
SCHEMA_FILENAME = "deepschema.yml"
ANONYMOUS_PREFIX = ".deepschema."
ANONYMOUS_SUFFIX = ".yml"
FAILURE_KIND = "deepschema"

KEYS = frozenset(
    {
        "summary",
        "instructions",
        "matchers",
        "requirements",
        "json_schema_path",
        "verification_bash_command",
        "parent_deep_schemas",
        "examples",
        "references",
    }
)

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
    stream = io.StringIO(text)
    stream.name = str(path)
    try:
        data = yaml.safe_load(stream)
    except yaml.YAMLError as exc:
        raise SchemaError(f"invalid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SchemaError("the file must hold a mapping of DeepSchema keys")
    unknown = sorted(str(key) for key in data if key not in KEYS)
    if unknown:
        raise SchemaError(
            f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(KEYS))}"
        )
    return data


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SchemaError(f"'{key}' must be a string")
    return value.strip()


def _requirements(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    value = data.get("requirements") or {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise SchemaError("'requirements' must map requirement names to statements")
    return [(name, statement.strip()) for name, statement in value.items()]


def _string_list(data: Mapping[str, Any], key: str) -> list[str]:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise SchemaError(f"'{key}' must be a list of non-empty strings")
    return list(value)


def _entries(data: Mapping[str, Any], key: str) -> list[tuple[str, str]]:
    """``examples`` / ``references``: a list of ``{path, description?}``."""
    value = data.get(key) or []
    entries = []
    if isinstance(value, list):
        for item in value:
            if not (isinstance(item, dict) and isinstance(item.get("path"), str) and item["path"]):
                break
            description = item.get("description") or ""
            if not isinstance(description, str):
                break
            entries.append((item["path"], description.strip()))
        else:
            return entries
    raise SchemaError(f"'{key}' must be a list of {{path, description}} entries")


def _reference(base: Path, path: str, project_root: Path) -> tuple[str | None, str | None]:
    """(project-relative path, None) for a usable reference file, else (None, the problem)."""
    target = Path(os.path.normpath(base / path))
    try:
        # Through links too: the reviewer is pointed at it, and must not be led out.
        target.resolve().relative_to(project_root.resolve())
        rel = target.relative_to(project_root).as_posix()
    except (ValueError, OSError, RuntimeError):
        return None, f"references entry '{path}' is outside the project (resolved to {target})"
    if not target.is_file():
        return None, f"references entry '{path}' not found (resolved to {target})"
    return rel, None


def _instructions(
    opening: str, data: Mapping[str, Any], requirements: list[tuple[str, str]]
) -> str:
    parts = [opening]
    summary = _text(data, "summary")
    if summary:
        parts.append(summary)
    guidance = _text(data, "instructions")
    if guidance:
        parts.append(f"How to treat files of this kind:\n{guidance}")
    parts.append(REQUIREMENTS_POLICY)
    parts.append("\n".join(f"- **{name}**: {statement}" for name, statement in requirements))
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
    *,
    name: str,
    opening: str,
    include: list[str],
    schema_file: Path,
    project_root: Path,
    data: Mapping[str, Any],
    requirements: list[tuple[str, str]],
    failures: list[ParseFailure],
) -> ReviewRule:
    references: list[tuple[str, str]] = []
    wanted = _entries(data, "references")
    schema_path = _text(data, "json_schema_path")
    if schema_path:
        wanted.append((schema_path, f"JSON Schema for {name}"))
    for path, description in wanted:
        rel, problem = _reference(schema_file.parent, path, project_root)
        if rel is None:
            failures.append(_failure(schema_file, problem or path))
        else:
            references.append((rel, description))
    return ReviewRule(
        name=f"{name} DeepSchema Compliance",
        description=f"DeepSchema compliance review for {name}",
        include=tuple(include),
        exclude=(),
        strategy="individual",
        instructions=_instructions(opening, data, requirements),
        source_file=schema_file,
        # Matchers are relative to the project root, whatever folder the schema sits in.
        source_dir=project_root,
        source_line=0,
        reference_files=tuple(references),
    )


def _named(project_root: Path, failures: list[ParseFailure]) -> list[ReviewRule]:
    folder = project_root / SCHEMAS_DIR
    try:
        entries = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []
    rules = []
    for entry in entries:
        schema_file = entry / SCHEMA_FILENAME
        if not schema_file.is_file():
            continue
        try:
            data = _load(schema_file, project_root)
            requirements = _requirements(data)
            matchers = _string_list(data, "matchers")
            if not requirements or not matchers:
                continue
            rules.append(
                _rule(
                    name=entry.name,
                    opening=f"The file under review is an instance of the `{entry.name}` "
                    "DeepSchema.",
                    include=matchers,
                    schema_file=schema_file,
                    project_root=project_root,
                    data=data,
                    requirements=requirements,
                    failures=failures,
                )
            )
        except SchemaError as exc:
            failures.append(_failure(schema_file, str(exc)))
    return rules


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


def _anonymous(project_root: Path, failures: list[ParseFailure]) -> list[ReviewRule]:
    rules = []
    for schema_file in _anonymous_files(project_root):
        target = schema_file.name[len(ANONYMOUS_PREFIX) : -len(ANONYMOUS_SUFFIX)]
        target_rel = (schema_file.parent / target).relative_to(project_root).as_posix()
        try:
            data = _load(schema_file, project_root)
            requirements = _requirements(data)
            if not requirements:
                continue
            rules.append(
                _rule(
                    name=target,
                    opening=f"The file under review, `{target_rel}`, has requirements of its "
                    "own that it must meet.",
                    # Escaped: the file's own name is the pattern, brackets and all.
                    include=[glob.escape(target_rel)],
                    schema_file=schema_file,
                    project_root=project_root,
                    data=data,
                    requirements=requirements,
                    failures=failures,
                )
            )
        except SchemaError as exc:
            failures.append(_failure(schema_file, str(exc)))
    return rules


def load_deepschema_rules(project_root: Path) -> tuple[list[ReviewRule], list[ParseFailure]]:
    """Rules of the named schemas (by folder name), then of the anonymous ones (by path)."""
    failures: list[ParseFailure] = []
    rules = _named(project_root, failures) + _anonymous(project_root, failures)
    return rules, failures
