"""Parse and validate one ``.deepreview`` file into ``ReviewRule``s.

Every ``ConfigError`` text reaches agents (parse warnings, ``PARSE_ERROR`` pseudo-rules), so the
wording follows 0.9.1.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workflows import json_schemas, yaml_bounded
from workflows.files import (
    LINK_OUT,
    FileTooLarge,
    NotRegularFile,
    OutsideProject,
    ProjectRootChanged,
    read_project_text,
)

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "deepreview_schema.json"

STRATEGIES = ("individual", "matches_together", "all_changed_files")

# A rules file and an instructions file are prose and globs; anything larger is a mistake or an
# attack, and is refused before it is read whole.
MAX_RULES_FILE_BYTES = 1024 * 1024

# A top-level key at the start of a line; the first hit for a name is its rule's line.
_TOP_LEVEL_KEY = re.compile(r"^([a-zA-Z0-9_-]+)\s*:")


class ConfigError(Exception):
    """A ``.deepreview`` file that cannot be used; str() is the client-facing text."""


@dataclass(frozen=True)
class ReviewRule:
    name: str
    description: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    strategy: str
    instructions: str
    # Path of the .deepreview file and its directory, both absolute; matching and locations
    # are computed relative to the project root by the caller.
    source_file: Path
    source_dir: Path
    source_line: int = 1
    agent: Mapping[str, str] | None = None
    all_changed_filenames: bool = False
    unchanged_matching_files: bool = False
    # (project-relative path, description) of files the reviewer should read alongside.
    reference_files: tuple[tuple[str, str], ...] = ()
    # 0.14's ``precomputed_info_for_reviewer_bash_command``, already resolved against
    # ``source_dir``; run from the project root when an instruction file is written.
    precompute_command: str | None = None

    def agent_for(self, platform: str) -> str | None:
        return self.agent.get(platform) if self.agent else None


@dataclass(frozen=True)
class ReviewTask:
    rule: ReviewRule
    files_to_review: tuple[str, ...]
    agent_name: str | None = None
    source_location: str = ""
    additional_files: tuple[str, ...] = ()
    all_changed_filenames: tuple[str, ...] = ()

    @property
    def rule_name(self) -> str:
        return self.rule.name


# The keys DeepWork 0.14 added inside ``review``; 0.14's dialect accepts them, and
# so does 0.9.1's on a server serving both generations (``tools.DIALECT_091_BOTH``), where the
# 0.14 gate reads the same file; a 0.9.1-only server keeps refusing them as the unknown keys
# they were there.
EXTENDED_REVIEW_KEYS: dict[str, Any] = {
    "reference_files": {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["path"],
            "additionalProperties": False,
            "properties": {
                "path": {"type": "string", "minLength": 1},
                "description": {"type": "string"},
            },
        },
    },
    "precomputed_info_for_reviewer_bash_command": {"type": "string", "minLength": 1},
}


@functools.cache
def _validator(extended_keys: bool = False) -> Any:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    if extended_keys:
        schema = copy.deepcopy(schema)
        schema["definitions"]["rule"]["properties"]["review"]["properties"].update(
            EXTENDED_REVIEW_KEYS
        )
    return json_schemas.validator(schema)


def _read_text(path: Path, project_root: Path) -> str:
    """``path`` read through ``workflows.files``: inside the project, regular, capped.

    Raises ``ConfigError`` with just the reason (the caller says which file it was), or
    ``FileNotFoundError``.
    """
    try:
        return read_project_text(root=project_root, relative=str(path), limit=MAX_RULES_FILE_BYTES)
    except FileNotFoundError:
        raise
    except NotRegularFile as exc:
        raise ConfigError(f"it is not a regular file (it is {exc.kind})") from None
    except FileTooLarge as exc:
        raise ConfigError(
            f"it is {exc.size} bytes, over the limit of {exc.limit} bytes for review rule files"
        ) from None
    except OutsideProject as exc:
        where = exc.reason if exc.reason == LINK_OUT else "is outside the project root"
        raise ConfigError(f"it {where}") from None
    except ProjectRootChanged as exc:
        raise ConfigError(str(exc)) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(str(exc)) from None


def parse_deepreview_file(
    path: Path, *, project_root: Path | None = None, extended_keys: bool = False
) -> list[ReviewRule]:
    """Parse one ``.deepreview`` file; any problem with it raises ``ConfigError``.

    The file and its instruction files are read only inside ``project_root`` (by default the
    file's own folder): a link out of the project is refused, never followed.
    """
    root = project_root or path.parent
    try:
        text = _read_text(path, root)
    except FileNotFoundError as exc:
        raise ConfigError(f"File not found: {path}") from exc
    except ConfigError as exc:
        raise ConfigError(f"Failed to parse {path}: {exc}") from None
    return parse_deepreview_text(text, path, project_root=root, extended_keys=extended_keys)


def parse_deepreview_text(
    text: str, path: Path, *, project_root: Path | None = None, extended_keys: bool = False
) -> list[ReviewRule]:
    """Parse ``text`` as if read from ``path`` (which anchors instruction files and messages).

    ``extended_keys`` accepts 0.14's ``reference_files`` and
    ``precomputed_info_for_reviewer_bash_command``.
    """
    data = _load_yaml(text, path)
    if data is None:
        return []
    _validate(data, path, extended_keys)
    lines = _rule_lines(text)
    source_dir = path.parent
    root = project_root or source_dir
    return [
        _build_rule(name, body, path, source_dir, lines.get(name, 1), root)
        for name, body in data.items()
    ]


def _load_yaml(text: str, path: Path) -> Any:
    # Named, so the error marks say 'in "<path>"' rather than "<unicode string>".
    try:
        return yaml_bounded.load(text, name=str(path))
    except yaml_bounded.LOAD_ERRORS as exc:
        raise ConfigError(
            f"Failed to parse {path}: Failed to parse YAML file {path}: {exc}"
        ) from exc


def _validate(data: Any, path: Path, extended_keys: bool = False) -> None:
    # jsonschema matches patternProperties with re.search on the key, which raises TypeError on
    # the int/bool/None keys YAML can produce; report those in the same shape as schema errors.
    bad_key = _first_non_string_key(data, [])
    if bad_key is not None:
        loc, key = bad_key
        raise ConfigError(
            f"Schema validation failed for {path}: Validation error at {loc}: "
            f"{key!r} is not a valid key (keys must be strings)"
        )
    error = json_schemas.best_error(_validator(extended_keys), data)
    if error is None:
        return
    loc = " -> ".join(str(part) for part in error.path) if error.path else "root"
    raise ConfigError(
        f"Schema validation failed for {path}: Validation error at {loc}: {error.message}"
    )


def _first_non_string_key(node: Any, trail: list[str]) -> tuple[str, Any] | None:
    if isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(key, str):
                return (" -> ".join(trail) or "root", key)
            found = _first_non_string_key(value, [*trail, key])
            if found is not None:
                return found
    elif isinstance(node, list):
        for index, item in enumerate(node):
            found = _first_non_string_key(item, [*trail, str(index)])
            if found is not None:
                return found
    return None


def _rule_lines(text: str) -> dict[str, int]:
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = _TOP_LEVEL_KEY.match(line)
        if match:
            lines.setdefault(match.group(1), number)
    return lines


def _build_rule(
    name: str, body: Mapping[str, Any], path: Path, source_dir: Path, line: int, root: Path
) -> ReviewRule:
    match = body["match"]
    review = body["review"]
    context = review.get("additional_context") or {}
    agent = review.get("agent")
    return ReviewRule(
        name=name,
        description=body["description"],
        include=tuple(match["include"]),
        exclude=tuple(match.get("exclude") or ()),
        strategy=review["strategy"],
        instructions=_instructions_text(review["instructions"], source_dir, root),
        source_file=path,
        source_dir=source_dir,
        source_line=line,
        agent=dict(agent) if agent else None,
        all_changed_filenames=bool(context.get("all_changed_filenames", False)),
        unchanged_matching_files=bool(context.get("unchanged_matching_files", False)),
        reference_files=tuple(
            _reference_file(name, ref, path, root) for ref in review.get("reference_files", ())
        ),
        precompute_command=_resolve_command(
            review.get("precomputed_info_for_reviewer_bash_command"), source_dir
        ),
    )


def _reference_file(rule: str, ref: Mapping[str, str], source: Path, root: Path) -> tuple[str, str]:
    """(project-relative path, description); a path that leaves the project is refused here,
    so no instruction file ever names it. A missing file or a link out of the project is
    only found when the file is inlined, and said there."""
    path = ref["path"]
    where = f"Failed to parse {source}: Rule '{rule}': reference file '{path}'"
    if posixpath.isabs(path) or os.path.isabs(path):
        raise ConfigError(
            f"{where} must be a path relative to {source.parent} (the .deepreview file's "
            "directory), not an absolute path"
        )
    try:
        base = source.parent.relative_to(root).as_posix()
    except ValueError:
        base = "."
    relative = posixpath.normpath(posixpath.join(base, path))
    if relative == ".." or relative.startswith("../"):
        raise ConfigError(f"{where} is outside the project root")
    if relative == ".":
        raise ConfigError(f"{where} names a directory, not a file")
    return relative, ref.get("description", "")


def _resolve_command(command: str | None, source_dir: Path) -> str | None:
    """A command whose first word names a file beside the ``.deepreview`` (``./ctx.sh``,
    ``scripts/ctx.sh arg``) gets that word made absolute, because it runs from the project
    root; anything else (``git log -5``) is left to the shell."""
    if command is None:
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if not words or os.path.isabs(words[0]):
        return command
    candidate = source_dir / words[0]
    if not candidate.is_file():
        return command
    first = command.lstrip()
    leading = command[: len(command) - len(first)]
    # Only a plainly written first word is swapped; a quoted one is left to the shell.
    if not first.startswith(words[0]):
        return command
    return leading + shlex.quote(str(candidate)) + first[len(words[0]) :]


def _instructions_text(spec: str | Mapping[str, str], source_dir: Path, root: Path) -> str:
    if isinstance(spec, str):
        return spec
    # Read now rather than when a review runs, so a dangling reference shows up as a parse error
    # for the whole file instead of a half-written review.
    file_path = source_dir / spec["file"]
    try:
        return _read_text(Path(os.path.normpath(file_path)), root)
    except FileNotFoundError:
        raise ConfigError(f"Instructions file not found: {file_path}") from None
    except ConfigError as exc:
        raise ConfigError(f"Failed to read instructions file {file_path}: {exc}") from None
