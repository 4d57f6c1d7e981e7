"""DeepWork 0.14's session jobs: a conversation registers a job.yml only it can start.

The text is stored verbatim in the database (``SessionJob``); a valid one also becomes a
``Job`` revision (source ``session``, never current, so no catalog lists it) that sessions
start on like any other. Parsing (``session_job_parse``) needs no database: the MCP tool runs
it on a worker thread before its call reaches the shared database thread.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from workflows.errors import InvalidInput, NotFound
from workflows.generations.v0_14 import stack_id_clean
from workflows.jobdefs import base as jobdef
from workflows.models import Job, Project, SessionJob
from workflows.services import catalog

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

# A session job is a plan written on the fly; far below the 1 MiB of a job.yml, so that one
# caller's definitions cost the server little, wherever they are parsed.
MAX_SESSION_JOB_BYTES = 256 * 1024


@dataclass(frozen=True)
class Registered:
    job_name: str
    job_dir: str


def session_job_dir(
    *, project_root: Path, platform: str, conversation_id: str, job_name: str
) -> Path:
    """Where 0.14 keeps a session job; the job's ``job_dir`` (the file itself lives in the
    database)."""
    return (
        project_root
        / ".deepwork/tmp/sessions"
        / platform
        / f"session-{conversation_id}"
        / "jobs"
        / job_name
    )


@dataclass(frozen=True)
class ParsedSessionJob:
    """A session job definition read and checked, with no database involved: what
    ``session_job_store`` keeps."""

    conversation_id: str
    job_name: str
    job_dir: Path
    yaml_text: str
    raw: bytes
    job_file: catalog.JobFile
    # None when the definition fails validation (``error`` says why): it is still kept.
    revision: catalog._Revision | None
    error: str


def session_job_parse(
    *, project_root: Path, platform: str, conversation_id: str, job_name: str, yaml_text: str
) -> ParsedSessionJob:
    """Read ``yaml_text`` as the conversation's job ``job_name``: everything
    ``session_job_register`` does before it touches the database, and the slow part of it (a
    big definition takes a while to parse), so callers that share a database thread run it
    before they reach it.

    ``InvalidInput`` carries 0.14's texts for a bad name or YAML syntax, and refuses a text
    over ``MAX_SESSION_JOB_BYTES`` before reading it. No error names a path of the server:
    the text was sent, and is what errors speak of.
    """
    stack_id_clean("session_id", conversation_id)
    if not _NAME.match(job_name) or len(job_name) > 255:
        raise InvalidInput(f"Invalid job name '{job_name}': must match ^[a-z][a-z0-9_]*$")
    raw = yaml_text.encode("utf-8", "surrogateescape")
    if len(raw) > MAX_SESSION_JOB_BYTES:
        raise InvalidInput(
            f"The job definition is {len(raw)} bytes; a session job may be at most "
            f"{MAX_SESSION_JOB_BYTES} bytes (256 KiB). Split it into smaller jobs, or commit it "
            "to the project as a job.yml."
        )
    job_dir = session_job_dir(
        project_root=project_root,
        platform=platform,
        conversation_id=conversation_id,
        job_name=job_name,
    )
    job_file = catalog.JobFile(
        source=Job.Source.SESSION,
        dir_name=job_name,
        job_dir=str(job_dir),
        mtime_ns=0,
        size=len(raw),
        inode=0,
    )
    revision: catalog._Revision | None = None
    error = ""
    try:
        revision = catalog._convert(job_file, raw, sent=True)
    except jobdef.JobYamlError as exc:
        raise InvalidInput(f"Invalid YAML syntax: {exc.detail}") from None
    except jobdef.JobParseError as exc:
        error = str(exc)
    return ParsedSessionJob(
        conversation_id=conversation_id,
        job_name=job_name,
        job_dir=job_dir,
        yaml_text=yaml_text,
        raw=raw,
        job_file=job_file,
        revision=revision,
        error=error,
    )


def session_job_register(
    *, project: Project, platform: str, conversation_id: str, job_name: str, yaml_text: str
) -> Registered:
    """Store ``yaml_text`` as the conversation's job ``job_name``, replacing any earlier one:
    ``session_job_parse`` then ``session_job_store``."""
    parsed = session_job_parse(
        project_root=Path(project.root_path),
        platform=platform,
        conversation_id=conversation_id,
        job_name=job_name,
        yaml_text=yaml_text,
    )
    return session_job_store(project=project, parsed=parsed)


def session_job_store(*, project: Project, parsed: ParsedSessionJob) -> Registered:
    """Keep ``parsed`` (from ``session_job_parse``, for this project's folder) as its
    conversation's job, replacing any earlier one of that name.

    A definition that failed validation is still stored (``get_session_job`` shows it) and
    then refused with ``InvalidInput`` in 0.14's words.
    """
    content_hash = hashlib.sha256(parsed.raw).hexdigest()
    with transaction.atomic():
        job = None
        if parsed.revision is not None:
            job = Job.objects.filter(
                project=project, job_dir=str(parsed.job_dir), content_hash=content_hash
            ).first() or catalog._create_revision(
                project=project,
                job_file=parsed.job_file,
                revision=parsed.revision,
                content_hash=content_hash,
            )
        SessionJob.objects.update_or_create(
            project=project,
            conversation_id=parsed.conversation_id,
            job_name=parsed.job_name,
            defaults={
                "yaml_text": parsed.yaml_text,
                "job": job,
                "error": parsed.error,
                "registered_at": timezone.now(),
            },
        )
    if parsed.error:
        # DeepWork 0.14 names the file it wrote here; this server keeps the text in the
        # database, and the folder is the server's own, so the agent is told how to read it.
        raise InvalidInput(
            f"Job definition validation failed: {parsed.error}\nThe definition was kept for "
            "inspection: get_session_job returns it. Fix the issues and call "
            "register_session_job again."
        )
    return Registered(job_name=parsed.job_name, job_dir=str(parsed.job_dir))


def session_job_text(*, project: Project, conversation_id: str, job_name: str) -> str:
    """The registered text, verbatim."""
    stack_id_clean("session_id", conversation_id)
    found = SessionJob.objects.filter(
        project=project, conversation_id=conversation_id, job_name=job_name
    ).first()
    if found is None:
        raise NotFound(f"Session job '{job_name}' not found for session '{conversation_id}'.")
    return found.yaml_text
