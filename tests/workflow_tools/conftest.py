"""The REST callers of the API tests, for the published-workflows endpoints."""

from tests.api.conftest import make_caller, operator, viewer  # noqa: F401
