"""Parse a job.yml in whichever format it is written, store it, and read it back.

Formats are told apart on the parsed YAML, before any validation, so each is checked by its
own rules and texts. ``FORMATS`` is in detection order: the first that claims a document
builds it, and the first format claims whatever no later one does.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from workflows.jobdefs import format_0_9, format_0_14
from workflows.jobdefs.base import (
    MAX_FILE_BYTES,
    JobDef,
    JobParseError,
    RtWorkflow,
    file_named,
    load_yaml,
    too_large_error,
)
from workflows.jobdefs.format_0_9 import InstructionsFilesMissing as InstructionsFilesMissing

# Checked newest first: the oldest format is the fallback for everything else.
FORMATS: tuple[ModuleType, ...] = (format_0_14, format_0_9)


def _format_named(name: str) -> ModuleType:
    return next((f for f in FORMATS if name == f.FORMAT), format_0_9)


def parse_job_bytes(
    raw: bytes, *, job_dir: Path, yml_path: Path | None, unclaimed: str | None = None
) -> JobDef:
    """Parse the bytes of ``yml_path`` as read from disk: size, then UTF-8, then the text.

    ``yml_path`` None: the bytes were sent, not read from a file (a session job); errors then
    name no file, and YAML errors say ``in "<unicode string>"``, as DeepWork 0.14 does.
    ``unclaimed``: see ``parse_job_text``.
    """
    if len(raw) > MAX_FILE_BYTES:
        raise too_large_error(yml_path)
    try:
        # Universal newlines, as Path.read_text, so YAML error marks match 0.9.1's.
        text = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8").read()
    except UnicodeDecodeError as exc:
        # 0.9.1 let this escape and took get_workflows down with it.
        raise JobParseError(
            f"Failed to load job.yml: {file_named(yml_path)} is not valid UTF-8: {exc}"
        ) from exc
    return parse_job_text(text, job_dir=job_dir, yml_path=yml_path, unclaimed=unclaimed)


def parse_job_text(
    text: str, *, job_dir: Path, yml_path: Path | None, unclaimed: str | None = None
) -> JobDef:
    """Parse job.yml content already read from ``yml_path`` (None: sent as text, see
    ``parse_job_bytes``); ``job_dir`` is recorded as given.

    ``unclaimed`` names the format that checks a document no format claims by its own keys
    (None: the oldest, the fallback for everything). A session job, a DeepWork 0.14 notion,
    passes "0.14": a document written for neither format is then refused in 0.14's terms.
    """
    # Characters never outnumber UTF-8 bytes, so this refuses only files over the byte limit.
    if len(text) > MAX_FILE_BYTES:
        raise too_large_error(yml_path)
    data = load_yaml(text, yml_path)
    job_format = next(f for f in FORMATS if f.is_format(data))
    if unclaimed is not None and job_format is format_0_9 and not format_0_9.has_own_keys(data):
        job_format = _format_named(unclaimed)
    job: JobDef = job_format.build_job(data, job_dir=job_dir)
    return job


def check_job_files(job: JobDef) -> None:
    """The files ``job`` names beside its job.yml are there, where its format has any (a 0.14
    step holds its instructions itself); raises ``JobParseError``, with ``awaited`` paths
    when a missing file is what is wrong (``InstructionsFilesMissing``)."""
    check = getattr(_format_named(job.format), "check_files", None)
    if check is not None:
        check(job)


def job_to_dict(job: JobDef) -> dict[str, Any]:
    """A JSON-safe dict holding everything in ``job``, in its format's stored form."""
    stored: dict[str, Any] = _format_named(job.format).job_to_dict(job)
    return stored


def runtime_workflow(definition: Mapping[str, Any], workflow_name: str) -> RtWorkflow:
    """The steps a session walks through ``workflow_name`` of a stored job, any format."""
    job_format = next(f for f in FORMATS if f.is_stored(definition))
    workflow: RtWorkflow = job_format.runtime_view(definition, workflow_name)
    return workflow
