"""Validation of the outputs an agent hands in with ``finished_step``.

DeepWork 0.9.1's checks and messages, in its order, plus the rules it lacked: every path must
name a file inside the project root, and a required ``files`` output must list at least one.
Messages echo what the caller sent, never the server's absolute paths, except to a caller on
another machine (hosted ``/mcp``), who is told where on the server a missing file was looked for.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from workflows.errors import InvalidInput
from workflows.files import file_kind


@dataclass(frozen=True)
class DeclaredOutput:
    name: str
    type: str
    required: bool


# Whether the call being served comes from another machine than the server's (hosted /mcp).
# Such an agent works in its own checkout and cannot see the server's disk: "not found" alone
# reads as a lie about a file it just wrote, so it is told the file is missing on the server
# and where the server looked. A stdio server's agent shares the folder, and keeps DeepWork's
# own words.
_remote_caller: ContextVar[bool] = ContextVar("deepwork_outputs_remote_caller", default=False)


@contextmanager
def outputs_checked_for_remote_caller() -> Iterator[None]:
    """Within this block (and the tasks and threads it starts), a missing output is reported
    as missing on the server, with the server's project root named."""
    token = _remote_caller.set(True)
    try:
        yield
    finally:
        _remote_caller.reset(token)


def _not_found(name: str, value: str, root: Path) -> InvalidInput:
    message = f"Output '{name}': file not found at '{value}'"
    if _remote_caller.get():
        message += (
            f" on the server. The server checks outputs in its own copy of the project, whose "
            f"root on the server is '{root}', not on your machine: the file must exist under "
            "that folder on the server (write or sync it there) before the step is handed in"
        )
    return InvalidInput(message)


def check_output_path(name: str, value: str, root: Path) -> None:
    if not value.strip():
        raise InvalidInput(
            f"Output '{name}': the path is empty; give a file path relative to the project root"
        )
    if "\x00" in value:
        raise InvalidInput(f"Output '{name}': the path contains a NUL byte")
    given = Path(value)
    candidate = Path(os.path.normpath(given if given.is_absolute() else root / given))
    if not candidate.is_relative_to(root):
        if given.is_absolute():
            raise InvalidInput(
                f"Output '{name}': absolute paths outside the project root are not allowed; "
                "give a path relative to the project root"
            )
        raise InvalidInput(
            f"Output '{name}': '{value}' resolves outside the project root; "
            "outputs must be files inside the project"
        )
    if not os.path.lexists(candidate):
        raise _not_found(name, value, root)
    resolved = candidate.resolve()
    if not resolved.is_relative_to(root):
        raise InvalidInput(
            f"Output '{name}': '{value}' is a symbolic link to a file outside the project root; "
            "outputs must be files inside the project"
        )
    try:
        # lstat: ``resolved`` names no link; a stat never waits on a pipe the way an open does.
        mode = resolved.lstat().st_mode
    except FileNotFoundError:
        raise _not_found(name, value, root) from None
    except OSError as exc:
        raise InvalidInput(
            f"Output '{name}': '{value}' cannot be checked: {exc.strerror or exc}"
        ) from None
    if not stat.S_ISREG(mode):
        # A pipe or device "exists" but cannot be read or reviewed; refused like a folder.
        raise InvalidInput(
            f"Output '{name}': '{value}' is {file_kind(mode)}; outputs must be files"
        )


def validate_outputs(
    *, declared: Iterable[DeclaredOutput], submitted: Mapping[str, object], project_root: Path
) -> None:
    """Raise ``InvalidInput`` with the first rule ``submitted`` breaks; return if it is valid.

    ``project_root`` must already be resolved (no symlinks) for the containment checks.
    """
    by_name = {output.name: output for output in declared}
    unknown = sorted(set(submitted) - set(by_name))
    if unknown:
        raise InvalidInput(
            f"Unknown output names: {', '.join(unknown)}. "
            f"Declared outputs: {', '.join(sorted(by_name))}"
        )
    missing = sorted(
        output.name
        for output in by_name.values()
        if output.required and output.name not in submitted
    )
    if missing:
        raise InvalidInput(
            f"Missing required outputs: {', '.join(missing)}. "
            "All required outputs must be provided."
        )
    for name, value in submitted.items():
        output = by_name[name]
        if output.type == "file":
            if not isinstance(value, str):
                raise InvalidInput(
                    f"Output '{name}' is declared as type 'file' and must be a single string "
                    f"path, got {type(value).__name__}"
                )
            check_output_path(name, value, project_root)
        else:
            if not isinstance(value, list):
                raise InvalidInput(
                    f"Output '{name}' is declared as type 'files' and must be a list of paths, "
                    f"got {type(value).__name__}"
                )
            if output.required and not value:
                raise InvalidInput(
                    f"Output '{name}' is required and must list at least one file, got an "
                    "empty list"
                )
            for path in value:
                if not isinstance(path, str):
                    raise InvalidInput(
                        f"Output '{name}': all paths must be strings, got {type(path).__name__}"
                    )
                check_output_path(name, path, project_root)
