"""Issue 9, files: every defect reproduced as it was found, and shown refused or survived.

Real symbolic links, real named pipes (``os.mkfifo``), a real unix socket and a real sparse file
(``truncate`` to 3 GB costs no disk). A call that could block runs under ``returns``: a hang
detector, not a speed check. It gives the call a generous while, then opens every pipe involved
from the other side so that a blocked ``open`` wakes up, and fails the test saying the call
blocked; the suite itself can never hang on a regression.
"""

from __future__ import annotations

import contextlib
import html as htmllib
import os
import re
import resource
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from django.test import Client

from reviews.deepreview import get_configured_reviews, get_review_instructions
from reviews.deepreview import mark_review_as_passed as mark_passed_tool
from reviews.deepreview.config import MAX_RULES_FILE_BYTES
from reviews.deepreview.instructions import HASH_BYTES, INSTRUCTIONS_DIR, STALE_AFTER
from reviews.gate import MAX_INLINE_BYTES, GateConfig, ReviewTask, build_payload
from reviews.services import review_plan
from tests.dashboard.conftest import Driver, client_for
from tests.reviews import commit_all, isolate_git, make_repo, rule, write, write_rules
from tests.support.factories import make_user
from workflows.errors import InvalidInput, JobBroken
from workflows.files import (
    FileTooLarge,
    NotRegularFile,
    OutsideProject,
    ProjectRootChanged,
    project_write_text,
    read_project_file,
    read_project_text,
)
from workflows.models import WorkflowSession
from workflows.outputs import DeclaredOutput, validate_outputs
from workflows.results import SelfReviewRequired
from workflows.services import sessions

T = TypeVar("T")

PATIENCE_SECONDS = 30.0
SPARSE_BYTES = 3 * 1024**3
PROMPT = re.compile(r'prompt: "@(\.deepwork/tmp/review_instructions/([^"]+)\.md)"')


def returns(call: Callable[[], T], *pipes: Path) -> T:
    """``call()``'s result; fails the test (after unblocking it) if the call blocked on a pipe.

    The call runs in the test's own thread (it may use the test's database connection); a
    watchdog waits ``PATIENCE_SECONDS``, then keeps opening each pipe until the call returns.
    """
    done = threading.Event()
    rescued = threading.Event()

    def watchdog() -> None:
        if done.wait(PATIENCE_SECONDS):
            return
        while not done.is_set():
            for pipe in pipes:
                # O_RDWR never waits and counts as both ends: a blocked open of either end
                # wakes up, and closing at once gives a blocked read its end-of-file.
                with contextlib.suppress(OSError):
                    os.close(os.open(pipe, os.O_RDWR | os.O_NONBLOCK))
                    rescued.set()
            done.wait(0.05)

    guard = threading.Thread(target=watchdog, daemon=True)
    guard.start()
    try:
        return call()
    finally:
        done.set()
        guard.join()
        if rescued.is_set():
            pytest.fail(f"the call blocked on {', '.join(map(str, pipes))}")


def sparse(path: Path, size: int = SPARSE_BYTES) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the project that no write may ever reach."""
    target = tmp_path / "outside" / "precious.txt"
    target.parent.mkdir()
    target.write_text("PRECIOUS, NOT THE PROJECT'S\n")
    return target


# --- 1. the file viewer follows a swapped project root -----------------------------------------


@pytest.fixture
def driver(project, agent, catalog) -> Driver:
    return Driver(project=project, agent=agent, catalog=catalog)


@pytest.fixture
def watching(db) -> Client:
    return client_for(make_user(username="wanda", groups=("Watchers",)))


def view(client: Client, sid: str, path: str) -> tuple[int, str]:
    response = client.get(f"/sessions/{sid}/files/?path={path}")
    return response.status_code, htmllib.unescape(response.content.decode())


def error_of(page: str) -> str:
    return re.search(r'data-testid="file-error"[^>]*>([^<]*)<', page).group(1)


@pytest.mark.django_db
def test_the_viewer_refuses_a_project_root_swapped_for_a_link_to_slash(watching, driver, project):
    root = Path(project.root_path)
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text("the project's own etc/passwd\n")
    session = driver.start()
    driver.finish({"notes.md": "notes.md", "extras": ["etc/passwd"]})
    assert view(watching, session.session_id, "etc/passwd")[0] == 200

    # The reproduction: mv proj proj_real && ln -s / proj
    root.rename(root.with_name("proj_real"))
    os.symlink("/", root)
    status, page = view(watching, session.session_id, "etc/passwd")

    assert status == 404
    assert error_of(page) == (
        f"The project folder {root} is no longer the directory recorded for this project "
        "(a symbolic link or another file took its place); its files are not shown"
    )
    assert "root:" not in page
    assert "the project's own" not in page


@pytest.mark.django_db
def test_the_viewer_refuses_a_link_anywhere_above_the_project_root(watching, driver, project):
    root = Path(project.root_path)
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    # One level up this time: the parent folder becomes a link to a look-alike tree.
    parent = root.parent
    decoy = parent.with_name("decoy")
    (decoy / root.name).mkdir(parents=True)
    (decoy / root.name / "notes.md").write_text("DECOY\n")
    parent.rename(parent.with_name("real_parent"))
    os.symlink(decoy, parent)

    status, page = view(watching, session.session_id, "notes.md")

    assert status == 404
    assert "is no longer the directory recorded for this project" in error_of(page)
    assert "DECOY" not in page


def test_project_reads_are_anchored_on_the_recorded_root(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "f.txt").write_text("inside\n")
    assert read_project_text(root=root, relative="f.txt", limit=100) == "inside\n"
    root.rename(tmp_path / "proj_real")
    os.symlink(tmp_path / "proj_real", root)
    with pytest.raises(ProjectRootChanged):
        read_project_file(root=root, relative="f.txt", limit=100)
    with pytest.raises(ProjectRootChanged):
        project_write_text(root=root, relative="g.txt", text="x")
    assert not (tmp_path / "proj_real" / "g.txt").exists()


# --- 2. writes through planted links and pipes -------------------------------------------------


def self_review_plan(driver: Driver) -> tuple[WorkflowSession, Path]:
    """A demo session at its reviewed step; the path the self-review instructions go to."""
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    driver.finish({"a.md": "a.md", "b.md": "b.md"})
    relative = f".deepwork/tmp/quality_review_{session.session_id}_wrap_up.md"
    return session, Path(driver.project.root_path) / relative


def plan_self_review(driver: Driver):
    checkpoint = sessions.step_checkpoint(
        project=driver.project, agent=driver.agent, outputs={"summary.md": "summary.md"}
    )
    return review_plan(checkpoint=checkpoint, gate=GateConfig(reviewer=None), override_reason=None)


@pytest.mark.django_db
def test_self_review_instructions_replace_a_planted_link_out_of_the_project(driver, outside):
    _, target = self_review_plan(driver)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, target)

    plan = returns(lambda: plan_self_review(driver))

    assert isinstance(plan.answer, SelfReviewRequired)
    assert outside.read_text() == "PRECIOUS, NOT THE PROJECT'S\n"
    assert not target.is_symlink()
    assert target.read_text().startswith("# Quality Review Instructions\n")
    assert [p.name for p in target.parent.iterdir() if p.suffix == ".tmp"] == []


@pytest.mark.django_db
def test_self_review_instructions_replace_a_planted_pipe_without_blocking(driver):
    _, target = self_review_plan(driver)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(target)

    plan = returns(lambda: plan_self_review(driver), target)

    assert isinstance(plan.answer, SelfReviewRequired)
    assert target.is_file()
    assert target.read_text().startswith("# Quality Review Instructions\n")


@pytest.mark.django_db
def test_a_scratch_folder_linked_out_of_the_project_is_refused(driver, outside):
    root = Path(driver.project.root_path)
    self_review_plan(driver)
    os.symlink(outside.parent, root / ".deepwork" / "tmp")

    with pytest.raises(InvalidInput) as info:
        returns(lambda: plan_self_review(driver))

    assert str(info.value).startswith("The self-review instructions could not be written to ")
    assert "is a symbolic link to a file outside the project root" in str(info.value)
    assert sorted(p.name for p in outside.parent.iterdir()) == ["precious.txt"]


@pytest.mark.django_db
def test_a_folder_in_place_of_the_self_review_file_is_a_clear_refusal(driver):
    _, target = self_review_plan(driver)
    target.mkdir(parents=True)

    with pytest.raises(InvalidInput) as info:
        plan_self_review(driver)

    assert str(info.value) == (
        f"The self-review instructions could not be written to "
        f"{target.relative_to(driver.project.root_path)}: '{target.name}' is a directory; "
        "the file cannot be written there"
    )


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate_git(monkeypatch, tmp_path)
    root = make_repo(tmp_path / "repo")
    write(root, "a.py", "print('a')\n")
    write_rules(root, {"py": rule(["**/*.py"], instructions="Look for bugs.")})
    commit_all(root, "initial")
    return root


def test_review_instruction_files_replace_planted_links_and_pipes(repo, outside):
    [(first, review_id)] = PROMPT.findall(
        get_review_instructions(project_root=repo, files=["a.py"], platform=None)
    )
    (repo / first).unlink()
    os.symlink(outside, repo / first)

    output = returns(
        lambda: get_review_instructions(project_root=repo, files=["a.py"], platform=None)
    )

    assert PROMPT.findall(output) == [(first, review_id)]
    assert outside.read_text() == "PRECIOUS, NOT THE PROJECT'S\n"
    assert (repo / first).is_file()
    assert not (repo / first).is_symlink()

    (repo / first).unlink()
    os.mkfifo(repo / first)
    output = returns(
        lambda: get_review_instructions(project_root=repo, files=["a.py"], platform=None),
        repo / first,
    )
    assert PROMPT.findall(output) == [(first, review_id)]
    assert (repo / first).is_file()
    assert f'`review_id`: `"{review_id}"`' in (repo / first).read_text()


def test_the_lock_and_pass_marker_are_never_written_through_a_link_or_pipe(repo, outside):
    folder = repo / INSTRUCTIONS_DIR
    folder.mkdir(parents=True)
    os.symlink(outside, folder / ".lock")

    output = returns(
        lambda: get_review_instructions(project_root=repo, files=["a.py"], platform=None)
    )
    assert output.startswith("Review error: Error writing instruction files: ")
    assert outside.read_text() == "PRECIOUS, NOT THE PROJECT'S\n"

    os.mkfifo(folder / "py--a.py--0123456789ab.passed")
    os.symlink(outside, folder / "py--a.py--ba9876543210.passed")
    for review_id in ("py--a.py--0123456789ab", "py--a.py--ba9876543210"):
        answer = returns(
            lambda review_id=review_id: mark_passed_tool(project_root=repo, review_id=review_id),
            folder / f"{review_id}.passed",
        )
        assert answer == f"Review '{review_id}' marked as passed."
        assert (folder / f"{review_id}.passed").is_file()
    assert outside.read_text() == "PRECIOUS, NOT THE PROJECT'S\n"


def test_the_stale_sweep_never_deletes_through_a_swapped_folder(repo, outside):
    old = 1_000_000_000  # far more than STALE_AFTER ago
    assert old < __import__("time").time() - STALE_AFTER
    victim = outside.parent / "someone-elses.md"
    victim.write_text("not ours\n")
    os.utime(victim, (old, old))
    (repo / ".deepwork" / "tmp").mkdir(parents=True)
    os.symlink(outside.parent, repo / INSTRUCTIONS_DIR)

    output = get_review_instructions(project_root=repo, files=["a.py"], platform=None)

    assert output.startswith("Review error: Error writing instruction files: ")
    assert "outside the project root" in output
    assert victim.read_text() == "not ours\n"
    assert sorted(p.name for p in outside.parent.iterdir()) == ["precious.txt", "someone-elses.md"]


# --- 6. review instructions read pipes and whole files -----------------------------------------


def test_get_review_instructions_on_a_pipe_returns(repo):
    os.mkfifo(repo / "b.py")

    output = returns(
        lambda: get_review_instructions(project_root=repo, files=["b.py"], platform=None),
        repo / "b.py",
    )

    # The pipe cannot be read, so its content hash is "unreadable"; it is still listed for review.
    [(instruction_file, _)] = PROMPT.findall(output)
    assert "- @b.py\n" in (repo / instruction_file).read_text()


def test_get_review_instructions_on_a_3_gb_sparse_file_reads_a_bounded_prefix(repo):
    big = sparse(repo / "big.py")
    before = peak_rss_bytes()

    output = returns(
        lambda: get_review_instructions(project_root=repo, files=["big.py"], platform=None)
    )

    [(_, first_id)] = PROMPT.findall(output)
    # Bounded memory: the old code held the whole file twice (6 GB). Peak RSS only ever grows,
    # so a whole read would show here however briefly it lasted.
    assert peak_rss_bytes() - before < 256 * 1024 * 1024
    # Past the hashed prefix, size and modification time stand for the content: an edit there
    # still re-opens the review.
    with open(big, "r+b") as handle:
        handle.seek(HASH_BYTES + 10)
        handle.write(b"edited far past the prefix")
    os.utime(big, ns=(os.stat(big).st_atime_ns, os.stat(big).st_mtime_ns + 1_000_000_000))
    [(_, second_id)] = PROMPT.findall(
        get_review_instructions(project_root=repo, files=["big.py"], platform=None)
    )
    assert second_id != first_id


def test_read_project_file_returns_a_capped_prefix_of_a_sparse_file(tmp_path):
    sparse(tmp_path / "big.bin")

    read = returns(lambda: read_project_file(root=tmp_path, relative="big.bin", limit=4096))

    assert (len(read.data), read.size, read.truncated) == (4096, SPARSE_BYTES, True)
    with pytest.raises(FileTooLarge) as info:
        read_project_text(root=tmp_path, relative="big.bin", limit=4096)
    assert str(info.value) == f"'big.bin' is {SPARSE_BYTES} bytes, over the limit of 4096 bytes"


def test_a_review_payload_of_a_sparse_file_is_a_note_not_the_file(tmp_path):
    sparse(tmp_path / "out.md")
    task = ReviewTask(
        step_id="s",
        run_each="step",
        criteria={"c": "d"},
        guidance=None,
        outputs={"out": "out.md"},
        target_file=None,
    )
    payload = returns(
        lambda: build_payload(
            task=task, project_root=tmp_path, max_inline_files=5, notes=None, include_notes=True
        )
    )
    assert (
        f"[Large file ({SPARSE_BYTES} bytes) — not included in review. "
        f"Read from: {tmp_path / 'out.md'}]"
    ) in payload
    assert len(payload) < MAX_INLINE_BYTES


def test_a_review_payload_never_follows_an_output_swapped_for_a_link_out(tmp_path, outside):
    root = tmp_path / "proj"
    root.mkdir()
    os.symlink(outside, root / "out.md")
    task = ReviewTask(
        step_id="s",
        run_each="step",
        criteria={"c": "d"},
        guidance=None,
        outputs={"out": "out.md"},
        target_file=None,
    )
    payload = build_payload(
        task=task, project_root=root, max_inline_files=5, notes=None, include_notes=True
    )
    assert "PRECIOUS" not in payload
    assert (
        "[Error reading file: 'out.md' is a symbolic link to a file outside the project root]"
        in payload
    )


def rules_with_instructions_file(root: Path, name: str = "review.md") -> None:
    write_rules(root, {"py": rule(["**/*.py"], instructions={"file": name})})


def test_a_deepreview_instructions_file_that_is_a_pipe_does_not_hang_configured_reviews(repo):
    rules_with_instructions_file(repo)
    os.mkfifo(repo / "review.md")

    listing = returns(
        lambda: get_configured_reviews(project_root=repo, only_rules_matching_files=None),
        repo / "review.md",
    )

    assert listing == [
        {
            "name": f"PARSE_ERROR:{repo / '.deepreview'}",
            "description": (
                f"Failed to read instructions file {repo / 'review.md'}: it is not a regular "
                "file (it is a named pipe)"
            ),
            "defining_file": str(repo / ".deepreview"),
        }
    ]


def test_a_sparse_deepreview_instructions_file_is_refused_unread(repo):
    rules_with_instructions_file(repo)
    sparse(repo / "review.md")

    [entry] = returns(
        lambda: get_configured_reviews(project_root=repo, only_rules_matching_files=None)
    )

    assert entry["description"] == (
        f"Failed to read instructions file {repo / 'review.md'}: it is {SPARSE_BYTES} bytes, "
        f"over the limit of {MAX_RULES_FILE_BYTES} bytes for review rule files"
    )


@pytest.mark.parametrize("kind", ["pipe", "sparse", "link out"])
def test_a_hostile_deepreview_file_is_a_parse_error_not_a_hang(repo, outside, kind):
    sub = repo / "sub"
    sub.mkdir()
    if kind == "pipe":
        os.mkfifo(sub / ".deepreview")
    elif kind == "sparse":
        sparse(sub / ".deepreview")
    else:
        outside.write_text("py:\n  description: stolen\n")
        os.symlink(outside, sub / ".deepreview")

    listing = returns(
        lambda: get_configured_reviews(project_root=repo, only_rules_matching_files=None),
        sub / ".deepreview",
    )

    # A pipe is not a file to discovery, so it is skipped; the others are reported.
    names = [entry["name"] for entry in listing]
    if kind == "pipe":
        assert names == ["py"]
        return
    assert names == ["py", f"PARSE_ERROR:{sub / '.deepreview'}"]
    reason = (
        f"it is {SPARSE_BYTES} bytes, over the limit of {MAX_RULES_FILE_BYTES} bytes for review "
        "rule files"
        if kind == "sparse"
        else "it is a symbolic link to a file outside the project root"
    )
    assert listing[1]["description"] == f"Failed to parse {sub / '.deepreview'}: {reason}"
    assert "stolen" not in str(listing)


def test_an_instructions_file_outside_the_project_is_refused(repo, outside):
    write_rules(repo, {"py": rule(["**/*.py"], instructions={"file": "../outside/precious.txt"})})

    [entry] = get_configured_reviews(project_root=repo, only_rules_matching_files=None)

    assert entry["description"] == (
        f"Failed to read instructions file {repo / '../outside/precious.txt'}: "
        "it is outside the project root"
    )


# --- 7. a pipe, socket or device handed in as an output ----------------------------------------


def test_a_pipe_socket_or_device_handed_in_as_an_output_is_refused_like_a_folder(tmp_path):
    os.mkfifo(tmp_path / "pipe.md")
    (tmp_path / "folder.md").mkdir()
    listener = socket.socket(socket.AF_UNIX)
    os.chdir(tmp_path)  # a short relative address: unix socket paths are limited to ~100 bytes
    listener.bind("sock.md")
    os.symlink("/dev/null", tmp_path / "null.md")
    declared = [DeclaredOutput("out", "file", True)]
    try:
        cases = {
            "pipe.md": "a named pipe",
            "folder.md": "a directory",
            "sock.md": "a socket",
        }
        for path, kind in cases.items():
            with pytest.raises(InvalidInput) as info:
                returns(
                    lambda path=path: validate_outputs(
                        declared=declared, submitted={"out": path}, project_root=tmp_path
                    ),
                    tmp_path / "pipe.md",
                )
            assert str(info.value) == f"Output 'out': '{path}' is {kind}; outputs must be files"
        # A link to a device leaves the project root, which is refused before its kind matters.
        with pytest.raises(InvalidInput, match="symbolic link to a file outside the project root"):
            validate_outputs(declared=declared, submitted={"out": "null.md"}, project_root=tmp_path)
    finally:
        listener.close()


def test_the_readers_refuse_a_pipe_at_once(tmp_path):
    os.mkfifo(tmp_path / "p")
    with pytest.raises(NotRegularFile):
        returns(lambda: read_project_file(root=tmp_path, relative="p", limit=10), tmp_path / "p")
    with pytest.raises(OutsideProject):
        read_project_file(root=tmp_path, relative="../p", limit=10)


def test_a_sparse_step_instructions_file_breaks_the_job_unread(project, agent, catalog):
    instructions = Path(project.root_path) / ".deepwork/jobs/demo/steps/gather.md"
    instructions.unlink()
    sparse(instructions)
    before = peak_rss_bytes()

    with pytest.raises(JobBroken) as refused:
        sessions.session_start(
            project=project,
            agent=agent,
            catalog=catalog.view(),
            job_name="demo",
            workflow_name="main",
            goal="g",
        )

    assert str(refused.value) == (
        f"Instructions file steps/gather.md is {SPARSE_BYTES:,} bytes; the limit is "
        f"{sessions.INSTRUCTIONS_MAX_BYTES:,}"
    )
    assert peak_rss_bytes() - before < 256 * 1024**2
    assert not WorkflowSession.objects.exists()
