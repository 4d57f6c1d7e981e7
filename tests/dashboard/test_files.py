"""The file viewer shows a session's recorded outputs inside the project, and nothing else."""

from __future__ import annotations

import html as htmllib
import os
import re
from pathlib import Path

import pytest

from dashboard import selectors

pytestmark = pytest.mark.django_db


def view(client, sid: str, path: str | None):
    query = "" if path is None else f"?path={path}"
    response = client.get(f"/sessions/{sid}/files/{query}")
    return response, htmllib.unescape(response.content.decode())


def error_of(page: str) -> str:
    return re.search(r'data-testid="file-error"[^>]*>([^<]*)<', page).group(1)


@pytest.fixture
def root(project) -> Path:
    return Path(project.root_path)


def test_an_output_is_shown(watching, driver, root):
    session = driver.start()
    driver.finish({"notes.md": "notes.md", "extras": ["extra1.md"]})
    response, page = view(watching, session.session_id, "notes.md")
    assert response.status_code == 200
    assert re.search(r'data-testid="file-content">content of notes.md\n</pre>', page)
    assert 'data-testid="file-truncated"' not in page
    assert view(watching, session.session_id, "extra1.md")[0].status_code == 200


def test_absolute_and_dotted_hand_ins_are_viewable_by_their_relative_path(watching, driver, root):
    session = driver.start()
    driver.finish({"notes.md": str(root / "notes.md"), "extras": ["./sub/../extra1.md"]})
    page = watching.get(f"/sessions/{session.session_id}/").content.decode()
    assert re.findall(r'data-path="([^"]+)"', page) == ["notes.md", "extra1.md"]
    assert view(watching, session.session_id, "notes.md")[0].status_code == 200
    assert view(watching, session.session_id, "extra1.md")[0].status_code == 200


def test_a_large_file_is_cut_with_a_note(watching, driver, root, monkeypatch):
    monkeypatch.setattr(selectors, "FILE_VIEW_BYTES", 1023)
    (root / "notes.md").write_text("é" * 1000)  # 2000 bytes; the cut lands inside a character
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    response, page = view(watching, session.session_id, "notes.md")
    assert response.status_code == 200
    assert 'data-testid="file-truncated"' in page
    content = re.search(r'data-testid="file-content">([^<]*)</pre>', page).group(1)
    assert content == "é" * 511


def test_the_default_cap_is_256_kib(watching, driver, root):
    (root / "notes.md").write_text("x" * (256 * 1024 + 10))
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    _, page = view(watching, session.session_id, "notes.md")
    content = re.search(r'data-testid="file-content">([^<]*)</pre>', page).group(1)
    assert len(content) == 256 * 1024
    assert "256.0 KiB" in page


def test_a_binary_file_gets_a_placeholder(watching, driver, root):
    (root / "notes.md").write_bytes(b"\x89PNG\x00\x01\x02secret")
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    response, page = view(watching, session.session_id, "notes.md")
    assert response.status_code == 200
    assert 'data-testid="file-binary"' in page
    assert "secret" not in page


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (None, "Give the file's path relative to the project root: ?path=notes.md"),
        ("", "Give the file's path relative to the project root: ?path=notes.md"),
        (
            "/etc/passwd",
            "'/etc/passwd' is an absolute path; give the path relative to the project root",
        ),
        (
            "../outside.txt",
            "'../outside.txt' contains '..'; give the path relative to the project root",
        ),
        (
            "sub/../../outside.txt",
            "'sub/../../outside.txt' contains '..'; give the path relative to the project root",
        ),
        ("notes.md%00", "The path contains a NUL byte"),
    ],
)
def test_malformed_paths_are_a_400(watching, driver, root, path, message):
    (root.parent / "outside.txt").write_text("TOP SECRET")
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    response, page = view(watching, session.session_id, path)
    assert response.status_code == 400
    assert error_of(page) == message
    assert "TOP SECRET" not in page
    assert 'data-testid="file-content"' not in page


def test_the_absolute_path_of_an_output_is_refused_too(watching, driver, root):
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    response, page = view(watching, session.session_id, str(root / "notes.md"))
    assert response.status_code == 400
    assert "content of notes.md" not in page


def test_a_file_that_is_not_an_output_is_a_404(watching, driver, root):
    (root / "private.txt").write_text("PRIVATE")
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    for path in ("private.txt", "a.md", ".deepwork/jobs/demo/job.yml"):
        response, page = view(watching, session.session_id, path)
        assert response.status_code == 404
        assert error_of(page) == f"'{path}' is not an output of session '{session.session_id}'"
        assert "PRIVATE" not in page


def test_another_sessions_output_is_not_this_sessions(watching, driver):
    first = driver.start(workflow="quick")
    driver.finish({"notes.md": "notes.md"})
    second = driver.start(job="nested", workflow="only")
    driver.finish({"first.md": "first.md"})
    assert view(watching, second.session_id, "notes.md")[0].status_code == 404
    assert view(watching, first.session_id, "notes.md")[0].status_code == 200


def test_an_output_swapped_for_a_symlink_out_of_the_project_is_not_followed(watching, driver, root):
    (root.parent / "outside.txt").write_text("TOP SECRET")
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    # After the hand-in was checked, the file becomes a link to a file outside the project.
    (root / "notes.md").unlink()
    os.symlink(root.parent / "outside.txt", root / "notes.md")

    response, page = view(watching, session.session_id, "notes.md")

    assert response.status_code == 404
    assert error_of(page) == (
        "'notes.md' is a symbolic link to a file outside the project root; it is not shown"
    )
    assert "TOP SECRET" not in page


def test_a_directory_swapped_for_a_symlink_out_is_not_followed(watching, driver, root):
    outside = root.parent / "elsewhere"
    outside.mkdir()
    (outside / "deep.md").write_text("TOP SECRET")
    (root / "sub").mkdir()
    (root / "sub" / "deep.md").write_text("inside")
    session = driver.start()
    driver.finish({"notes.md": "notes.md", "extras": ["sub/deep.md"]})
    (root / "sub" / "deep.md").unlink()
    (root / "sub").rmdir()
    os.symlink(outside, root / "sub")

    response, page = view(watching, session.session_id, "sub/deep.md")

    assert response.status_code == 404
    assert "TOP SECRET" not in page


def test_a_symlink_inside_the_project_is_fine(watching, driver, root):
    (root / "real.md").write_text("REAL")
    os.symlink(root / "real.md", root / "link.md")
    session = driver.start()
    driver.finish({"notes.md": "link.md"})
    response, page = view(watching, session.session_id, "link.md")
    assert response.status_code == 200
    assert "REAL" in page


def test_a_deleted_output_is_a_404(watching, driver, root):
    session = driver.start()
    driver.finish({"notes.md": "notes.md"})
    (root / "notes.md").unlink()
    response, page = view(watching, session.session_id, "notes.md")
    assert response.status_code == 404
    assert error_of(page) == "'notes.md' no longer exists in the project"
