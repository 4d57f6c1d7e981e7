"""Filters take any text a person or a crawler types: out-of-range numbers are errors, not 500s."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

TOO_BIG = str(2**63)


@pytest.mark.parametrize(
    "query",
    [f"project={TOO_BIG}", f"before={TOO_BIG}", f"after={TOO_BIG}", "project=99999999999999999999"],
)
def test_an_id_beyond_64_bits_is_a_filter_error(watching, query):
    response = watching.get(f"/sessions/?{query}")
    assert response.status_code == 200
    assert 'data-testid="filter-errors"' in response.content.decode()


def test_the_jobs_filter_refuses_an_id_beyond_64_bits(watching):
    response = watching.get(f"/jobs/?project={TOO_BIG}")
    assert response.status_code in (200, 400)
