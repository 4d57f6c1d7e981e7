"""The interfaces (REST, hosted and stdio MCP, the dashboard) never import each other: what
they share (who a token is, what it may do) lives below them, in ``accounts`` and the engine,
so a rule decided once holds on every interface."""

from __future__ import annotations

import pytest

from tests.architecture.test_layers import INTERFACES, offending, sources


@pytest.mark.parametrize("interface", INTERFACES)
def test_an_interface_imports_no_other_interface(interface):
    others = tuple(name for name in INTERFACES if name != interface)
    assert offending(sources(interface), others) == []


def test_accounts_imports_no_interface():
    assert offending(sources("accounts"), INTERFACES) == []


def test_a_planted_import_of_another_interface_is_found(tmp_path):
    """The checks above would pass on an empty scan: a hosted module importing the REST app's
    tokens, as it once did, is reported."""
    planted = tmp_path / "hosted.py"
    planted.write_text("def later():\n    from api.auth import TokenAuth\n")
    found = offending([planted], tuple(n for n in INTERFACES if n != "mcp_bridge"), tmp_path)
    assert found == ["hosted.py: api.auth", "hosted.py: api.auth.TokenAuth"]
