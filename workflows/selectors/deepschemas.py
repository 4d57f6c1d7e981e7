"""DeepWork 0.14's named DeepSchemas, as ``get_named_schemas`` lists them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


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
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            if not isinstance(data, dict):
                raise ValueError("not a mapping")
            found.append(
                {
                    "name": entry.name,
                    "summary": str(data.get("summary", "")),
                    "matchers": [str(m) for m in data.get("matchers", []) or []],
                }
            )
        except (OSError, ValueError, yaml.YAMLError):
            found.append(
                {"name": entry.name, "summary": f"(failed to parse {path})", "matchers": []}
            )
    return found
