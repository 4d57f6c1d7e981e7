"""The file viewer never blocks on a pipe, answers 404 for a folder, and cannot be raced out of
the project root by swapping a directory for a symbolic link after the path was checked."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path, PurePosixPath

import pytest

from dashboard import selectors
from tests.dashboard.test_files import error_of, view
from tests.workflows.pipes import never_blocks_on
from workflows.files import NotRegularFile

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(project) -> Path:
    return Path(project.root_path)


def test_an_output_that_is_a_named_pipe_is_a_404_at_once(watching, driver, root):
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    # A pipe is refused at hand-in; one put in the file's place afterwards reaches the viewer.
    (root / "notes.md").unlink()
    os.mkfifo(root / "notes.md")

    with never_blocks_on(root / "notes.md"):
        response, page = view(watching, session.session_id, "notes.md")

    assert response.status_code == 404
    assert (
        error_of(page) == "'notes.md' is not a regular file (it is a named pipe); it is not shown"
    )
    # The web process is still serving: the next page comes back normally.
    assert watching.get(f"/sessions/{session.session_id}/").status_code == 200


def test_an_output_replaced_by_a_folder_is_a_404(watching, driver, root):
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    (root / "notes.md").unlink()
    (root / "notes.md").mkdir()
    (root / "notes.md" / "inner.txt").write_text("INNER")

    response, page = view(watching, session.session_id, "notes.md")

    assert response.status_code == 404
    assert error_of(page) == "'notes.md' is not a regular file (it is a directory); it is not shown"
    assert "INNER" not in page


def _swap_for_link(folder: Path, target: Path) -> None:
    shutil.rmtree(folder)
    os.symlink(target, folder)


@pytest.fixture
def outside(root) -> Path:
    outside = root.parent / "elsewhere"
    outside.mkdir()
    (outside / "deep.md").write_text("TOP SECRET")
    return outside


def test_a_folder_swapped_for_a_link_after_the_check_is_not_followed(
    watching, driver, root, outside, monkeypatch
):
    (root / "sub").mkdir()
    (root / "sub" / "deep.md").write_text("inside")
    session = driver.start()
    driver.finish({"notes.md": "notes.md", "extras": ["sub/deep.md"]})
    target = root / "sub" / "deep.md"
    real_resolve = Path.resolve

    def resolve_then_swap(self, strict=False):
        # The attacker wins the race: ``sub`` becomes a link out right after the viewer
        # resolved the path and found it inside the project.
        resolved = real_resolve(self, strict)
        if self == target and (root / "sub").is_dir() and not (root / "sub").is_symlink():
            _swap_for_link(root / "sub", outside)
        return resolved

    monkeypatch.setattr(Path, "resolve", resolve_then_swap)

    response, page = view(watching, session.session_id, "sub/deep.md")

    assert (root / "sub").is_symlink()  # the swap did happen between check and open
    assert response.status_code == 404
    assert error_of(page) == (
        "'sub/deep.md' changed while it was being opened (a symbolic link or a file took the "
        "place of part of its path); it is not shown"
    )
    assert "TOP SECRET" not in page


@pytest.mark.parametrize("depth", [1, 3])
def test_open_inside_refuses_a_link_anywhere_on_the_way(tmp_path, outside, depth):
    root = tmp_path / "root"
    folders = [f"d{i}" for i in range(depth)]
    (root.joinpath(*folders)).mkdir(parents=True)
    (root.joinpath(*folders) / "deep.md").write_text("inside")
    relative = PurePosixPath(*folders, "deep.md")
    with selectors.open_inside(root, relative) as handle:
        assert handle.read() == b"inside"

    # Each folder on the way in turn, and the file itself, replaced by a link out.
    for i in range(depth):
        swapped = root.joinpath(*folders[: i + 1])
        kept = tmp_path / "kept"
        swapped.rename(kept)
        os.symlink(outside if i == depth - 1 else tmp_path, swapped)
        with pytest.raises(OSError) as info:
            selectors.open_inside(root, relative)
        assert info.value.errno == errno.ENOTDIR
        swapped.unlink()
        kept.rename(swapped)
    (root.joinpath(*folders) / "deep.md").unlink()
    os.symlink(outside / "deep.md", root.joinpath(*folders) / "deep.md")
    with pytest.raises(OSError) as info:
        selectors.open_inside(root, relative)
    assert info.value.errno == errno.ELOOP


def test_open_inside_refuses_a_pipe_without_blocking(tmp_path):
    (tmp_path / "sub").mkdir()
    os.mkfifo(tmp_path / "sub" / "p")
    with never_blocks_on(tmp_path / "sub" / "p"), pytest.raises(NotRegularFile):
        selectors.open_inside(tmp_path, PurePosixPath("sub/p"))


def test_a_link_to_a_folder_inside_the_project_still_works(watching, driver, root):
    (root / "real").mkdir()
    (root / "real" / "page.md").write_text("REAL PAGE")
    os.symlink(root / "real", root / "alias")
    session = driver.start()
    driver.finish({"notes.md": "notes.md", "extras": ["alias/page.md"]})

    response, page = view(watching, session.session_id, "alias/page.md")

    assert response.status_code == 200
    assert "REAL PAGE" in page


def test_after_the_project_moved_behind_a_link_its_outputs_are_listed_but_not_served(
    watching, driver, root
):
    """The session page still links the outputs (absolute hand-ins included), but the viewer
    refuses: a link in place of the recorded root is exactly the swap of issue 9's defect 1,
    whatever it points at, so the viewer never follows it."""
    session = driver.start()
    driver.finish({"notes.md": str(root / "notes.md"), "extras": [str(root / "extra1.md")]})
    # The folder moves and a link takes its place: the recorded root now contains a symlink.
    root.rename(root.parent / "moved")
    os.symlink(root.parent / "moved", root)

    page = watching.get(f"/sessions/{session.session_id}/").content.decode()
    links = selectors.session_detail(session_id=session.session_id).runs[0].outputs

    assert [link.view_path for link in links] == ["notes.md", "extra1.md"]
    assert 'data-path="notes.md"' in page
    for path in ("notes.md", "extra1.md"):
        response, shown = view(watching, session.session_id, path)
        assert response.status_code == 404
        assert error_of(shown) == (
            f"The project folder {root} is no longer the directory recorded for this project "
            "(a symbolic link or another file took its place); its files are not shown"
        )
        assert f"content of {path}" not in shown
