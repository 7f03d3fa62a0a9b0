"""Atomic file replacement: temp file in the same directory, fsync, chmod, rename, fsync the directory."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO


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


@contextmanager
def atomic_text_writer(path: str | Path, mode: int = 0o644) -> Iterator[TextIO]:
    """A text stream whose content replaces `path` when the block ends without an error (the streamed
    counterpart of atomic_write_text, for outputs too large to hold in memory).

    The stream is a new temp file beside the target (created exclusively, so no link is followed); the
    rename then replaces whatever `path` was, a planted symlink included, instead of writing through it.
    On an error the temp file is removed and `path` is left as it was."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)
