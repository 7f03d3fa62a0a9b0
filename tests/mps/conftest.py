"""The MPS tests' daemon root: short, because the real control program puts Unix sockets in it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.dirs import short_temp_dir


@pytest.fixture
def root() -> Iterator[Path]:
    with short_temp_dir("gs-mps-") as path:
        yield path
