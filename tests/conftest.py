"""Fixtures every test package may use."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.dirs import short_temp_dir


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A short temp directory for Unix sockets (see short_temp_dir), removed after the test."""
    with short_temp_dir() as path:
        yield path


# Fuzzing (tests named test_fuzz_*): `make test` runs the bounded, derandomised profile, so a failure
# reproduces on every machine; `make fuzz` loads the deep one (HYPOTHESIS_PROFILE=fuzz), random seeds.
settings.register_profile(
    "bounded",
    max_examples=60,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "fuzz", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "bounded"))
