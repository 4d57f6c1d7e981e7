"""``mcpserve --workflow-source`` is refused, naming why, before anything starts."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--workflow-source", "http://central/api/projects/1/published-workflows"],
            "--workflow-source needs the workflow-tools toolset (--toolsets)",
        ),
        (
            ["--toolsets", "workflow-tools", "--workflow-source", "file:///etc/passwd"],
            "--workflow-source must be an http(s) URL: file:///etc/passwd",
        ),
    ],
)
def test_bad_workflow_sources_are_refused(tmp_path, args, message):
    with pytest.raises(CommandError) as refused:
        call_command("mcpserve", "--path", str(tmp_path), *args)
    assert str(refused.value) == message
    assert not (tmp_path / ".deepwork").exists()
