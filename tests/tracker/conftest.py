"""The tracker's tests take the REST callers and the dashboard's people from the interface
folders' fixtures, as the tests of those interfaces do."""

from tests.api.conftest import make_caller, operator, viewer  # noqa: F401
from tests.dashboard.conftest import decider, deciding, nobody, watcher, watching  # noqa: F401
