"""Session jobs and catalog errors: bad input gets its precise error and changes nothing."""

from __future__ import annotations

import pytest

from tests.support.demo14 import DEMO14_JOB, write_demo14
from workflows.errors import InvalidInput, NotFound
from workflows.models import Job, SessionJob
from workflows.services.session_jobs import session_job_register, session_job_text

pytestmark = pytest.mark.django_db

TMP_JOB = DEMO14_JOB.replace("name: demo14", "name: tmpjob")


def register(project, text, name="tmpjob", conversation="S5"):
    return session_job_register(
        project=project,
        platform="claude",
        conversation_id=conversation,
        job_name=name,
        yaml_text=text,
    )


def test_register_stores_text_and_a_revision_no_catalog_lists(project):
    registered = register(project, TMP_JOB)
    assert registered.job_dir.endswith(".deepwork/tmp/sessions/claude/session-S5/jobs/tmpjob")
    job = Job.objects.get(source="session")
    assert (job.is_current, job.name) == (False, "tmpjob")
    assert session_job_text(project=project, conversation_id="S5", job_name="tmpjob") == TMP_JOB
    # Registering the same text again reuses the revision.
    register(project, TMP_JOB)
    assert Job.objects.filter(source="session").count() == 1
    with pytest.raises(NotFound, match="Session job 'tmpjob' not found for session 'S6'."):
        session_job_text(project=project, conversation_id="S6", job_name="tmpjob")


@pytest.mark.parametrize(
    ("name", "text", "conversation", "message"),
    [
        ("Bad-Name", TMP_JOB, "S5", "Invalid job name 'Bad-Name': must match ^[a-z][a-z0-9_]*$"),
        ("tmpjob", "a: [", "S5", "Invalid YAML syntax: "),
        ("tmpjob", TMP_JOB, "../etc", "session_id must be 1 to 100 characters"),
    ],
)
def test_refused_registrations_change_nothing(project, name, text, conversation, message):
    with pytest.raises(InvalidInput) as info:
        register(project, text, name=name, conversation=conversation)
    assert str(info.value).startswith(message)
    assert not SessionJob.objects.exists()
    assert not Job.objects.filter(source="session").exists()


def test_an_invalid_definition_is_kept_for_inspection(project):
    with pytest.raises(InvalidInput) as info:
        register(project, "name: tmpjob\nsummary: s\nstep_arguments: []\nworkflows: {}\n")
    assert str(info.value).startswith(
        "Job definition validation failed: Job definition validation failed: Validation error "
        "at workflows: {} should be non-empty\nThe definition was kept for inspection: "
        "get_session_job returns it. Fix the issues and call register_session_job again."
    )
    assert str(project.root_path) not in str(info.value)
    stored = SessionJob.objects.get()
    assert (stored.job, stored.error != "") == (None, True)


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        # Written for neither format: refused in 0.14's terms, as DeepWork 0.14.0 refuses it.
        ("name: tmpjob\nsummary: s\n", "step_arguments"),
        (
            "name: tmpjob\nsummary: s\nworkflows:\n  - {name: a, summary: b, steps: [x]}\n",
            "step_arguments",
        ),
        # Written for 0.9.1's format (which a session job may be): refused in its terms.
        (
            "name: tmpjob\nsummary: s\nversion: '1'\nsteps: []\n",
            "common_job_info_provided_to_all_steps_at_runtime",
        ),
    ],
)
def test_a_definition_is_refused_in_the_terms_of_the_format_it_was_written_for(
    project, text, missing
):
    with pytest.raises(InvalidInput) as info:
        register(project, text)
    assert str(info.value).startswith(
        "Job definition validation failed: Job definition validation failed: Validation error "
        f"at root: '{missing}' is a required property\n"
    )


def test_a_014_job_with_an_invalid_json_schema_is_a_load_error(project, catalog, demo_project):
    write_demo14(demo_project)
    path = demo_project / ".deepwork/jobs/demo14/job.yml"
    path.write_text(path.read_text().replace("type: object\n", "type: nonsense\n", 1))
    view = catalog.view()
    assert view.find("demo14") is None
    (error,) = view.errors
    assert "the JSON schema of 'data.json' is invalid" in error.error
    assert [job.name for job in view.jobs][:2] == ["demo", "nested"]


def test_a_definition_over_256_kib_is_refused_unread(project):
    # Valid YAML, but far more of it than a plan written on the fly needs.
    text = TMP_JOB + "".join(f"# padding line {i}\n" for i in range(20_000))
    assert len(text.encode()) > 256 * 1024
    with pytest.raises(InvalidInput) as info:
        register(project, text)
    assert str(info.value).startswith(
        f"The job definition is {len(text.encode())} bytes; a session job may be at most "
        "262144 bytes (256 KiB)."
    )
    assert not SessionJob.objects.exists()


def test_session_jobs_are_parsed_without_the_database(project, django_assert_num_queries):
    from pathlib import Path

    from workflows.services.session_jobs import session_job_parse

    with django_assert_num_queries(0):
        parsed = session_job_parse(
            project_root=Path(project.root_path),
            platform="claude",
            conversation_id="S5",
            job_name="tmpjob",
            yaml_text=TMP_JOB,
        )
    assert parsed.revision is not None
    assert parsed.error == ""
