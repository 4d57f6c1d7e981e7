"""The job catalog: discovery of job folders, and their sync into Job/Workflow/Step rows.

A job.yml is parsed only when its file changed (size, mtime or inode) and stored as a new
``Job`` revision only when its content changed. Sessions point at the revision they started on.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from workflows import jobdef
from workflows.files import NotRegularFile, read_regular_file
from workflows.models import Event, Job, JobLoadError, Project, Step, Workflow, WorkflowStep

logger = logging.getLogger(__name__)

STANDARD_JOBS_DIR = Path(__file__).resolve().parent.parent / "standard_jobs"
ADDITIONAL_FOLDERS_ENV = "DEEPWORK_ADDITIONAL_JOBS_FOLDERS"
REPAIR_HINT = (
    "\nThis project likely needs `/deepwork:repair` run to correct the issue unless the "
    "offending file(s) were changed this session and the agent can fix it directly."
)


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


@dataclass(frozen=True)
class CatalogError:
    dir_name: str
    job_dir: str
    error: str


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


def job_folders(project_root: Path) -> list[tuple[str, Path]]:
    """Folders searched for jobs, in priority order: project, standard, then the env folders."""
    folders = [
        (Job.Source.PROJECT, project_root / ".deepwork" / "jobs"),
        (Job.Source.STANDARD, STANDARD_JOBS_DIR),
    ]
    for entry in os.environ.get(ADDITIONAL_FOLDERS_ENV, "").split(":"):
        entry = entry.strip()
        if entry:
            folders.append((Job.Source.ADDITIONAL, Path(entry).absolute()))
    return folders


def catalog_scan(*, project_root: Path) -> tuple[JobFile, ...]:
    """List job folders (sub-folders holding a job.yml) in catalog order, without parsing."""
    found: list[JobFile] = []
    for source, folder in job_folders(project_root):
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


def _parse(job_file: JobFile, raw: bytes) -> jobdef.JobDef:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise jobdef.JobParseError(
            f"Failed to load job.yml: {job_file.yml_path} is not valid UTF-8: {exc}"
        ) from exc
    return jobdef.parse_job_text(text, job_dir=Path(job_file.job_dir), yml_path=job_file.yml_path)


def _create_revision(
    *, project: Project, job_file: JobFile, definition: jobdef.JobDef, content_hash: str
) -> Job:
    as_dict = jobdef.job_to_dict(definition)
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
            inputs=as_dict["steps"][i].get("inputs", []),
            position=i,
        )
        for i, step in enumerate(definition.steps)
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
    edges = []
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

    Dedup follows DeepWork: by folder name, the first folder that *parses* wins; a broken
    folder is reported but does not hide a same-named job further down the search path.
    """
    changed = False
    with transaction.atomic():
        # Serialises catalog syncs of one project across processes (SQLite's IMMEDIATE
        # transactions already do; on PostgreSQL this row lock does).
        Project.objects.select_for_update().filter(pk=project.pk).exists()
        known = {
            (row.job_dir, row.file_mtime_ns, row.file_size): row
            for row in Job.objects.filter(
                project=project, job_dir__in=[f.job_dir for f in files]
            ).only("id", "job_dir", "file_mtime_ns", "file_size", "dir_name", "is_current")
        }
        winners: list[Job] = []
        errors: list[CatalogError] = []
        seen: set[str] = set()
        for job_file in files:
            if job_file.dir_name in seen:
                continue
            row = known.get((job_file.job_dir, job_file.mtime_ns, job_file.size))
            if row is None:
                try:
                    raw = read_regular_file(job_file.yml_path, limit=None)
                except OSError as exc:
                    reason = (
                        f"job.yml is not a regular file (it is {exc.kind})"
                        if isinstance(exc, NotRegularFile)
                        else str(exc)
                    )
                    errors.append(
                        CatalogError(
                            job_file.dir_name, job_file.job_dir, f"Failed to load job.yml: {reason}"
                        )
                    )
                    continue
                content_hash = hashlib.sha256(raw).hexdigest()
                row = Job.objects.filter(
                    project=project, job_dir=job_file.job_dir, content_hash=content_hash
                ).first()
                if row is not None:
                    Job.objects.filter(pk=row.pk).update(
                        file_mtime_ns=job_file.mtime_ns, file_size=job_file.size
                    )
                else:
                    try:
                        definition = _parse(job_file, raw)
                    except jobdef.JobParseError as exc:
                        logger.warning("Job %s failed to load: %s", job_file.job_dir, exc)
                        errors.append(CatalogError(job_file.dir_name, job_file.job_dir, str(exc)))
                        continue
                    row = _create_revision(
                        project=project,
                        job_file=job_file,
                        definition=definition,
                        content_hash=content_hash,
                    )
                    changed = True
            seen.add(job_file.dir_name)
            winners.append(row)

        winner_ids = {row.pk for row in winners}
        if (
            Job.objects.filter(project=project, is_current=True)
            .exclude(pk__in=winner_ids)
            .update(is_current=False)
        ):
            changed = True
        current = dict(
            Job.objects.filter(pk__in=winner_ids, is_current=True).values_list("pk", "position")
        )
        for position, row in enumerate(winners):
            if current.get(row.pk) != position:
                Job.objects.filter(pk=row.pk).update(is_current=True, position=position)
                changed = True

        error_dirs = [e.job_dir for e in errors]
        if JobLoadError.objects.filter(project=project).exclude(job_dir__in=error_dirs).delete()[0]:
            changed = True
        stored = {
            e.job_dir: e
            for e in JobLoadError.objects.filter(project=project, job_dir__in=error_dirs)
        }
        for position, error in enumerate(errors):
            existing = stored.get(error.job_dir)
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
            Event.objects.create(
                project=project,
                kind=Event.Kind.CATALOG_SYNCED,
                payload={"jobs": len(winners), "errors": len(errors)},
            )
        workflows_by_job: dict[int, list[tuple[str, str]]] = {pk: [] for pk in winner_ids}
        for job_id, name, summary in (
            Workflow.objects.filter(job_id__in=winner_ids)
            .order_by("job_id", "position")
            .values_list("job_id", "name", "summary")
        ):
            workflows_by_job[job_id].append((name, summary))
        details = {
            pk: (name, dir_name, summary)
            for pk, name, dir_name, summary in Job.objects.filter(pk__in=winner_ids).values_list(
                "pk", "name", "dir_name", "summary"
            )
        }
    jobs = tuple(
        CatalogJob(
            pk=row.pk,
            name=details[row.pk][0],
            dir_name=details[row.pk][1],
            summary=details[row.pk][2],
            workflows=tuple(workflows_by_job[row.pk]),
        )
        for row in winners
    )
    return CatalogView(jobs=jobs, errors=tuple(errors))


class Catalog:
    """A project's catalog as one process sees it: rescanned on every read, synced on change.

    The scan is a directory listing and one ``stat`` per job; while nothing changed, the last
    view is served from memory without touching the database.
    """

    def __init__(self, project: Project):
        self.project = project
        self._lock = threading.Lock()
        self._signature: tuple[JobFile, ...] | None = None
        self._view: CatalogView | None = None

    def view(self) -> CatalogView:
        files = catalog_scan(project_root=Path(self.project.root_path))
        with self._lock:
            if files == self._signature and self._view is not None:
                return self._view
        view = catalog_sync(project=self.project, files=files)
        with self._lock:
            self._signature, self._view = files, view
        return view
