"""Fixtures every test package may use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.dirs import short_temp_dir


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A short temp directory for Unix sockets (see short_temp_dir), removed after the test."""
    with short_temp_dir() as path:
        yield path
