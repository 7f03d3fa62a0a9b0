"""Atomic file replacement: temp file in the same directory, fsync, chmod, rename, fsync the directory."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: str | Path, data: bytes, mode: int = 0o644) -> Path:
    """Replace `path` with `data` so readers see the old file or the new one, never half; returns the path.

    The parent directory is created when missing. The temp file (`.<name>.*.tmp`) sits beside the target,
    because a rename is only atomic within one file system, and is removed again when anything fails.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, mode)  # mkstemp creates 0600; the caller says who may read the result
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)
    return target


def atomic_write_text(path: str | Path, text: str, mode: int = 0o644) -> Path:
    """atomic_write_bytes for text, encoded as UTF-8."""
    return atomic_write_bytes(path, text.encode("utf-8"), mode)


def _fsync_directory(directory: Path) -> None:
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)  # the rename itself must survive a crash
    finally:
        os.close(handle)
