"""A 0.14 ``file_path`` output checked against its ``json_schema``: the file is read through
the bounded YAML loader, and the feedback names where and why it failed, quoting at most an
excerpt of the failing value."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.support.yaml_bombs import laughs
from workflows.generations.v0_14 import JSON_SCHEMA_FAILED, schema_feedback
from workflows.jobdefs.base import RtArg, RtStep


def step_with(schema: dict[str, Any]) -> RtStep:
    output = RtArg(name="f", type="file_path", description="d", required=True, json_schema=schema)
    return RtStep(
        key="only",
        name="only",
        instructions="i",
        instructions_file=None,
        sub_workflow=None,
        inputs=(),
        outputs=(output,),
    )


def feedback_for(tmp_path: Path, text: str, schema: dict[str, Any]) -> str:
    (tmp_path / "out.yml").write_text(text)
    found = schema_feedback(step=step_with(schema), outputs={"f": "out.yml"}, project_root=tmp_path)
    assert found is not None
    return found


def test_an_alias_bomb_is_refused_in_a_short_answer_at_once(tmp_path: Path) -> None:
    started = time.thread_time()
    feedback = feedback_for(tmp_path, laughs(7), {"type": "integer"})
    assert time.thread_time() - started < 1.0
    assert feedback.startswith(
        f"{JSON_SCHEMA_FAILED}\n\n- Output 'f' file 'out.yml': failed to parse: "
    )
    assert "more than 100000 nodes with aliases expanded" in feedback
    assert len(feedback) < 1000


def test_a_document_nested_too_deeply_is_said_to_be(tmp_path: Path) -> None:
    feedback = feedback_for(tmp_path, "[" * 2000 + "]" * 2000, {"type": "integer"})
    assert "failed to parse: nesting deeper than 32 levels" in feedback


def test_the_feedback_quotes_an_excerpt_of_the_failing_value_never_the_file(
    tmp_path: Path,
) -> None:
    secrets = "".join(f"user{i}: 'hash-{i:04d}-secret'\n" for i in range(5000))
    feedback = feedback_for(tmp_path, secrets, {"type": "integer"})
    assert "Validation error at root: {'user0': 'hash-0000-secret'" in feedback
    assert "does not satisfy 'type' (keyword 'type' at $)" in feedback
    assert "hash-4999" not in feedback
    assert len(feedback) < 600


def test_the_feedback_names_the_path_and_the_keyword(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
    }
    feedback = feedback_for(tmp_path, "items: [1, 2, x]\n", schema)
    assert (
        "- Output 'f' file 'out.yml': JSON schema validation failed: Validation error at "
        "items -> 2: 'x' is not of type 'integer' (keyword 'type' at $.items[2])"
    ) in feedback
