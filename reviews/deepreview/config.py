"""Parse and validate one ``.deepreview`` file into ``ReviewRule``s (digest §5.1).

Every ``ConfigError`` text reaches agents (parse warnings, ``PARSE_ERROR`` pseudo-rules), so the
wording follows 0.9.1.
"""

from __future__ import annotations

import functools
import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft7Validator
from jsonschema.exceptions import best_match

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "deepreview_schema.json"

STRATEGIES = ("individual", "matches_together", "all_changed_files")

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


@functools.cache
def _validator() -> Draft7Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft7Validator.check_schema(schema)
    return Draft7Validator(schema)


def parse_deepreview_file(path: Path) -> list[ReviewRule]:
    """Parse one ``.deepreview`` file; any problem with it raises ``ConfigError``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"File not found: {path}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Failed to parse {path}: {exc}") from exc
    return parse_deepreview_text(text, path)


def parse_deepreview_text(text: str, path: Path) -> list[ReviewRule]:
    """Parse ``text`` as if read from ``path`` (which anchors instruction files and messages)."""
    data = _load_yaml(text, path)
    if data is None:
        return []
    _validate(data, path)
    lines = _rule_lines(text)
    source_dir = path.parent
    return [
        _build_rule(name, body, path, source_dir, lines.get(name, 1)) for name, body in data.items()
    ]


def _load_yaml(text: str, path: Path) -> Any:
    # A named stream makes PyYAML's error marks say 'in "<path>"' rather than "<unicode string>".
    stream = io.StringIO(text)
    stream.name = str(path)
    try:
        return yaml.safe_load(stream)
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"Failed to parse {path}: Failed to parse YAML file {path}: {exc}"
        ) from exc


def _validate(data: Any, path: Path) -> None:
    # jsonschema matches patternProperties with re.search on the key, which raises TypeError on
    # the int/bool/None keys YAML can produce; report those in the same shape as schema errors.
    bad_key = _first_non_string_key(data, [])
    if bad_key is not None:
        loc, key = bad_key
        raise ConfigError(
            f"Schema validation failed for {path}: Validation error at {loc}: "
            f"{key!r} is not a valid key (keys must be strings)"
        )
    error = best_match(_validator().iter_errors(data))
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
    name: str, body: Mapping[str, Any], path: Path, source_dir: Path, line: int
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
        instructions=_instructions_text(review["instructions"], source_dir),
        source_file=path,
        source_dir=source_dir,
        source_line=line,
        agent=dict(agent) if agent else None,
        all_changed_filenames=bool(context.get("all_changed_filenames", False)),
        unchanged_matching_files=bool(context.get("unchanged_matching_files", False)),
    )


def _instructions_text(spec: str | Mapping[str, str], source_dir: Path) -> str:
    if isinstance(spec, str):
        return spec
    # Read now rather than when a review runs, so a dangling reference shows up as a parse error
    # for the whole file instead of a half-written review.
    file_path = source_dir / spec["file"]
    if not file_path.exists():
        raise ConfigError(f"Instructions file not found: {file_path}")
    try:
        return file_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Failed to read instructions file {file_path}: {exc}") from exc
