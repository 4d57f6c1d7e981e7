"""Filters take any text a person or a crawler types: bad values are shown as errors and left
out, never a 500 and never silently taken for something else."""

from __future__ import annotations

import html as html_lib
import re

import pytest

from tests.dashboard.test_pages import attr, tagged

pytestmark = pytest.mark.django_db

TOO_BIG = str(2**63)


def filter_errors(html: str) -> str:
    [errors] = re.findall(r'<ul[^>]*data-testid="filter-errors".*?</ul>', html, re.S)
    return html_lib.unescape(errors)


@pytest.mark.parametrize(
    "query",
    [f"project={TOO_BIG}", f"before={TOO_BIG}", f"after={TOO_BIG}", "project=99999999999999999999"],
)
def test_an_id_beyond_64_bits_is_a_filter_error(watching, query):
    response = watching.get(f"/sessions/?{query}")
    assert response.status_code == 200
    assert 'data-testid="filter-errors"' in response.content.decode()


@pytest.mark.parametrize(
    ("cursor", "name"),
    [("42", "before"), ("1.2.3", "after"), ("x" * 50, "before"), ("12.", "after")],
)
def test_a_page_cursor_the_pager_never_handed_out_is_a_filter_error(watching, driver, cursor, name):
    driver.start()
    response = watching.get(f"/sessions/?{name}={cursor}")
    assert response.status_code == 200
    assert f"{name}:" in filter_errors(response.content.decode())
    # Left out: the first page is shown.
    assert len(tagged(response.content.decode(), "session-row")) == 1


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (TOO_BIG, "project: Ensure this value is less than or equal to"),
        ("seven", "project: Enter a whole number."),
        ("0", "project: Ensure this value is greater than or equal to 1."),
        ("424242", "project: Project 424242 not found"),
    ],
)
def test_the_jobs_filter_refuses_a_bad_project(watching, project, catalog, value, message):
    catalog.view()
    response = watching.get(f"/jobs/?project={value}")
    page = response.content.decode()
    assert response.status_code == 200
    assert message in filter_errors(page)
    # The bad filter is left out: every project's catalog is listed, and the page listens to
    # every project's events.
    shown = [attr(t, "data-project-id") for t in tagged(page, "project-catalog")]
    assert shown == [str(project.pk)]
    assert "data-live-project" not in page


def test_the_jobs_filter_accepts_a_known_project(watching, project, catalog):
    catalog.view()
    page = watching.get(f"/jobs/?project={project.pk}").content.decode()
    assert 'data-testid="filter-errors"' not in page
    assert [attr(t, "data-project-id") for t in tagged(page, "project-catalog")] == [
        str(project.pk)
    ]
