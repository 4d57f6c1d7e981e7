"""The data folder and its secret key, as real processes start on a real, fresh folder: the
key file is private even when an older install left it readable, no process ever reads it
half-made, and folders the server makes for it are private even under ``umask 000``."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from django.conf import settings

# What a server reads first: its settings, which make the data folder and the key.
PRINT_KEY = "from django.conf import settings; print(settings.SECRET_KEY)"


def _env(var_dir: Path) -> dict[str, str]:
    # No SECRET_KEY: the key comes from the data folder.
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DJANGO_SETTINGS_MODULE": "deepwork_site.settings",
        "DEEPWORK_VAR_DIR": str(var_dir),
        "DEEPWORK_LOG_LEVEL": "WARNING",
    }


def _start(var_dir: Path, umask: int = 0o022) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", PRINT_KEY],
        env=_env(var_dir),
        cwd=settings.BASE_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        umask=umask,
    )


def _key(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return out.strip()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_an_older_installs_readable_key_is_made_private_and_kept(tmp_path):
    var_dir = tmp_path / "var"
    var_dir.mkdir(mode=0o700)
    key_file = var_dir / "secret_key"
    key_file.write_text("an-older-install-key\n")
    key_file.chmod(0o644)

    assert _key(_start(var_dir)) == "an-older-install-key"
    assert _mode(key_file) == 0o600
    assert key_file.read_text() == "an-older-install-key\n"


def test_folders_made_for_the_data_folder_are_private_under_umask_000(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    var_dir = home / ".local" / "share" / "deepwork-server"

    assert _key(_start(var_dir, umask=0))

    for folder in (home / ".local", home / ".local" / "share", var_dir):
        assert _mode(folder) == 0o700, folder
    assert _mode(home) == 0o755  # what was there already is left alone
    assert _mode(var_dir / "secret_key") == 0o600


def test_an_empty_key_file_is_replaced_by_a_whole_key(tmp_path):
    """What a crash between creating the file and writing it leaves behind."""
    var_dir = tmp_path / "var"
    var_dir.mkdir(mode=0o700)
    (var_dir / "secret_key").touch(mode=0o600)

    key = _key(_start(var_dir))

    assert len(key) >= 50
    assert (var_dir / "secret_key").read_text() == key
    assert _mode(var_dir / "secret_key") == 0o600


def test_processes_starting_at_once_agree_on_one_whole_key(tmp_path):
    var_dir = tmp_path / "var"
    processes = [_start(var_dir) for _ in range(6)]

    keys = {_key(process) for process in processes}

    assert len(keys) == 1
    (key,) = keys
    assert len(key) >= 50
    assert (var_dir / "secret_key").read_text() == key
    assert sorted(path.name for path in var_dir.iterdir()) == ["secret_key"]  # no temporary left
