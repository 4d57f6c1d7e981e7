"""Include/exclude globs from settings: the environment's variables and the project's
``.deepwork/workflow_tools.yml`` (read again when it changes; a broken one keeps its last
rules), and how they combine with the admin's rules."""

from __future__ import annotations

import logging
import os

import pytest

from workflow_tools.selectors import (
    FileFilters,
    FilterRule,
    FilterSyntaxError,
    env_filters,
    filters_pass,
    parse_filter_globs,
)
from workflow_tools.sources import PublishedWorkflow


def rule(action: str, field: str, pattern: str) -> FilterRule:
    return FilterRule(action, field, pattern)


def workflow(wid: str, name: str, category: str) -> PublishedWorkflow:
    return PublishedWorkflow(
        id=wid,
        name=name,
        description="d",
        category=category,
        version="1",
        input_schema={"type": "object"},
        execution_type="async",
        metadata={},
    )


def test_globs_are_on_the_names_unless_a_field_is_named():
    assert parse_filter_globs("include", " Release* , category:DeepWork/*,,name:x:y ", "V") == (
        rule("include", "name", "release*"),
        rule("include", "category", "deepwork/*"),
        rule("include", "name", "x:y"),
    )
    # A colon after anything but a field name is part of the glob.
    assert parse_filter_globs("exclude", ["team:a*"], "V") == (rule("exclude", "name", "team:a*"),)
    assert parse_filter_globs("exclude", None, "V") == ()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (7, "exclude: expected a comma-separated string or a list of globs, got int"),
        (["a", 3], "exclude[1]: a glob must be a string, got int"),
        (["a", " "], "exclude[1]: an empty glob"),
        ("category:", "exclude: 'category:' has no glob after its field"),
        ("x" * 256, "exclude: the glob 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'... is over 255"),
    ],
)
def test_bad_globs_are_refused_precisely(value, message):
    with pytest.raises(FilterSyntaxError) as refused:
        parse_filter_globs("exclude", value, "exclude")
    assert str(refused.value).startswith(message)


def test_a_bad_variable_is_ignored_whole_and_logged(caplog):
    environ = {"INC": "a*,category:", "EXC": "*draft"}
    with caplog.at_level(logging.WARNING, logger="deepwork.workflow_tools"):
        rules = env_filters(environ, "INC", "EXC")
    assert rules == (rule("exclude", "name", "*draft"),)
    assert "INC is ignored: INC: 'category:' has no glob after its field" in caplog.text


def test_rules_from_every_place_combine():
    # Includes from anywhere widen what is listed; an exclude from anywhere hides.
    rules = (
        rule("include", "name", "release*"),  # the admin's
        rule("include", "category", "ops/*"),  # the environment's
        rule("exclude", "name", "*_old"),  # the file's
    )
    assert filters_pass(rules, tool_name="workflow_release", workflow=workflow("r", "release", "x"))
    assert filters_pass(rules, tool_name="workflow_deploy", workflow=workflow("d", "d", "ops/k8s"))
    assert not filters_pass(rules, tool_name="workflow_other", workflow=workflow("o", "o", "x"))
    assert not filters_pass(
        rules, tool_name="workflow_release_old", workflow=workflow("ro", "release_old", "x")
    )


def test_the_file_is_read_again_when_it_changes_and_a_broken_one_keeps_its_rules(tmp_path, caplog):
    path = tmp_path / "workflow_tools.yml"
    filters = FileFilters(path)
    assert filters.rules() == ()
    path.write_text('include: ["release*", "category:ops/*"]\nexclude: "*_old"\n')
    good = (
        rule("include", "name", "release*"),
        rule("include", "category", "ops/*"),
        rule("exclude", "name", "*_old"),
    )
    assert filters.rules() == good
    with caplog.at_level(logging.WARNING, logger="deepwork.workflow_tools"):
        path.write_text("includes: [a]\n")
        assert filters.rules() == good
        assert "unknown key(s) includes; use include and/or exclude" in caplog.text
        path.write_text("- a\n- b\n")
        assert filters.rules() == good
        assert "expected a mapping with include and/or exclude" in caplog.text
        path.write_bytes(b"include: \xff\n")
        assert filters.rules() == good
    path.write_text("exclude: [b*]\n")
    os.utime(path, ns=(10**18, 10**18))
    assert filters.rules() == (rule("exclude", "name", "b*"),)
    # An edit of the same size is told apart by its modification time.
    path.write_text("exclude: [c*]\n")
    os.utime(path, ns=(2 * 10**18, 2 * 10**18))
    assert filters.rules() == (rule("exclude", "name", "c*"),)
    path.write_text("")
    assert filters.rules() == ()
    path.unlink()
    assert filters.rules() == ()
    # A named pipe is never opened (it would block the listing).
    path.write_text("exclude: [d*]\n")
    assert filters.rules() == (rule("exclude", "name", "d*"),)
    path.unlink()
    os.mkfifo(path)
    with caplog.at_level(logging.WARNING, logger="deepwork.workflow_tools"):
        assert filters.rules() == (rule("exclude", "name", "d*"),)
    assert "is not a regular file; its last rules still apply" in caplog.text
