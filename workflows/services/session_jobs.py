"""DeepWork 0.14's session jobs: a conversation registers a job.yml only it can start.

The text is stored verbatim in the database (``SessionJob``); a valid one also becomes a
``Job`` revision (source ``session``, never current, so no catalog lists it) that sessions
start on like any other. Parsing happens before the transaction.
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


@dataclass(frozen=True)
class Registered:
    job_name: str
    job_dir: str


def session_job_dir(
    *, project: Project, platform: str, conversation_id: str, job_name: str
) -> Path:
    """Where 0.14 keeps a session job; the job's ``job_dir`` (the file itself lives in the
    database)."""
    return (
        Path(project.root_path)
        / ".deepwork/tmp/sessions"
        / platform
        / f"session-{conversation_id}"
        / "jobs"
        / job_name
    )


def session_job_register(
    *, project: Project, platform: str, conversation_id: str, job_name: str, yaml_text: str
) -> Registered:
    """Store ``yaml_text`` as the conversation's job ``job_name``, replacing any earlier one.

    ``InvalidInput`` carries 0.14's texts: a bad name or YAML syntax changes nothing; a
    definition that fails validation is still stored (``get_session_job`` shows it). No error
    names a path of the server: the text was sent, and is what errors speak of.
    """
    stack_id_clean("session_id", conversation_id)
    if not _NAME.match(job_name) or len(job_name) > 255:
        raise InvalidInput(f"Invalid job name '{job_name}': must match ^[a-z][a-z0-9_]*$")
    job_dir = session_job_dir(
        project=project, platform=platform, conversation_id=conversation_id, job_name=job_name
    )
    raw = yaml_text.encode("utf-8", "surrogateescape")
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
    content_hash = hashlib.sha256(raw).hexdigest()
    with transaction.atomic():
        job = None
        if revision is not None:
            job = Job.objects.filter(
                project=project, job_dir=str(job_dir), content_hash=content_hash
            ).first() or catalog._create_revision(
                project=project, job_file=job_file, revision=revision, content_hash=content_hash
            )
        SessionJob.objects.update_or_create(
            project=project,
            conversation_id=conversation_id,
            job_name=job_name,
            defaults={
                "yaml_text": yaml_text,
                "job": job,
                "error": error,
                "registered_at": timezone.now(),
            },
        )
    if error:
        # DeepWork 0.14 names the file it wrote here; this server keeps the text in the
        # database, and the folder is the server's own, so the agent is told how to read it.
        raise InvalidInput(
            f"Job definition validation failed: {error}\nThe definition was kept for "
            "inspection: get_session_job returns it. Fix the issues and call "
            "register_session_job again."
        )
    return Registered(job_name=job_name, job_dir=str(job_dir))


def session_job_text(*, project: Project, conversation_id: str, job_name: str) -> str:
    """The registered text, verbatim."""
    stack_id_clean("session_id", conversation_id)
    found = SessionJob.objects.filter(
        project=project, conversation_id=conversation_id, job_name=job_name
    ).first()
    if found is None:
        raise NotFound(f"Session job '{job_name}' not found for session '{conversation_id}'.")
    return found.yaml_text
