"""Short temp directories for tests that put Unix sockets in them."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def short_temp_dir(prefix: str = "gs-") -> Iterator[Path]:
    """A fresh directory, removed afterwards; under /tmp because socket paths must stay under 107 bytes,
    and pytest's tmp_path is too long for that."""
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
