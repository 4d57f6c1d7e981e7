"""``tools/list`` pages: cursors name an offset and the list they were cut from; anything else
is refused with -32602 and a reason."""

from __future__ import annotations

import base64
import json

import pytest
from mcp.shared.exceptions import MCPError

from mcp_bridge.toolsets.workflow_tools.listing import paginate
from mcp_bridge.toolsets.workflow_tools.settings import page_size_from_env

TOOLS = [{"name": f"t{index}"} for index in range(7)]


def key() -> int:
    return 42


def cursor(state: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(state).encode()).decode()


def test_pages_cover_the_list_once_in_order():
    names, next_cursor, sizes = [], "", []
    while True:
        page, next_cursor = paginate(TOOLS, next_cursor, 3, key)
        sizes.append(len(page))
        names += [tool["name"] for tool in page]
        if next_cursor is None:
            break
    assert sizes == [3, 3, 1]
    assert names == [tool["name"] for tool in TOOLS]
    assert paginate(TOOLS, None, 7, key) == (TOOLS, None)
    # No page size: everything, whatever the cursor says.
    assert paginate(TOOLS, "anything", None, key) == (TOOLS, None)


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("%%%", "Invalid cursor '%%%'"),
        (cursor([1, 2]), "Invalid cursor"),
        (cursor({"o": -3, "k": 42}), "Invalid cursor"),
        (cursor({"o": True, "k": 42}), "Invalid cursor"),
        (cursor({"o": "3", "k": 42}), "Invalid cursor"),
        (cursor({"k": 42}), "Invalid cursor"),
        (cursor({"o": 3, "k": 41}), "The tool list has changed since this cursor was given"),
    ],
)
def test_a_bad_or_old_cursor_is_refused(given, reason):
    with pytest.raises(MCPError) as refused:
        paginate(TOOLS, given, 3, key)
    assert refused.value.code == -32602
    assert refused.value.error.message.startswith(reason)


@pytest.mark.parametrize(
    ("value", "expected"), [("", None), ("0", None), ("25", 25), ("-1", None), ("x", None)]
)
def test_the_page_size_setting(monkeypatch, value, expected):
    monkeypatch.setenv("DEEPWORK_TOOLS_PAGE_SIZE", value)
    assert page_size_from_env() == expected
