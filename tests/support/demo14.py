"""The 0.14-format demo job (``demo14``) several test folders run, and how to write it into a
project."""

from __future__ import annotations

import textwrap
from pathlib import Path

DEMO14_JOB = textwrap.dedent(
    """\
    name: demo14
    summary: "A 0.14-format demo job"
    step_arguments:
      - name: topic
        description: "What the notes are about"
        type: string
      - name: notes.md
        description: "Notes gathered on the topic"
        type: file_path
        review:
          strategy: individual
          instructions: "Every note names its source."
      - name: data.json
        description: "Structured data"
        type: file_path
        json_schema:
          type: object
          required: [title]
      - name: verdict
        description: "The judgement"
        type: string
        review:
          strategy: individual
          instructions: "The verdict is one sentence."
    workflows:
      main:
        summary: "Gather, judge, then run the helper"
        common_job_info_provided_to_all_steps_at_runtime: |
          Shared 0.14 context.
        post_workflow_instructions: "Open a pull request."
        steps:
          - name: gather
            instructions: "Gather notes on the topic."
            inputs:
              topic: {}
            outputs:
              notes.md:
                review:
                  strategy: matches_together
                  instructions: "The notes are complete."
              data.json: {}
            process_requirements:
              sources: "The notes MUST cite their sources."
          - name: judge
            instructions: "Judge the notes."
            inputs:
              topic: {}
              notes.md: {}
            outputs:
              verdict: {}
          - name: nested
            sub_workflow:
              workflow_name: helper
      helper:
        summary: "One helper step"
        agent: general-purpose
        steps:
          - name: help
            instructions: "Help out."
      plain:
        summary: "Two plain steps"
        steps:
          - name: one
            instructions: "Step one."
          - name: two
            instructions: "Step two."
    """
)


def write_demo14(project_dir: Path) -> Path:
    job_dir = project_dir / ".deepwork" / "jobs" / "demo14"
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / "job.yml").write_text(DEMO14_JOB, encoding="utf-8")
    (project_dir / "notes.md").write_text("notes\n", encoding="utf-8")
    (project_dir / "data.json").write_text('{"title": "t"}\n', encoding="utf-8")
    return job_dir
