"""The MPS daemon manager against an in-memory control program and against a fake executable."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuslice.mps import CommandControl, FakeMpsControl, MpsManager, MpsStartError
from tests.mps.helpers import mps_resource, node_of
from tests.support.mps_program import write_fake_program
from tests.support.resources import TIME_SLICED, resource_for

GPU = "nvidia.com/gpu"


def test_start_makes_nvidias_layout_and_sends_the_limits(root: Path) -> None:
    control = FakeMpsControl()
    manager = MpsManager(root, control)
    resource = mps_resource(10)
    manager.start([resource])
    pipe = root / GPU / "pipe"
    assert pipe.is_dir() and (root / GPU / "log").is_dir() and (root / "shm").is_dir()
    assert (root / GPU / ".started").exists() and (root / ".ready").exists()
    daemon = control.daemons[str(pipe)]
    assert daemon.env == {
        "CUDA_MPS_PIPE_DIRECTORY": str(pipe),
        "CUDA_MPS_LOG_DIRECTORY": str(root / GPU / "log"),
        "CUDA_VISIBLE_DEVICES": ",".join(resource.physical_ids),
    }
    assert daemon.commands == [
        "get_default_active_thread_percentage",
        *(f"set_default_device_pinned_mem_limit {i} 8155M" for i in range(4)),
        "set_default_active_thread_percentage 10",
    ]
    assert manager.probe() == {GPU: "10"}
    manager.stop()
    assert control.daemons == {} and control.stopped == [str(pipe)]
    assert not (root / GPU / ".started").exists() and not (root / ".ready").exists()
    manager.stop()  # idempotent
    assert control.stopped == [str(pipe)]


def test_time_sliced_and_whole_resources_get_no_daemon(root: Path) -> None:
    control = FakeMpsControl()
    manager = MpsManager(root, control)
    manager.start([resource_for("h100x4", TIME_SLICED)[1], resource_for("h100x4")[1]])
    assert control.calls == [] and not (root / ".ready").exists()


def test_too_many_replicas_start_nothing(root: Path) -> None:
    control = FakeMpsControl()
    resource = mps_resource(17, node=node_of("Tesla V100-SXM2-16GB", 16384, "7.0"))
    with pytest.raises(MpsStartError, match=r"invalid device maximum allowed replicas exceeded: 17 > 16"):
        MpsManager(root, control).start([resource])
    assert control.calls == [] and not (root / GPU).exists()


def test_a_failing_command_stops_the_daemon_and_names_the_resource(root: Path) -> None:
    control = FakeMpsControl(fail_on="set_default_active_thread_percentage")
    manager = MpsManager(root, control)
    with pytest.raises(MpsStartError, match=r"MPS daemon for nvidia.com/gpu: failed to send command"):
        manager.start([mps_resource(2)])
    assert control.daemons == {} and manager.daemons == ()
    assert not (root / ".ready").exists() and not (root / GPU / ".started").exists()


def test_a_daemon_that_never_answers_is_reported_like_nvidia(root: Path) -> None:
    control = FakeMpsControl(fail_on="get_default_active_thread_percentage")
    manager = MpsManager(root, control, ready_timeout_s=0)
    with pytest.raises(MpsStartError, match="error waiting for MPS daemon: error checking MPS daemon health"):
        manager.start([mps_resource(2)])


def test_the_real_command_line_reaches_the_program(root: Path) -> None:
    program = write_fake_program(root / "bin")
    manager = MpsManager(root / "mps", CommandControl([str(program.path)]))
    resource = mps_resource(4)
    manager.start([resource])
    assert (root / "mps" / GPU / "log" / "control.log").exists()
    assert manager.probe() == {GPU: "25"}
    manager.stop()
    calls = program.calls()
    assert calls[0]["argv"] == ["-d"]
    assert calls[0]["env"]["CUDA_MPS_PIPE_DIRECTORY"] == str(root / "mps" / GPU / "pipe")
    assert calls[0]["env"]["CUDA_MPS_LOG_DIRECTORY"] == str(root / "mps" / GPU / "log")
    assert calls[0]["env"]["CUDA_VISIBLE_DEVICES"] == ",".join(resource.physical_ids)
    assert program.commands() == [
        "-d",
        "get_default_active_thread_percentage",
        *(f"set_default_device_pinned_mem_limit {i} 20389M" for i in range(4)),
        "set_default_active_thread_percentage 25",
        "get_default_active_thread_percentage",
        "quit",
    ]
    assert not (root / "mps" / GPU / "pipe" / "control").exists()


def test_a_stale_daemon_is_told_to_quit_before_a_new_one_starts(root: Path) -> None:
    program = write_fake_program(root / "bin")
    first = MpsManager(root / "mps", CommandControl([str(program.path)]))
    first.start([mps_resource(2)])  # never stopped: as if the plugin had crashed
    second = MpsManager(root / "mps", CommandControl([str(program.path)]))
    second.start([mps_resource(2)])
    second.stop()
    assert program.commands()[7:10] == ["quit", "-d", "get_default_active_thread_percentage"]


def test_a_missing_program_says_which_flag_to_set(root: Path) -> None:
    manager = MpsManager(root, CommandControl([str(root / "no-such-program")]))
    with pytest.raises(MpsStartError, match="not found \\(set --mps-control-command\\)"):
        manager.start([mps_resource(2)])


def test_a_program_failure_carries_its_exit_status_and_message(root: Path) -> None:
    program = write_fake_program(root / "bin", fail_on="set_default_device_pinned_mem_limit")
    manager = MpsManager(root / "mps", CommandControl([str(program.path)]))
    with pytest.raises(MpsStartError, match="exit status 1: Cannot find MPS control daemon process"):
        manager.start([mps_resource(2)])
    assert program.commands()[-1] == "quit"
