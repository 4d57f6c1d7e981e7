"""Fixtures of the MCP toolset tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.demo14 import write_demo14


@pytest.fixture
def both_project(demo_project: Path) -> Path:
    """The 0.9.1 demo jobs and the 0.14 demo14 job in one project."""
    write_demo14(demo_project)
    (demo_project / "verdict.txt").write_text("ok\n")
    return demo_project
