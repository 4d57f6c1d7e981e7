"""Find every ``.deepreview`` file under a project and load its rules."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from reviews.deepreview.config import ConfigError, ReviewRule, parse_deepreview_file

logger = logging.getLogger(__name__)

DEEPREVIEW_FILENAME = ".deepreview"

SKIPPED_DIRS = frozenset(
    {
        ".git",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".eggs",
    }
)


def is_skipped_dir(name: str) -> bool:
    return name in SKIPPED_DIRS or name.endswith(".egg-info")


@dataclass(frozen=True)
class ParseFailure:
    """A ``.deepreview`` file that could not be loaded; ``path`` is absolute."""

    path: Path
    error: str
    # "deepreview" for a rules file; "deepschema" for a DeepSchema (0.14), whose failures are
    # warnings only and never listed as PARSE_ERROR rules.
    kind: str = "deepreview"


def find_deepreview_files(project_root: Path) -> list[Path]:
    """Every ``.deepreview`` under ``project_root``: deepest first, then by full path."""
    found: list[Path] = []
    # Symlinked directories are not followed (0.9.1 followed them by accident, its spec says
    # not to): git reports a symlink as one path, never the files behind it, so rules in there
    # could never match, and following links risks loops and leaving the project.
    # os.walk ignores directories it cannot list, which is the wanted PermissionError behaviour.
    for dirpath, dirnames, filenames in os.walk(project_root):
        dirnames[:] = [d for d in dirnames if not is_skipped_dir(d)]
        if DEEPREVIEW_FILENAME in filenames:
            candidate = Path(dirpath) / DEEPREVIEW_FILENAME
            if candidate.is_file():
                found.append(candidate)

    def order(path: Path) -> tuple[int, str]:
        return (-len(path.relative_to(project_root).parts), str(path))

    return sorted(found, key=order)


def load_all_rules(
    project_root: Path, *, extended_keys: bool = False
) -> tuple[list[ReviewRule], list[ParseFailure]]:
    """Rules from every file in discovery order; broken files are reported, never raised."""
    rules: list[ReviewRule] = []
    failures: list[ParseFailure] = []
    for path in find_deepreview_files(project_root):
        try:
            rules.extend(
                parse_deepreview_file(path, project_root=project_root, extended_keys=extended_keys)
            )
        except ConfigError as exc:
            failures.append(ParseFailure(path, str(exc)))
        except Exception as exc:
            # One odd file (say, YAML that trips a library bug) must not hide every other rule.
            logger.exception("Unexpected error parsing %s", path)
            failures.append(ParseFailure(path, f"Failed to parse {path}: {exc}"))
    return rules, failures
