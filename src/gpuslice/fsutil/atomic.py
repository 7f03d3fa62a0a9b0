"""Atomic file replacement: temp file in the same directory, fsync, chmod, rename, fsync the directory."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from gpuslice.fsutil.regular import first_entries

_TEMP_PREFIX, _TEMP_SUFFIX = ".", ".tmp"  # `.<target name>.<random>.tmp`, beside the target

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
        name = str(target.parent / f"{_TEMP_PREFIX}{target.name}.{os.urandom(6).hex()}{_TEMP_SUFFIX}")
        try:
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target} after {_NAME_ATTEMPTS} attempts")


def temp_file_pattern(target: str) -> re.Pattern[str]:
    """The names of the temp files atomic writes leave when killed mid-write, for targets matching `target`
    (a regular expression of the target's name): what a start may remove as its own leftovers."""
    return re.compile(rf"{re.escape(_TEMP_PREFIX)}(?:{target})\.[A-Za-z0-9_]+{re.escape(_TEMP_SUFFIX)}")


def leftover_temp_files(path: str | Path, max_entries: int = 100_000) -> list[Path]:
    """Temp files that atomic writes to `path` left when killed mid-write (no directories), among the first
    `max_entries` entries of its directory."""
    target = Path(path)
    pattern = temp_file_pattern(re.escape(target.name))
    entries = first_entries(target.parent, max_entries)
    return [Path(e.path) for e in entries if pattern.fullmatch(e.name) and not e.is_dir(follow_symlinks=False)]


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
    descriptor, temp_name = _create_temp(target)
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
