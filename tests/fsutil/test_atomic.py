"""atomic_write_text / atomic_write_bytes: whole-file replacement, the mode asked for, nothing left behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gpuslice.fsutil.atomic import atomic_write_bytes, atomic_write_text


def test_creates_the_directory_and_writes_the_text(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "file"
    assert atomic_write_text(target, "héllo\n") == target
    assert target.read_text(encoding="utf-8") == "héllo\n"
    assert os.listdir(target.parent) == ["file"]


def test_replaces_by_rename_with_the_mode_asked_for(tmp_path: Path) -> None:
    target = tmp_path / "file"
    atomic_write_bytes(target, b"one")
    first = target.stat()
    atomic_write_bytes(target, b"two", mode=0o600)
    second = target.stat()
    assert second.st_ino != first.st_ino  # a new file renamed over the old one, not rewritten in place
    assert stat.S_IMODE(first.st_mode) == 0o644
    assert stat.S_IMODE(second.st_mode) == 0o600
    assert target.read_bytes() == b"two"


def test_a_failed_replace_leaves_the_old_state_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()  # a directory cannot be replaced by a file
    with pytest.raises(OSError):
        atomic_write_text(target, "text")
    assert target.is_dir()
    assert os.listdir(tmp_path) == ["taken"]
