"""A private runtime directory for a process that has no other place for its sockets (a non-root user)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

RUNTIME_DIR_NAME = "gpuslice"


class RuntimeDirError(OSError):
    """The private runtime directory cannot be made, or what is there is not this user's alone."""


def private_runtime_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_RUNTIME_DIR/gpuslice`, else `<temp dir>/gpuslice-<uid>`: made with mode 0700 if absent.

    Anyone may create a name in a shared temp directory first, so what is there is used only if it is a
    directory (not a link) of this user with no group or other permissions; else RuntimeDirError.
    """
    env = os.environ if environ is None else environ
    base = env.get("XDG_RUNTIME_DIR")
    uid = os.getuid()
    if base:
        path = Path(base) / RUNTIME_DIR_NAME
    else:
        import tempfile  # only here: tempfile brings shutil, bz2, lzma and random to every plugin start

        path = Path(tempfile.gettempdir()) / f"{RUNTIME_DIR_NAME}-{uid}"
    try:
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        info = path.lstat()
    except OSError as exc:
        raise RuntimeDirError(f"cannot make the runtime directory {path}: {exc.strerror or exc}") from exc
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mode & 0o077:
        raise RuntimeDirError(f"{path} is not a directory of this user's alone (mode 0700)")
    return path
