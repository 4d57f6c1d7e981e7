"""read_regular_file and friends: regular files are read, anything else is refused at once."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from tests.workflows.pipes import never_blocks_on
from workflows.files import (
    NotRegularFile,
    OutsideProject,
    open_regular_file,
    project_write_text,
    read_project_file,
    read_project_text,
    read_regular_file,
    read_regular_text,
)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


needs_proc = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc"
)


def test_a_regular_file_is_read_whole_or_up_to_the_limit(tmp_path):
    (tmp_path / "f.txt").write_bytes(b"0123456789")
    assert read_regular_file(tmp_path / "f.txt", limit=None) == b"0123456789"
    assert read_regular_file(tmp_path / "f.txt", limit=4) == b"0123"
    assert read_regular_file(tmp_path / "f.txt", limit=100) == b"0123456789"


def test_text_is_decoded_like_path_read_text(tmp_path):
    (tmp_path / "f.md").write_bytes("line one\r\nline two\rthree é\n".encode())
    assert read_regular_text(tmp_path / "f.md") == (tmp_path / "f.md").read_text(encoding="utf-8")
    assert read_regular_text(tmp_path / "f.md") == "line one\nline two\nthree é\n"
    (tmp_path / "bad.md").write_bytes(b"ok \xff")
    with pytest.raises(UnicodeDecodeError):
        read_regular_text(tmp_path / "bad.md")


@needs_proc
def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path):
    pipe = tmp_path / "out.md"
    os.mkfifo(pipe)
    before = open_descriptors()

    with never_blocks_on(pipe), pytest.raises(NotRegularFile) as info:
        read_regular_file(pipe, limit=None)

    assert str(info.value) == f"{pipe} is not a regular file (it is a named pipe)"
    assert info.value.kind == "a named pipe"
    assert isinstance(info.value, OSError)
    assert open_descriptors() == before


@needs_proc
def test_a_directory_is_refused_and_its_descriptor_closed(tmp_path):
    before = open_descriptors()
    with pytest.raises(NotRegularFile, match=r"is not a regular file \(it is a directory\)$"):
        read_regular_file(tmp_path, limit=10)
    assert open_descriptors() == before


def test_a_device_is_refused(tmp_path):
    with pytest.raises(
        NotRegularFile, match=r"^/dev/null is not a regular file \(it is a character device\)$"
    ):
        read_regular_file("/dev/null", limit=None)


def test_a_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "nope", limit=None)


def test_without_following_a_symbolic_link_is_refused(tmp_path):
    (tmp_path / "real.md").write_text("real")
    os.symlink(tmp_path / "real.md", tmp_path / "link.md")
    with open_regular_file(tmp_path / "link.md") as handle:
        assert handle.read() == b"real"
    with pytest.raises(OSError) as info:
        open_regular_file(tmp_path / "link.md", follow_symlinks=False)
    assert info.value.errno == errno.ELOOP


# --- files inside a project: the one mechanism behind every project read and write ----------


def test_project_writes_make_folders_and_replace_whole_files(tmp_path):
    written = project_write_text(root=tmp_path, relative="a/b/c.md", text="first é")
    assert written == tmp_path / "a" / "b" / "c.md"
    assert written.read_text(encoding="utf-8") == "first é"
    project_write_text(root=tmp_path, relative=str(tmp_path / "a/b/c.md"), text="second")
    assert written.read_text() == "second"
    project_write_text(root=tmp_path, relative="top.md", text="at the root")
    assert (tmp_path / "top.md").read_text() == "at the root"
    assert sorted(p.name for p in (tmp_path / "a" / "b").iterdir()) == ["c.md"]  # no temp left


def test_project_paths_follow_links_inside_the_project_only(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "alias")
    project_write_text(root=tmp_path, relative="alias/f.md", text="via the alias")
    assert (tmp_path / "real" / "f.md").read_text() == "via the alias"
    assert read_project_text(root=tmp_path, relative="alias/f.md", limit=100) == "via the alias"

    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    os.symlink(outside, tmp_path / "out")
    for relative, reason in [
        ("out/f.md", "is a symbolic link to a file outside the project root"),
        ("../f.md", "leads outside the project root with '..'"),
        ("/etc/passwd", "is an absolute path outside the project root"),
        (".", "names the project root, not a file"),
    ]:
        with pytest.raises(OutsideProject) as info:
            project_write_text(root=tmp_path, relative=relative, text="x")
        assert str(info.value) == f"'{relative}' {reason}"
        with pytest.raises(OutsideProject):
            read_project_file(root=tmp_path, relative=relative, limit=10)
    assert list(outside.iterdir()) == []


def test_a_folder_in_the_way_of_a_write_is_refused_and_no_temp_is_left(tmp_path):
    (tmp_path / "d" / "f.md").mkdir(parents=True)
    with pytest.raises(IsADirectoryError) as info:
        project_write_text(root=tmp_path, relative="d/f.md", text="x")
    assert info.value.strerror == "'f.md' is a directory; the file cannot be written there"
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["f.md"]


def test_a_file_in_the_way_of_a_folder_is_refused(tmp_path):
    (tmp_path / "d").write_text("a file, not a folder")
    with pytest.raises(NotADirectoryError):
        project_write_text(root=tmp_path, relative="d/f.md", text="x")
    assert (tmp_path / "d").read_text() == "a file, not a folder"


def test_the_scratch_folder_is_made_ignored_by_git(tmp_path):
    import subprocess

    from workflows.files import project_write_text

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    project_write_text(
        root=tmp_path, relative=".deepwork/tmp/review_instructions/a.md", text="scratch\n"
    )
    assert (tmp_path / ".deepwork/tmp/.gitignore").read_text() == "*\n"
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert status.stdout == ""


def test_an_existing_scratch_folder_is_left_as_it_is(tmp_path):
    from workflows.files import project_makedirs

    (tmp_path / ".deepwork/tmp").mkdir(parents=True)
    project_makedirs(root=tmp_path, relative=".deepwork/tmp/sessions")
    assert not (tmp_path / ".deepwork/tmp/.gitignore").exists()


def test_what_the_server_writes_into_a_project_is_private_whatever_the_umask(tmp_path):
    # A review instruction file quotes the file under review: never readable by other users,
    # even under the most common umask, and even when it replaces a file that was.
    (tmp_path / ".deepwork" / "tmp").mkdir(parents=True)
    old = tmp_path / ".deepwork" / "tmp" / "old.md"
    old.write_text("older")
    old.chmod(0o644)
    previous = os.umask(0o022)
    try:
        written = project_write_text(
            root=tmp_path, relative=".deepwork/tmp/review_instructions/x.md", text="secret"
        )
        project_write_text(root=tmp_path, relative=".deepwork/tmp/old.md", text="newer")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert stat.S_IMODE(written.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(old.stat().st_mode) == 0o600
    assert old.read_text() == "newer"
