"""`gpuslice plugin` as a real process against the mock kubelet: the CLI contract, signals, bad input."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.kubelet import MockKubelet
from tests.support.hostile import BOMB
from tests.support.process import PLUGIN_ENV, finish, plugin_process
from tests.support.specs import h100_mig_spec

WAIT_S = 20.0
CLEAN_ENV: dict[str, str | None] = dict.fromkeys(PLUGIN_ENV)
H100_MIG_SPEC = h100_mig_spec("e2e")


@pytest.fixture
def kubelet(workdir: Path) -> Iterator[MockKubelet]:
    with MockKubelet(workdir, dial_timeout_s=5.0, checkpoint_enabled=False) as running:
        yield running


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_cleanly_and_removes_the_socket(kubelet: MockKubelet, sig: signal.Signals) -> None:
    process = plugin_process(
        ["--backend", "fake", "--node-spec", "preset:h100x4", "--kubelet-socket", str(kubelet.socket_path)]
    )
    try:
        assert kubelet.wait_for(resource="nvidia.com/gpu", registered=True, allocatable=4, timeout=WAIT_S)
        assert (kubelet.device_plugin_dir / "gpuslice-nvidia.com-gpu.sock").is_socket()
        assert kubelet.admit_one("pod", "nvidia.com/gpu", 2).envs["NVIDIA_VISIBLE_DEVICES"].count("GPU-") == 2
        process.send_signal(sig)
    finally:
        code, err = finish(process)
    assert code == 0, err
    assert list(kubelet.device_plugin_dir.glob("gpuslice-*")) == []
    assert kubelet.wait_for(resource="nvidia.com/gpu", registered=False, timeout=WAIT_S)


def test_env_vars_config_file_and_mig_mixed(kubelet: MockKubelet, tmp_path: Path) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text(H100_MIG_SPEC)
    config = tmp_path / "config.yaml"
    config.write_text(
        "version: v1\nflags:\n  migStrategy: mixed\nsharing:\n  timeSlicing:\n    resources:\n"
        "      - name: nvidia.com/mig-1g.10gb\n        replicas: 3\n"
    )
    env = {"NODE_SPEC": str(spec), "CONFIG_FILE": str(config), "KUBELET_SOCKET": str(kubelet.socket_path)}
    process = plugin_process(["--backend", "fake"], env)
    try:
        assert kubelet.wait_for(resource="nvidia.com/mig-1g.10gb", allocatable=2 * 2 * 3, timeout=WAIT_S)
        assert kubelet.wait_for(resource="nvidia.com/mig-3g.40gb", allocatable=2, timeout=WAIT_S)
        shared = kubelet.admit_one("a", "nvidia.com/mig-1g.10gb")
        assert shared.device_ids[0].endswith("::0") and shared.device_ids[0].startswith("MIG-")
        assert shared.envs["NVIDIA_VISIBLE_DEVICES"] == shared.device_ids[0].split("::")[0]
        whole = kubelet.admit_one("b", "nvidia.com/mig-3g.40gb")
        assert sum("nvidia-caps" in path for path, _, _ in whole.device_nodes) == 2
        process.send_signal(signal.SIGTERM)
    finally:
        code, err = finish(process)
    assert code == 0, err


BAD_INPUT = [
    # (files to write, extra args, text on stderr)
    ({"config": "flags:\n  migStrategy: sideways\n"}, ["--config-file", "{config}"], "flags.migStrategy"),
    (
        {"config": "sharing:\n  timeSlicing:\n    resources: []\n"},
        ["--config-file", "{config}"],
        "no resources specified",
    ),
    ({"config": "version: v2\n"}, ["--config-file", "{config}"], "unknown version: v2"),
    (
        {"config": "sharing: {mps: {resources: [{name: gpu, replicas: 2}]}}\n"},
        ["--config-file", "{config}"],
        "using MPS requires --mps-root to be specified",
    ),
    ({}, ["--config-file", "{missing}"], "error opening config file"),
    ({}, ["--node-spec", "preset:nope"], "unknown preset 'nope'"),
    ({"spec": "gpus:\n  - model: X\n    memory_mib: -1\n"}, ["--node-spec", "{spec}"], "memory_mib"),
    (
        {"spec": H100_MIG_SPEC, "config": "flags: {migStrategy: single}\n"},
        ["--node-spec", "{spec}", "--config-file", "{config}"],
        "more than one MIG device type",
    ),
    # Hostile files: bad bytes and bombs are refused by name, at start, before anything is served.
    (
        {"config": "version: v1\nflags: {migStrategy: \udcff}\n"},
        ["--config-file", "{config}"],
        "not UTF-8 text (byte 0xff at offset 33)",
    ),
    ({"spec": "name: \udc80\ngpus: []\n"}, ["--node-spec", "{spec}"], "invalid node spec"),
    ({"config": BOMB}, ["--config-file", "{config}"], "expands to more than"),
    (
        {"config": "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 100000000}]}}\n"},
        ["--config-file", "{config}"],
        "over the limit of 16384",
    ),
]


@pytest.mark.parametrize(("files", "args", "text"), BAD_INPUT)
def test_bad_input_exits_2_naming_the_key_and_registers_nothing(
    kubelet: MockKubelet, tmp_path: Path, files: dict[str, str], args: list[str], text: str
) -> None:
    paths = {name: str(tmp_path / name) for name in files} | {"missing": str(tmp_path / "missing.yaml")}
    for name, content in files.items():
        Path(paths[name]).write_bytes(content.encode("utf-8", "surrogateescape"))
    base = ["plugin", "--backend", "fake", "--kubelet-socket", str(kubelet.socket_path)]
    # In-process through the same click command (a real process costs a second; one is checked below).
    result = CliRunner().invoke(cli, [*base, *(a.format(**paths) for a in args)], env=CLEAN_ENV)
    assert result.exit_code == 2, result.output
    assert text in result.stderr
    assert kubelet.resources() == {}, "nothing registered"
    assert list(kubelet.device_plugin_dir.glob("gpuslice-*")) == []


def test_bad_input_exit_code_of_a_real_process(kubelet: MockKubelet) -> None:
    args = ["--backend", "fake", "--node-spec", "preset:nope", "--kubelet-socket", str(kubelet.socket_path)]
    code, err = finish(plugin_process(args))
    assert code == 2
    assert err.strip().startswith("gpuslice plugin: error:") and "unknown preset 'nope'" in err
