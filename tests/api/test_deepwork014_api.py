"""0.14 sessions over the REST API: the generation, the stack's name and the inputs."""

from __future__ import annotations

import pytest

from tests.dashboard.test_deepwork014_pages import reviewed_014

pytestmark = pytest.mark.django_db


@pytest.fixture
def session014(project, demo_project, catalog):
    return reviewed_014(project, demo_project, catalog)


def test_rest_api_shows_the_generation_and_inputs(viewer, session014):
    detail = viewer.get(f"/api/sessions/{session014.session_id}").json()
    assert (detail["generation"], detail["conversation_id"], detail["inputs"]) == (
        "0.14",
        "conv-1",
        {"topic": "cats"},
    )
    assert detail["runs"][0]["input_values"] == {"topic": "cats"}
