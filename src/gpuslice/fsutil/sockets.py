"""The Unix socket files both kubelet front ends serve on: a stale one removed first, only our own after."""

from __future__ import annotations

import stat
from pathlib import Path


def socket_inode(path: Path) -> int | None:
    """The inode of what is at `path` (not following a link), or None when nothing is there."""
    try:
        return path.lstat().st_ino
    except FileNotFoundError:
        return None


def remove_stale_socket(path: Path) -> None:
    """Remove a socket at `path` (one a dead process left); anything else there is left alone (listening fails)."""
    try:
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()
    except FileNotFoundError:
        pass


def remove_own_socket(path: Path, inode: int | None) -> None:
    """Remove the socket at `path` only if it is still the file we made (`inode`, from `socket_inode` after
    listening): after a kubelet's wipe another process may own a socket at the same path."""
    if inode is not None and socket_inode(path) == inode:
        remove_stale_socket(path)
