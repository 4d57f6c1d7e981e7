"""The one bounded YAML loader: bombs, deep nesting and wide documents are refused before
anything is built, quickly, with libyaml and without it, in the same words."""

from __future__ import annotations

import time

import pytest
import yaml

from tests.support.yaml_bombs import laughs
from workflows import yaml_bounded
from workflows.yaml_bounded import LimitExceeded

MB = 1024 * 1024


HOSTILE = {
    "alias bomb": (laughs(9), "more than 100000 nodes with aliases expanded"),
    "2,000 brackets": ("[" * 2000 + "]" * 2000, "nesting deeper than 32 levels"),
    "100,000 brackets": ("[" * 100_000 + "]" * 100_000, "nesting deeper than 32 levels"),
    "2,000 indents": (
        "".join("  " * i + "a:\n" for i in range(2000)),
        "nesting deeper than 32 levels",
    ),
    "1 MB of keys": (
        "".join(f"k{i}: [1, 2, 3]\n" for i in range(80_000))[:MB],
        "more than 100000 nodes with aliases expanded",
    ),
    "1 MB flat list": ("[" + "1," * (MB // 2 - 2) + "1]", "more than 100000 nodes"),
    "1 MB of anchors": (
        "".join(f"a{i}: &x{i} v\nb{i}: *x{i}\n" for i in range(60_000))[:MB],
        "more than 100000 nodes",
    ),
    "alias of its own node": ("a: &x [1, *x]\n", "found alias 'x' inside the node it names"),
}


@pytest.fixture(params=["libyaml", "pure Python"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "pure Python":
        monkeypatch.setattr(yaml_bounded, "HAVE_LIBYAML", False)
    elif not yaml_bounded.HAVE_LIBYAML:
        pytest.skip("PyYAML has no libyaml here")
    return str(request.param)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_documents_are_refused_with_the_limit_they_break(parser: str, name: str) -> None:
    text, expected = HOSTILE[name]
    if parser == "pure Python" and len(text) > 300_000:
        pytest.skip("the pure-Python parser is the fallback; its speed is not the point")
    with pytest.raises(LimitExceeded) as info:
        yaml_bounded.load(text, name="hostile.yml")
    assert expected in str(info.value)
    assert len(str(info.value)) < 1000


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_megabyte_is_refused_within_a_second(name: str) -> None:
    if not yaml_bounded.HAVE_LIBYAML:
        pytest.skip("needs libyaml")
    text, _ = HOSTILE[name]
    # This thread's CPU time: what the document costs, whatever else the machine is doing.
    started = time.thread_time()
    with pytest.raises(LimitExceeded):
        yaml_bounded.load(text)
    assert time.thread_time() - started < 1.0


def test_deep_nesting_never_escapes_as_recursion_error(parser: str) -> None:
    for text in ("[" * 2000, "{a: " * 2000, "- " * 2000 + "x"):
        with pytest.raises(yaml.YAMLError):
            yaml_bounded.load(text)


DOCUMENTS = [
    "name: x\nlist: [1, 2.5, true, null, ~, '3']\nwhen: 2024-01-02\n",
    "base: &b {a: 1, b: 2}\nmerged:\n  <<: *b\n  c: 3\nagain: *b\n",
    "- &s text\n- *s\n- !!str 12\n- !!binary aGVsbG8=\n",
    "",
    "# only a comment\n",
    "plain\n",
]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_libyaml_and_pure_python_build_the_same_data(text: str) -> None:
    assert yaml_bounded.load(text) == yaml.safe_load(text)


SYNTAX_ERRORS = [
    "name: [unclosed\n",
    "name: x\n  summary: y\n",
    "name: x\n\tsummary: y\n",
    "a: &x 1\nb: *y\n",
    "a: 1\na: {b\n",
    "a: &x 1\nb: &x 2\n",
]


@pytest.mark.parametrize("text", SYNTAX_ERRORS)
@pytest.mark.parametrize("name", [None, "job.yml"])
def test_errors_of_a_small_document_are_worded_as_pure_python_words_them(
    text: str, name: str | None
) -> None:
    stream = text if name is None else _named(text, name)
    with pytest.raises(yaml.YAMLError) as expected:
        yaml.safe_load(stream)
    with pytest.raises(yaml.YAMLError) as got:
        yaml_bounded.load(text, name=name)
    assert str(got.value) == str(expected.value)


def _named(text: str, name: str) -> object:
    import io

    stream = io.StringIO(text)
    stream.name = name
    return stream


def test_a_lone_surrogate_is_refused_in_the_readers_words() -> None:
    with pytest.raises(yaml.reader.ReaderError) as info:
        yaml_bounded.load("a: \udc80\n")
    assert "unacceptable character #xdc80" in str(info.value)


def test_limits_are_the_callers() -> None:
    text = "a: " + "x" * 2000 + "\n"
    with pytest.raises(LimitExceeded, match="more than 1000 characters"):
        yaml_bounded.load(text, limits=yaml_bounded.Limits(chars=1000))
    assert yaml_bounded.load(text) == {"a": "x" * 2000}
