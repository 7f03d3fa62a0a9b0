"""`gpuslice plugin` as a process: NVIDIA's flags and env vars over the file, MPS daemons, the CDI spec."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from gpuslice.allocation.cdi_resolve import load_specs, resolve
from gpuslice.cli.plugin_cmd import nvidia_overrides
from gpuslice.config import ConfigError
from gpuslice.discovery import load_node_spec
from gpuslice.discovery.driver_files_fake import build_fake_driver_root
from gpuslice.kubelet import MockKubelet
from tests.support import process as support
from tests.support.mps_program import write_fake_program

WAIT_S = 20.0
GPU = "nvidia.com/gpu"


@pytest.mark.parametrize(
    ("flags", "environ", "expected"),
    [
        ({}, {}, {}),
        (
            {},
            {"DEVICE_LIST_STRATEGY": "volume-mounts,cdi-cri"},
            {"flags.plugin.deviceListStrategy": ["volume-mounts", "cdi-cri"]},
        ),
        (
            {"nvidia_flags_plugin_deviceListStrategy": "cdi-cri"},
            {"DEVICE_LIST_STRATEGY": "volume-mounts"},
            {"flags.plugin.deviceListStrategy": ["cdi-cri"]},
        ),
        ({"nvidia_flags_plugin_passDeviceSpecs": "true"}, {}, {"flags.plugin.passDeviceSpecs": True}),
        (
            {},
            {"PASS_DEVICE_SPECS": "false", "MPS_ROOT": "/run/m"},
            {"flags.plugin.passDeviceSpecs": False, "flags.mpsRoot": "/run/m"},
        ),
        ({}, {"NVIDIA_CTK_PATH": "/b", "NVIDIA_CDI_HOOK_PATH": "/a"}, {"flags.plugin.nvidiaCTKPath": "/a"}),
        ({}, {"IMEX_CHANNEL_IDS": "0"}, {"imex.channelIDs": [0]}),
    ],
)
def test_flags_win_over_env_vars(flags: dict[str, str], environ: dict[str, str], expected: dict[str, object]) -> None:
    assert nvidia_overrides(flags, environ) == expected


def test_a_bad_boolean_in_the_environment_names_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"PASS_DEVICE_SPECS \(config flags.plugin.passDeviceSpecs\): invalid"):
        nvidia_overrides({}, {"PASS_DEVICE_SPECS": "maybe"})


def plugin_process(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return support.plugin_process(["--backend", "fake", *args], env, stdout=subprocess.DEVNULL)


def stop(process: subprocess.Popen[str], signalled: bool = True) -> tuple[int, str]:
    return support.finish(process, signal.SIGTERM if signalled else None, timeout=WAIT_S)


DRIVER_VERSION = load_node_spec(None).node.driver_version  # what the fake node's NVML would report


def test_mps_daemons_and_cdi_spec_follow_the_process(kubelet: MockKubelet, workdir: Path) -> None:
    program = write_fake_program(workdir / "bin")
    config = workdir / "config.yaml"
    config.write_text("sharing: {mps: {resources: [{name: gpu, replicas: 4}]}}\n")
    mps_root, cdi_dir = workdir / "mps", workdir / "cdi"
    driver_root = build_fake_driver_root(workdir / "driver", version=DRIVER_VERSION)
    process = plugin_process(
        ["--config-file", str(config), "--kubelet-socket", str(kubelet.socket_path), "--cdi-spec-dir", str(cdi_dir),
         "--device-list-strategy", "cdi-cri,envvar", "--container-driver-root", str(driver_root)],
        {"MPS_ROOT": str(mps_root), "MPS_CONTROL_COMMAND": str(program.path), "DEVICE_LIST_STRATEGY": "volume-mounts",
         "NVIDIA_DRIVER_ROOT": "/run/nvidia/driver", "CDI_DISABLE_HOOKS": "enable-cuda-compat"},
    )  # fmt: skip
    try:
        assert kubelet.wait_for(resource=GPU, allocatable=16, timeout=WAIT_S)
        assert (mps_root / ".ready").exists() and (mps_root / GPU / ".started").exists()
        allocation = kubelet.admit_one("pod", GPU)
        physical = allocation.device_ids[0].split("::")[0]
        assert allocation.envs["CUDA_MPS_PIPE_DIRECTORY"] == f"/mps/{GPU}/pipe"
        assert allocation.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20389M"
        assert allocation.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
        assert allocation.envs["NVIDIA_VISIBLE_DEVICES"] == allocation.envs["CUDA_VISIBLE_DEVICES"] == physical
        assert allocation.cdi_devices == [f"k8s.device-plugin.nvidia.com/gpu={physical}"]
        edits = resolve(load_specs(cdi_dir), allocation.cdi_devices)
        assert f"/usr/lib/x86_64-linux-gnu/libcuda.so.{DRIVER_VERSION}" in edits.mount_paths
        assert edits.mounts[0]["hostPath"].startswith("/run/nvidia/driver/")
        assert "enable-cuda-compat" not in edits.hook_names and "update-ldcache" in edits.hook_names
    finally:
        code, err = stop(process)
    assert code == 0, err
    assert list(cdi_dir.iterdir()) == [], "the plugin removes the specs it wrote when it stops"
    assert program.commands()[:2] == ["-d", "get_default_active_thread_percentage"]
    assert program.commands()[-1] == "quit"
    assert "set_default_active_thread_percentage 25" in program.commands()
    assert not (mps_root / ".ready").exists()


def test_a_daemon_that_cannot_start_stops_the_plugin_before_it_registers(kubelet: MockKubelet, workdir: Path) -> None:
    config = workdir / "config.yaml"
    config.write_text(
        f"flags: {{mpsRoot: {workdir / 'mps'}}}\nsharing: {{mps: {{resources: [{{name: gpu, replicas: 2}}]}}}}\n"
    )
    process = plugin_process(
        ["--config-file", str(config), "--kubelet-socket", str(kubelet.socket_path),
         "--mps-control-command", str(workdir / "missing-program")],
        {},
    )  # fmt: skip
    code, err = stop(process, signalled=False)
    assert code == 1
    assert "MPS daemon for nvidia.com/gpu" in err and "not found (set --mps-control-command)" in err
    assert kubelet.registration_count(GPU) == 0


def test_too_many_mps_replicas_for_the_gpu_is_refused(kubelet: MockKubelet, workdir: Path) -> None:
    config = workdir / "config.yaml"
    config.write_text(
        f"flags: {{mpsRoot: {workdir}}}\nsharing: {{mps: {{resources: [{{name: gpu, replicas: 49}}]}}}}\n"
    )
    process = plugin_process(["--config-file", str(config), "--kubelet-socket", str(kubelet.socket_path)], {})
    code, err = stop(process, signalled=False)
    assert code == 2, "a bad config: refused before anything starts"
    assert "invalid MPS configuration: invalid device maximum allowed replicas exceeded: 49 > 48" in err
