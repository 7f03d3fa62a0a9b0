"""Fixtures every test package may use."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.support.dirs import short_temp_dir


@pytest.fixture(autouse=True, scope="session")
def _config_readers_agree() -> Iterator[None]:
    """Every config mapping a test reads in-process goes through both readers, which must agree
    (tests/support/config_paths.py): the direct reader's answer is then the schema's, on every config here."""
    from gpuslice.config import direct, load
    from tests.support.config_paths import agreeing_read

    original = direct.read_direct
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(load, "read_direct", lambda data: agreeing_read(data, original))
        yield


# These packages' tests share expensive session fixtures (the openb default trace and its simulations,
# kubectl's renders of deploy/): under pytest-xdist (`make test`, --dist loadgroup) each package runs on one
# worker, so that each fixture is computed once; every other test goes to whichever worker is free.
ONE_WORKER_PACKAGES = ("tests/fgd/", "tests/deploy/")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """--dist loadgroup that keeps ONE_WORKER_PACKAGES together, by node id: xdist 3.8 groups by a suffix
    it writes into item._nodeid, which pytest 9 no longer reads (a node id is built from item._id), so its own
    grouping split every package over all workers and each worker made the session fixtures again.
    Optional: `-p no:xdist` runs without this hook."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class PackageGroups(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            for package in ONE_WORKER_PACKAGES:
                if nodeid.startswith(package):
                    return package
            return super()._split_scope(nodeid)

    return PackageGroups(config, log)


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
