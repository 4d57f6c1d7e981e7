"""DeepWork 0.14's named DeepSchemas, as ``get_named_schemas`` lists them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workflows import yaml_bounded
from workflows.files import read_project_text

# A schema file is prose and globs, as a review rules file is.
MAX_SCHEMA_FILE_BYTES = 1024 * 1024
_UNREADABLE: tuple[type[Exception], ...] = (OSError, *yaml_bounded.LOAD_ERRORS)


def named_schemas(*, project_root: Path) -> list[dict[str, Any]]:
    """The project's named DeepSchemas (``.deepwork/schemas/<name>/deepschema.yml``), sorted
    by name; one that fails to parse is listed as such."""
    found: list[dict[str, Any]] = []
    folder = project_root / ".deepwork" / "schemas"
    try:
        entries = sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return found
    for entry in entries:
        path = entry / "deepschema.yml"
        if not path.is_file():
            continue
        try:
            text = read_project_text(
                root=project_root,
                relative=path.relative_to(project_root).as_posix(),
                limit=MAX_SCHEMA_FILE_BYTES,
            )
            data = yaml_bounded.load(text, name=str(path)) or {}
            if not isinstance(data, dict):
                raise ValueError("not a mapping")
            found.append(
                {
                    "name": entry.name,
                    "summary": str(data.get("summary", "")),
                    "matchers": [str(m) for m in data.get("matchers", []) or []],
                }
            )
        except _UNREADABLE:
            found.append(
                {"name": entry.name, "summary": f"(failed to parse {path})", "matchers": []}
            )
    return found
