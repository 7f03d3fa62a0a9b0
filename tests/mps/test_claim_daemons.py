"""DRA's per-claim daemons run the node core's one daemon lifecycle: same start, probe, failure and quit rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuslice.dra.mps import ClaimMpsDaemons, MpsClaimError
from gpuslice.dra.opaque import MpsConfig
from gpuslice.mps import FakeMpsControl
from tests.mps.helpers import node_of

UID = "5f0c1d2e-aaaa-bbbb-cccc-ddddeeeeffff"
GPUS = node_of("NVIDIA H100 80GB HBM3", 81559, "9.0", count=2).gpus
LIMITS = MpsConfig.model_validate({"defaultActiveThreadPercentage": 30, "defaultPinnedDeviceMemoryLimit": "8Gi"})


def test_a_claims_daemon_lives_in_its_own_directory_and_gets_the_claims_limits(root: Path) -> None:
    control = FakeMpsControl()
    directory = ClaimMpsDaemons(root, control).start(UID, GPUS, LIMITS)
    assert directory == root / UID and (directory / "shm").is_dir() and (directory / "log").is_dir()
    daemon = control.daemons[str(directory / "pipe")]
    assert daemon.env["CUDA_VISIBLE_DEVICES"] == ",".join(gpu.uuid for gpu in GPUS)
    assert daemon.commands == [
        "get_default_active_thread_percentage",  # the readiness probe of the one lifecycle
        "set_default_device_pinned_mem_limit 0 8192M",
        "set_default_device_pinned_mem_limit 1 8192M",
        "set_default_active_thread_percentage 30",
    ]
    ClaimMpsDaemons(root, control).stop(UID)  # another process after a restart: the same derived place
    assert control.daemons == {} and not directory.exists()


def test_a_stale_daemon_in_the_claims_directory_is_quit_before_the_start(root: Path) -> None:
    control = FakeMpsControl()
    ClaimMpsDaemons(root, control).start(UID, GPUS, LIMITS)
    (root / UID / "pipe" / "control").touch()  # the real daemon's pipe, left by a killed plugin
    ClaimMpsDaemons(root, control).start(UID, GPUS, LIMITS)
    pipe = str(root / UID / "pipe")
    assert [command for where, command in control.calls if where == pipe][5:8] == [
        "quit",
        "-d",
        "get_default_active_thread_percentage",
    ]


@pytest.mark.parametrize(
    ("fail_on", "message"),
    [
        ("get_default_active_thread_percentage", "error waiting for MPS daemon: error checking MPS daemon health"),
        ("set_default_active_thread_percentage", "failed to send command"),
    ],
)
def test_a_failed_start_names_the_claim_and_leaves_nothing_running(root: Path, fail_on: str, message: str) -> None:
    control = FakeMpsControl(fail_on=fail_on)
    with pytest.raises(MpsClaimError, match=f"MPS daemon for claim {UID}: {message}"):
        ClaimMpsDaemons(root, control, ready_timeout_s=0).start(UID, GPUS, LIMITS)
    assert control.daemons == {}


def test_stopping_a_claim_that_never_started_a_daemon_is_a_no_op(root: Path) -> None:
    control = FakeMpsControl()
    ClaimMpsDaemons(root, control).stop(UID)
    assert control.calls == []
