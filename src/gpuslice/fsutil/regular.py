"""Reading a file that must be a regular file: never follows a link, never blocks on a FIFO, never reads past a cap."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from gpuslice.fsutil.textread import InputFileError, InputTooLarge

_NOT_REGULAR = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symbolic link"),
)


class NotRegularFile(InputFileError):
    """Something other than a regular file (a link, directory, FIFO, socket or device) where a file is expected."""


def file_type(mode: int) -> str:
    """What a stat mode is, in words ("a directory", "a FIFO", ...); "a regular file" for one."""
    return next((name for test, name in _NOT_REGULAR if test(mode)), "a regular file")


def read_regular_bytes(path: str | Path, kind: str, max_bytes: int) -> bytes:
    """At most `max_bytes` of the regular file `path`; FileNotFoundError when there is none.

    The open is O_NOFOLLOW (a planted link is refused, not followed) and O_NONBLOCK (a FIFO opens at
    once instead of waiting for a writer), then fstat decides on the open descriptor, so nothing can be
    swapped in between: anything but a regular file is NotRegularFile, a larger one InputTooLarge before
    a byte is read. Reading stops one byte past the cap, which also bounds a file that grows meanwhile.
    """
    where = f"invalid {kind} {path}"
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EOPNOTSUPP):  # a link; a socket or device with no driver
            raise NotRegularFile(f"{where}: it is {_lstat_type(path)}, not a regular file") from None
        raise InputFileError(f"{where}: cannot open it: {exc.strerror or exc}") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise NotRegularFile(f"{where}: it is {file_type(status.st_mode)}, not a regular file")
        if status.st_size > max_bytes:
            raise InputTooLarge(f"{where}: {status.st_size} bytes, larger than the limit of {max_bytes} bytes")
        chunks, left = [], max_bytes + 1
        while left > 0 and (chunk := os.read(descriptor, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise InputFileError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    finally:
        os.close(descriptor)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise InputTooLarge(f"{where}: it grew past the limit of {max_bytes} bytes while being read")
    return data


def first_entries(directory: str | Path, limit: int) -> list[os.DirEntry[str]]:
    """At most `limit` entries of `directory` (a flooded directory is not walked for ever); none when it is
    missing. Other OSErrors pass through for the caller's own message."""
    try:
        with os.scandir(directory) as entries:
            return [entry for _, entry in zip(range(limit), entries, strict=False)]
    except FileNotFoundError:
        return []


def _lstat_type(path: str | Path) -> str:
    try:
        return file_type(os.lstat(path).st_mode)
    except OSError:
        return "of an unknown type"
