"""Atomic file replacement: temp file in the same directory, fsync, chmod, rename, fsync the directory."""

from __future__ import annotations

import os
from pathlib import Path

# tempfile would do, but it imports shutil, bz2, lzma and random: a few ms of every plugin start, for one
# exclusively created file with a random name.
_NAME_ATTEMPTS = 100


def atomic_write_bytes(path: str | Path, data: bytes, mode: int = 0o644) -> Path:
    """Replace `path` with `data` so readers see the old file or the new one, never half; returns the path.

    The parent directory is created when missing. The temp file (`.<name>.*.tmp`) sits beside the target,
    because a rename is only atomic within one file system, and is removed again when anything fails.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temp_name = _create_temp(target)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, mode)  # created 0600; the caller says who may read the result
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)
    return target


def atomic_write_text(path: str | Path, text: str, mode: int = 0o644) -> Path:
    """atomic_write_bytes for text, encoded as UTF-8."""
    return atomic_write_bytes(path, text.encode("utf-8"), mode)


def _create_temp(target: Path) -> tuple[int, str]:
    """A new file `.<name>.<random>.tmp` beside `target`, created exclusively (mode 0600), as mkstemp does."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_NAME_ATTEMPTS):
        name = str(target.parent / f".{target.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target} after {_NAME_ATTEMPTS} attempts")


def _fsync_directory(directory: Path) -> None:
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)  # the rename itself must survive a crash
    finally:
        os.close(handle)
