"""The job catalog: discovery of job folders, and their sync into Job/Workflow/Step rows.

A job.yml is parsed only when its file changed (size, mtime or inode) and stored as a new
``Job`` revision only when its content changed. Sessions point at the revision they started on.

One name per concept:

- ``JobFile``: a job folder found on disk, with the stat of its job.yml (nothing read yet).
- ``catalog_scan``: list the ``JobFile``s of a project in catalog order; a directory listing.
- ``catalog_sync``: read and parse the files that changed, *then* reconcile the rows in one
  short transaction; returns a ``CatalogView``.
- ``CatalogView``: what the catalog serves at one moment: ``CatalogJob``s in order, then the
  load errors (``CatalogError``, stored as ``JobLoadError`` rows).
- ``Catalog``: one process's memory of one project's catalog: the last scan and its view, so an
  unchanged folder costs a directory listing and no query.
- ``catalog_view``: the view of a project through this process's ``Catalog`` for it; what
  interfaces call.

Reading a job.yml is the one thing here that can be slow or hostile (a huge, deeply nested or
alias-bombed file), so it happens before the transaction: the write lock (SQLite's is the whole
database) is held only to insert rows that are already built. Any failure to read, parse,
validate or convert one job becomes that job's load error, bounded in size; it never stops the
rest of the catalog.

Why one long module: scanning, parsing outside the lock and the sync inside it are one
idea (the catalog as the disk has it) whose steps must agree on the same revision rules.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import CharField
from django.db.models.fields.json import KT

from workflows import events
from workflows.errors import ProjectUnavailable
from workflows.files import NotRegularFile, read_regular_file
from workflows.jobdefs import base as jobdef
from workflows.jobdefs import parse as jobdef_parse
from workflows.models import Event, Job, JobLoadError, Project, Step, Workflow, WorkflowStep

logger = logging.getLogger(__name__)

STANDARD_JOBS_DIR = Path(__file__).resolve().parent.parent / "standard_jobs"
# The standard jobs in DeepWork 0.14's format, served instead under `--generation 0.14`. `both`
# keeps the 0.9.1 set: a 0.9.1 client cannot run a 0.14-format job, a 0.14 client can run both.
STANDARD_JOBS_014_DIR = STANDARD_JOBS_DIR.with_name("standard_jobs014")
ADDITIONAL_FOLDERS_ENV = "DEEPWORK_ADDITIONAL_JOBS_FOLDERS"


@dataclass(frozen=True)
class JobFile:
    """A job folder found on disk, with the stat of its job.yml."""

    source: str
    dir_name: str
    job_dir: str
    mtime_ns: int
    size: int
    inode: int

    @property
    def yml_path(self) -> Path:
        return Path(self.job_dir) / "job.yml"


@dataclass(frozen=True)
class CatalogJob:
    pk: int
    name: str
    dir_name: str
    summary: str
    workflows: tuple[tuple[str, str], ...]
    # The stored definition's format ("0.14"; "" for the first format), so a start can tell
    # which generation may run the job without loading its definition.
    job_format: str = ""


@dataclass(frozen=True)
class CatalogError:
    dir_name: str
    job_dir: str
    error: str
    # Files whose appearance may put the error right with job.yml unchanged (a step's missing
    # instructions file): the catalog looks for them on every read while the error stands.
    awaited: tuple[str, ...] = ()


@dataclass(frozen=True)
class CatalogView:
    """What the catalog serves right now: valid jobs in order, then load errors."""

    jobs: tuple[CatalogJob, ...]
    errors: tuple[CatalogError, ...]

    def find(self, job_name: str) -> CatalogJob | None:
        """The job a caller means: by folder name first (0.9.1), then by its YAML name."""
        for job in self.jobs:
            if job.dir_name == job_name:
                return job
        for job in self.jobs:
            if job.name == job_name:
                return job
        return None

    def error_for(self, job_name: str) -> CatalogError | None:
        for error in self.errors:
            if error.dir_name == job_name:
                return error
        return None


def standard_jobs_dir(generation: str = "both") -> Path:
    """The standard jobs a server of ``generation`` ("0.9", "0.14" or "both") serves."""
    return STANDARD_JOBS_014_DIR if generation == "0.14" else STANDARD_JOBS_DIR


def job_folders(project_root: Path, generation: str = "both") -> list[tuple[str, Path]]:
    """Folders searched for jobs, in priority order: project, standard, then the env folders."""
    folders: list[tuple[str, Path]] = [
        (Job.Source.PROJECT, project_root / ".deepwork" / "jobs"),
        (Job.Source.STANDARD, standard_jobs_dir(generation)),
    ]
    for entry in os.environ.get(ADDITIONAL_FOLDERS_ENV, "").split(":"):
        entry = entry.strip()
        if entry:
            folders.append((Job.Source.ADDITIONAL, Path(entry).absolute()))
    return folders


def catalog_scan(*, project_root: Path, generation: str = "both") -> tuple[JobFile, ...]:
    """List job folders (sub-folders holding a job.yml) in catalog order, without parsing."""
    found: list[JobFile] = []
    for source, folder in job_folders(project_root, generation):
        try:
            children = sorted(os.scandir(folder), key=lambda entry: entry.path)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for child in children:
            if not child.is_dir():
                continue
            try:
                stat = os.stat(os.path.join(child.path, "job.yml"))
            except OSError:
                continue
            found.append(
                JobFile(
                    source=source,
                    dir_name=child.name,
                    job_dir=child.path,
                    mtime_ns=stat.st_mtime_ns,
                    size=stat.st_size,
                    inode=stat.st_ino,
                )
            )
    return tuple(found)


def _error_text(text: str) -> str:
    # Stored in a text column and sent to every client: bounded, and without NUL, which
    # PostgreSQL refuses in text.
    return jobdef.bounded_error(text.replace("\x00", "\\x00"))


def _storable(name: str) -> str:
    """``name`` as it can be stored: file names may hold bytes that are not UTF-8 (decoded
    as lone surrogates), which no database driver can encode; those are shown escaped."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class _Revision:
    """A job.yml parsed and converted before any transaction: the rows of a new ``Job``."""

    definition: jobdef.JobDef
    as_dict: dict[str, Any]
    steps: tuple[jobdef.StepDef, ...]


@dataclass(frozen=True)
class _Winner:
    """The job a folder name resolves to: a stored row (``pk``) or a revision to store."""

    job_file: JobFile
    content_hash: str | None = None
    pk: int | None = None
    revision: _Revision | None = None
    # A stored revision found by content whose file stat is stale.
    touch: bool = False


def _read(job_file: JobFile) -> bytes:
    try:
        # One byte over the limit is enough to know the file is too large; no more is read.
        raw = read_regular_file(job_file.yml_path, limit=jobdef.MAX_FILE_BYTES + 1)
    except NotRegularFile as exc:
        raise jobdef.JobParseError(
            f"Failed to load job.yml: job.yml is not a regular file (it is {exc.kind})"
        ) from exc
    except OSError as exc:
        raise jobdef.JobParseError(f"Failed to load job.yml: {exc}") from exc
    if len(raw) > jobdef.MAX_FILE_BYTES:
        raise jobdef.too_large_error(job_file.yml_path)
    return raw


@functools.lru_cache(maxsize=256)
def _parsed(job_file: JobFile) -> jobdef.JobDef | Exception:
    try:
        return jobdef_parse.parse_job_bytes(
            _read(job_file), job_dir=Path(job_file.job_dir), yml_path=job_file.yml_path
        )
    except Exception as exc:
        return exc


def job_file_parse(job_file: JobFile) -> jobdef.JobDef:
    """``job_file`` parsed, without the database; raises what the parser raises.

    Remembered per file state (path and stat, as the catalog tells changes), so the scans a
    0.14 server makes at start-up (its instructions, its ``issue_detected``) parse each file
    once: YAML parsing is most of their cost.
    """
    result = _parsed(job_file)
    if isinstance(result, Exception):
        raise result
    # Not remembered with the parse: the files it names can appear while job.yml stays as is.
    jobdef_parse.check_job_files(result)
    return result


def _field_limit(model: type[Job | Step | Workflow], field: str) -> int:
    column = model._meta.get_field(field)
    assert isinstance(column, CharField), field
    assert column.max_length is not None, field
    return column.max_length


def _too_long(loc: str, value: str, limit: int) -> jobdef.JobParseError:
    return jobdef.JobParseError(
        "Job definition validation failed: Validation error at "
        f"{loc}: {len(value)} characters given; at most {limit} can be stored"
    )


def _strings(value: Any, loc: str) -> Iterator[tuple[str, str]]:
    # The dict is job_to_dict's fixed shape, a few levels deep: recursion is bounded.
    if isinstance(value, str):
        yield loc, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{loc} -> {key}" if loc else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{loc} -> {index}" if loc else str(index))


def _convert(job_file: JobFile, raw: bytes, *, sent: bool = False) -> _Revision:
    """Parse ``raw`` and check that its rows can be stored, all outside any transaction.

    ``sent``: ``raw`` came as text from a client, not from ``job_file``'s file (a session
    job), so errors name no file of the server's.
    """
    definition = jobdef_parse.parse_job_bytes(
        raw,
        job_dir=Path(job_file.job_dir),
        yml_path=None if sent else job_file.yml_path,
        # A sent job is a session job: one written for neither format is refused as 0.14 does.
        unclaimed="0.14" if sent else None,
    )
    # Columns the schema leaves unbounded: an over-long value would fail the insert, and with
    # it the whole sync, on PostgreSQL.
    checks = [
        ("name", definition.name, _field_limit(Job, "name")),
        ("version", definition.version, _field_limit(Job, "version")),
        ("summary", definition.summary, _field_limit(Job, "summary")),
    ]
    for i, step in enumerate(definition.steps):
        checks += [
            (f"steps -> {i} -> id", step.id, _field_limit(Step, "step_id")),
            (f"steps -> {i} -> name", step.name, _field_limit(Step, "name")),
            (
                f"steps -> {i} -> instructions_file",
                step.instructions_file,
                _field_limit(Step, "instructions_file"),
            ),
        ]
    for i, workflow in enumerate(definition.workflows):
        checks += [
            (f"workflows -> {i} -> name", workflow.name, _field_limit(Workflow, "name")),
            (f"workflows -> {i} -> summary", workflow.summary, _field_limit(Workflow, "summary")),
        ]
    for loc, value, limit in checks:
        if len(value) > limit:
            raise _too_long(loc, value, limit)
    as_dict = jobdef_parse.job_to_dict(definition)
    for loc, value in _strings(as_dict, ""):
        if "\x00" in value:
            raise jobdef.JobParseError(
                f"Job definition validation failed: Validation error at {loc}: "
                "a NUL character cannot be stored"
            )
    if not sent:
        # Last: what is wrong with the document itself is told first. A sent job has no
        # folder of its own on disk to hold files.
        jobdef_parse.check_job_files(definition)
    # 0.9.1 accepts a repeated step id and always uses the first step of that id; only that
    # one gets a row (a row per id is what the database enforces).
    first_of_id: dict[str, jobdef.StepDef] = {}
    for step in definition.steps:
        first_of_id.setdefault(step.id, step)
    return _Revision(definition=definition, as_dict=as_dict, steps=tuple(first_of_id.values()))


def _load_failure(job_file: JobFile, exc: BaseException) -> CatalogError:
    if isinstance(exc, jobdef.JobParseError):
        text = str(exc)
        logger.warning("Job %s failed to load: %s", job_file.job_dir, text)
    else:
        # Not a refusal the parser meant: keep the traceback for whoever runs the server, and
        # give the agent what went wrong without taking the other jobs down with this one.
        logger.error("Job %s failed to load", job_file.job_dir, exc_info=exc)
        text = (
            f"Failed to load job.yml: {job_file.yml_path} could not be read: "
            f"{type(exc).__name__}: {exc}"
        )
    awaited = exc.awaited if isinstance(exc, jobdef_parse.InstructionsFilesMissing) else ()
    return CatalogError(
        _storable(job_file.dir_name), _storable(job_file.job_dir), _error_text(text), awaited
    )


def _resolve(
    *, project: Project, files: tuple[JobFile, ...]
) -> tuple[list[_Winner], list[CatalogError]]:
    """Which job each folder name serves, and the load errors; no transaction, no write.

    Dedup follows DeepWork: by folder name, the first folder that *parses* wins; a broken
    folder is reported but does not hide a same-named job further down the search path.
    """
    known = {
        (job_dir, mtime_ns, size): pk
        for pk, job_dir, mtime_ns, size in Job.objects.filter(
            project=project,
            job_dir__in=[f.job_dir for f in files if _storable(f.job_dir) == f.job_dir],
        ).values_list("pk", "job_dir", "file_mtime_ns", "file_size")
    }
    # Every changed file is read (not parsed) first, so that revisions already stored under
    # its content are found with one query, whatever the number of jobs.
    raws: dict[str, bytes | BaseException] = {}
    for job_file in files:
        if (job_file.job_dir, job_file.mtime_ns, job_file.size) in known:
            continue
        if job_file.job_dir in raws:
            continue
        try:
            if _storable(job_file.job_dir) != job_file.job_dir:
                raise jobdef.JobParseError(
                    f"Failed to load job.yml: the path {_storable(job_file.job_dir)} is not "
                    "valid UTF-8"
                )
            raws[job_file.job_dir] = _read(job_file)
        except Exception as exc:
            raws[job_file.job_dir] = exc
    hashes = {
        job_dir: hashlib.sha256(raw).hexdigest()
        for job_dir, raw in raws.items()
        if isinstance(raw, bytes)
    }
    stored = (
        {
            (job_dir, content_hash): pk
            for pk, job_dir, content_hash in Job.objects.filter(
                project=project, job_dir__in=list(hashes), content_hash__in=set(hashes.values())
            ).values_list("pk", "job_dir", "content_hash")
        }
        if hashes
        else {}
    )

    winners: list[_Winner] = []
    errors: list[CatalogError] = []
    seen: set[str] = set()
    for job_file in files:
        if job_file.dir_name in seen:
            continue
        pk = known.get((job_file.job_dir, job_file.mtime_ns, job_file.size))
        if pk is not None:
            winners.append(_Winner(job_file, pk=pk))
            seen.add(job_file.dir_name)
            continue
        raw = raws[job_file.job_dir]
        if isinstance(raw, BaseException):
            errors.append(_load_failure(job_file, raw))
            continue
        content_hash = hashes[job_file.job_dir]
        pk = stored.get((job_file.job_dir, content_hash))
        if pk is not None:
            winners.append(_Winner(job_file, content_hash=content_hash, pk=pk, touch=True))
            seen.add(job_file.dir_name)
            continue
        try:
            revision = _convert(job_file, raw)
        except Exception as exc:
            # RecursionError and MemoryError included: whatever one file does to the parser
            # is that file's error.
            errors.append(_load_failure(job_file, exc))
            continue
        winners.append(_Winner(job_file, content_hash=content_hash, revision=revision))
        seen.add(job_file.dir_name)
    return winners, errors


def _create_revision(
    *, project: Project, job_file: JobFile, revision: _Revision, content_hash: str
) -> Job:
    definition, as_dict = revision.definition, revision.as_dict
    job = Job.objects.create(
        project=project,
        source=job_file.source,
        dir_name=job_file.dir_name,
        job_dir=job_file.job_dir,
        name=definition.name,
        version=definition.version,
        summary=definition.summary,
        common_info=definition.common_info,
        definition=as_dict,
        content_hash=content_hash,
        file_mtime_ns=job_file.mtime_ns,
        file_size=job_file.size,
        is_current=False,
    )
    workflows = Workflow.objects.bulk_create(
        Workflow(job=job, name=wf.name, summary=wf.summary, position=i)
        for i, wf in enumerate(definition.workflows)
    )
    step_dicts = {step["id"]: step for step in reversed(as_dict["steps"])}
    steps = Step.objects.bulk_create(
        Step(
            job=job,
            step_id=step.id,
            name=step.name,
            description=step.description,
            instructions_file=step.instructions_file,
            outputs=[
                {
                    "name": o.name,
                    "type": o.type,
                    "description": o.description,
                    "required": o.required,
                }
                for o in step.outputs
            ],
            reviews=[
                {
                    "run_each": r.run_each,
                    "quality_criteria": dict(r.quality_criteria),
                    "additional_review_guidance": r.additional_review_guidance,
                }
                for r in step.reviews
            ],
            inputs=step_dicts[step.id].get("inputs", []),
            position=i,
        )
        for i, step in enumerate(revision.steps)
    )
    step_by_id = {step.step_id: step for step in steps}
    nodes: list[WorkflowStep] = []
    # (entry before, entry) pairs: each node depends on every node of the entry before it.
    adjacent: list[tuple[list[WorkflowStep], list[WorkflowStep]]] = []
    for workflow, wf_def in zip(workflows, definition.workflows, strict=True):
        previous: list[WorkflowStep] = []
        for entry_index, (entry, concurrent) in enumerate(
            zip(wf_def.entries, wf_def.concurrent, strict=True)
        ):
            level = [
                WorkflowStep(
                    workflow=workflow,
                    step=step_by_id[step_id],
                    entry_index=entry_index,
                    position_in_entry=position,
                    is_concurrent=concurrent,
                )
                for position, step_id in enumerate(entry)
            ]
            nodes.extend(level)
            adjacent.append((previous, level))
            previous = level
    WorkflowStep.objects.bulk_create(nodes)
    through = WorkflowStep.depends_on.through
    edges: list[Any] = []
    for before, level in adjacent:
        edges.extend(
            through(from_workflowstep_id=node.pk, to_workflowstep_id=dependency.pk)
            for node in level
            for dependency in before
        )
    through.objects.bulk_create(edges)
    return job


def catalog_sync(*, project: Project, files: tuple[JobFile, ...]) -> CatalogView:
    """Bring the catalog rows in line with ``files`` and return what the catalog now serves.

    Files are read, parsed and converted first, with no transaction open; the transaction
    only writes rows already built, so it is as short as the number of changed rows.
    """
    resolved, errors = _resolve(project=project, files=files)
    changed = False
    with transaction.atomic():
        # Serialises catalog syncs of one project across processes (SQLite's IMMEDIATE
        # transactions already do; on PostgreSQL this row lock does).
        Project.objects.select_for_update().filter(pk=project.pk).exists()
        new = [w for w in resolved if w.revision is not None]
        # Another process may have stored the same revision since it was looked up.
        stored = (
            {
                (job_dir, content_hash): pk
                for pk, job_dir, content_hash in Job.objects.filter(
                    project=project,
                    job_dir__in=[w.job_file.job_dir for w in new],
                    content_hash__in={w.content_hash for w in new},
                ).values_list("pk", "job_dir", "content_hash")
            }
            if new
            else {}
        )
        winner_ids: list[int] = []
        for winner in resolved:
            pk = winner.pk
            if winner.revision is not None:
                assert winner.content_hash is not None
                pk = stored.get((winner.job_file.job_dir, winner.content_hash))
                if pk is None:
                    pk = _create_revision(
                        project=project,
                        job_file=winner.job_file,
                        revision=winner.revision,
                        content_hash=winner.content_hash,
                    ).pk
                    changed = True
                else:
                    winner = _Winner(winner.job_file, pk=pk, touch=True)
            # Every branch above found or created the revision's row.
            assert pk is not None
            if winner.touch:
                Job.objects.filter(pk=pk).update(
                    file_mtime_ns=winner.job_file.mtime_ns, file_size=winner.job_file.size
                )
            winner_ids.append(pk)

        if (
            Job.objects.filter(project=project, is_current=True)
            .exclude(pk__in=winner_ids)
            .update(is_current=False)
        ):
            changed = True
        current = dict(
            Job.objects.filter(pk__in=winner_ids, is_current=True).values_list("pk", "position")
        )
        for position, pk in enumerate(winner_ids):
            if current.get(pk) != position:
                Job.objects.filter(pk=pk).update(is_current=True, position=position)
                changed = True

        error_dirs = [e.job_dir for e in errors]
        if JobLoadError.objects.filter(project=project).exclude(job_dir__in=error_dirs).delete()[0]:
            changed = True
        stored_errors = {
            e.job_dir: e
            for e in JobLoadError.objects.filter(project=project, job_dir__in=error_dirs)
        }
        for position, error in enumerate(errors):
            existing = stored_errors.get(error.job_dir)
            if existing is None:
                JobLoadError.objects.create(
                    project=project,
                    dir_name=error.dir_name,
                    job_dir=error.job_dir,
                    error=error.error,
                    position=position,
                )
                changed = True
            elif existing.error != error.error or existing.position != position:
                JobLoadError.objects.filter(pk=existing.pk).update(
                    error=error.error, position=position
                )
                changed = True
        if changed:
            events.event_record(
                kind=Event.Kind.CATALOG_SYNCED,
                project=project,
                payload=events.CatalogSynced(jobs=len(winner_ids), errors=len(errors)),
            )
        workflows_by_job: dict[int, list[tuple[str, str]]] = {pk: [] for pk in winner_ids}
        for job_id, name, summary in (
            Workflow.objects.filter(job_id__in=winner_ids)
            .order_by("job_id", "position")
            .values_list("job_id", "name", "summary")
        ):
            workflows_by_job[job_id].append((name, summary))
        details = {
            pk: (name, dir_name, summary, job_format or "")
            for pk, name, dir_name, summary, job_format in Job.objects.filter(pk__in=winner_ids)
            # As text: a JSON read of "0.14" comes back from SQLite as the number 0.14.
            .annotate(job_format=KT("definition__job_format"))
            .values_list("pk", "name", "dir_name", "summary", "job_format")
        }
    jobs = tuple(
        CatalogJob(
            pk=pk,
            name=details[pk][0],
            dir_name=details[pk][1],
            summary=details[pk][2],
            workflows=tuple(workflows_by_job[pk]),
            job_format=details[pk][3],
        )
        for pk in winner_ids
    )
    return CatalogView(jobs=jobs, errors=tuple(errors))


class Catalog:
    """A project's catalog as one process sees it: rescanned on every read, synced on change.

    The scan is a directory listing and one ``stat`` per job; while nothing changed, the last
    view is served from memory without touching the database.
    """

    def __init__(self, project: Project, generation: str = "both"):
        self.project = project
        # Which standard jobs this process serves (see ``standard_jobs_dir``).
        self.generation = generation
        self._lock = threading.Lock()
        self._signature: tuple[JobFile, ...] | None = None
        self._view: CatalogView | None = None

    def view(self) -> CatalogView:
        files = self._scan()
        with self._lock:
            if self._still(files) and self._view is not None:
                return self._view
        view = catalog_sync(project=self.project, files=files)
        with self._lock:
            self._signature, self._view = files, view
        return view

    def view_if_unchanged(self) -> CatalogView | None:
        """The last view, if the job files are still as it saw them; None when a sync is due.
        Reads only the folders, never the database."""
        files = self._scan()
        with self._lock:
            return self._view if self._still(files) else None

    def _still(self, files: tuple[JobFile, ...]) -> bool:
        """Whether the last view still holds for ``files``: the same job files, and none of
        the files its load errors wait for has appeared since."""
        if files != self._signature:
            return False
        errors = self._view.errors if self._view is not None else ()
        return not any(os.path.isfile(path) for error in errors for path in error.awaited)

    def _scan(self) -> tuple[JobFile, ...]:
        return catalog_scan(project_root=Path(self.project.root_path), generation=self.generation)


# One Catalog per project and folder in this process: each remembers its last scan. Keyed by
# the folder too, so a project whose root_path changed is not served its old folder's view.
_catalogs: dict[tuple[int, str], Catalog] = {}
_catalogs_lock = threading.Lock()


def catalog_view(*, project: Project) -> CatalogView:
    """The project's job catalog as this process serves it: rescanned, synced on change.

    Syncing reads the project's folder, so the folder has to be on this machine: a server
    without it would otherwise mark every job of the project gone.
    """
    if not Path(project.root_path).is_dir():
        raise ProjectUnavailable(
            f"Project folder {project.root_path} is not on this server; workflows of this "
            "project can only be started where its folder is"
        )
    key = (project.pk, project.root_path)
    with _catalogs_lock:
        catalog = _catalogs.get(key)
        if catalog is None:
            catalog = _catalogs[key] = Catalog(project)
    return catalog.view()
