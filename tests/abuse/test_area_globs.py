"""A task's ``areas`` glob is matched in time linear in a path's depth: the glob that made
``complete_task`` run for most of a minute (a backtracking regular expression trying every
way of sharing 80 folders among six ``**``) now answers at once, and rightly. The matcher
gives wcmatch's answers exactly (a differential run over thousands of random globs and
paths), and an area whose braces multiply past the limit is refused where it is given."""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

import pytest

from tracker import scope
from tracker import services as tracker
from workflows.errors import InvalidInput

PATHOLOGICAL = "**/a/**/a/**/a/**/a/**/a/**/a/c"
DEEP = 80
# Far above what the answer takes, far below the minute the old matcher needed.
HANG_BOUND = 5.0


def test_the_pathological_glob_answers_at_once_and_rightly():
    missing = "/".join(["a"] * (DEEP - 1) + ["b"])  # no 'c' at the end: every split fails
    present = "/".join(["a"] * (DEEP - 1) + ["c"])
    too_few = "/".join(["x"] * (DEEP - 6) + ["a"] * 5 + ["c"])
    started = time.monotonic()
    assert scope.scope_verify(areas=[PATHOLOGICAL], paths=[missing]).unexpected_files == [missing]
    assert scope.scope_verify(areas=[PATHOLOGICAL], paths=[present]).scope_match
    assert not scope.scope_verify(areas=[PATHOLOGICAL], paths=[too_few]).scope_match
    assert time.monotonic() - started < HANG_BOUND


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.mark.django_db(transaction=True)
def test_complete_task_with_the_pathological_area_is_not_held_up(project, agent, tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    (root / "README").write_text("r\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    workflow = tracker.tracked_workflow_start(project=project, agent=agent, name="w", objective="o")
    started = tracker.task_start(
        project=project,
        agent=agent,
        workflow_id=str(workflow.pk),
        name="t",
        goal="g",
        areas=[PATHOLOGICAL],
        root=root,
    )
    deep = root.joinpath(*["a"] * (DEEP - 1))
    deep.mkdir(parents=True)
    (deep / "b").write_text("outside\n")
    (deep / "c").write_text("inside\n")
    began = time.monotonic()
    done = tracker.task_complete(
        project=project,
        agent=agent,
        task_id=str(started.task.pk),
        status="success",
        summary="s",
        root=root,
    )
    assert time.monotonic() - began < HANG_BOUND
    assert done.verification.unexpected_files == ["/".join(["a"] * (DEEP - 1) + ["b"])]


def test_braces_that_multiply_past_the_limit_are_refused():
    bomb = "{a,b}/" * 8 + "x"  # 256 patterns
    with pytest.raises(InvalidInput) as refused:
        scope.areas_check(["src", bomb])
    assert str(refused.value) == (
        f"areas[1] {bomb!r} expands to more than 128 patterns (its braces and '|' multiply); "
        "the limit is 128"
    )
    scope.areas_check(["{a,b}/" * 7 + "x"])  # 128 is allowed
    with pytest.raises(InvalidInput, match="expands to more than 128 patterns"):
        scope.areas_check(["|".join(["a*"] * 129)])


def test_an_area_past_the_limit_already_stored_covers_nothing_and_is_reported():
    """Areas stored before the limit was set are still matched without expanding them."""
    bomb = "{a,b}/" * 10 + "x"
    verified = scope.scope_verify(areas=[bomb, "src"], paths=["src/x.py", "a/b/x"])
    assert verified.unexpected_files == ["a/b/x"]
    assert any("expands to more than 128 patterns" in w for w in verified.warnings)


# --- The same answers as wcmatch -------------------------------------------------------------

WCMATCH_FLAGS = ("GLOBSTAR", "BRACE", "DOTGLOB", "NEGATE", "SPLIT")
TOKENS = [
    "a", "b", "c", ".", "*", "**", "?", "/", "/", "/", "[ab]", "[a-b]", "[!a]", "[^b]", "[]a]",
    "[", "[/]", "{a,b}", "{a,**}", "{", "}", ",", "|", "!", "\\*", "\\\\", "\\/", ".a", "**/",
    "/**", "[[:alpha:]]", "\\[", "{1..3}", "1",
]  # fmt: skip
SEGMENTS = ["a", "b", "ab", ".a", "a.b", "1", "aa", "c", "[a]", "!a", "a|b", "*"]


def wcmatch_answer(path: str, area: str) -> bool:
    from wcmatch import glob

    flags = 0
    for name in WCMATCH_FLAGS:
        flags |= getattr(glob, name)
    return bool(glob.globmatch(path, area, flags=flags))


def a_path_it_may_match(rng: random.Random, area: str) -> str:
    """A path made from the glob's own text, so that many of the pairs do match."""
    segments = []
    for part in area.replace("\\", "").split("/"):
        if part == "**":
            segments.extend(rng.choice(SEGMENTS) for _ in range(rng.randint(0, 2)))
            continue
        text = part.replace("*", rng.choice(["", "a", "ab"])).replace("?", "b")
        for opening, closing in ("[]", "{}"):
            while opening in text and closing in text[text.index(opening) :]:
                start = text.index(opening)
                end = text.index(closing, start)
                text = text[:start] + rng.choice(["a", "b", "1"]) + text[end + 1 :]
        text = text.replace("|", "").replace("!", "")
        if text and text not in (".", ".."):
            segments.append(text)
    return "/".join(segments) or "a"


@pytest.mark.parametrize("seed", range(3))
def test_the_linear_matcher_answers_as_wcmatch(seed):
    rng = random.Random(seed)
    checked = matched = 0
    mismatches = []
    while checked < 4000:
        area = "".join(rng.choice(TOKENS) for _ in range(rng.randint(1, 7)))
        try:
            scope.areas_check([area])
        except InvalidInput:
            continue
        if not scope._is_glob(area):
            continue
        paths = [a_path_it_may_match(rng, area) for _ in range(3)]
        paths += ["/".join(rng.choice(SEGMENTS) for _ in range(rng.randint(1, 5)))]
        for path in paths:
            expected = wcmatch_answer(path, area)
            checked += 1
            matched += expected
            if scope.scope_verify(areas=[area], paths=[path]).scope_match != expected:
                mismatches.append((area, path, expected))
    assert mismatches == []
    assert matched > checked // 10  # the pairs exercise matches, not only misses
