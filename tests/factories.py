"""Builders for test data on disk. Database rows come from the real services."""

from __future__ import annotations

from pathlib import Path


def write_job(project_dir: Path, folder: str, job_yml: str, steps: list[str]) -> Path:
    """Write ``.deepwork/jobs/<folder>/job.yml`` and one instructions file per step id."""
    job_dir = project_dir / ".deepwork" / "jobs" / folder
    (job_dir / "steps").mkdir(parents=True, exist_ok=True)
    (job_dir / "job.yml").write_text(job_yml)
    for step in steps:
        (job_dir / "steps" / f"{step}.md").write_text(f"# {step}\n\nDo the {step} work.\n")
    return job_dir
