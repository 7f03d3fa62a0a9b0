"""`gpuslice kubelet`: a real process serving until SIGTERM, admitting a pod once devices are free."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import click
import pytest

from gpuslice.cli.kubelet_cmd import parse_admit
from tests.kubelet.fake_plugin import FakeDevicePlugin
from tests.support.process import reap


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("train=nvidia.com/gpu:2", ("train", "nvidia.com/gpu", 2)),
        ("a=example.com/x", ("a", "example.com/x", 1)),
    ],
)
def test_parse_admit(spec: str, parsed: tuple[str, str, int]) -> None:
    assert parse_admit(spec) == parsed


@pytest.mark.parametrize("spec", ["train", "=nvidia.com/gpu:1", "a=", "a=x:zero", "a=x:0", "a=:2"])
def test_parse_admit_refuses(spec: str) -> None:
    with pytest.raises(click.BadParameter):
        parse_admit(spec)


def test_kubelet_command_serves_admits_and_exits_on_sigterm(workdir: Path) -> None:
    directory = workdir / "device-plugins"
    command = [sys.executable, "-m", "gpuslice", "kubelet", "--dir", str(directory)]
    command += ["--admit", "train=example.com/fake:2", "--admit-timeout", "30", "--dial-timeout", "5"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    plugin: FakeDevicePlugin | None = None
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert ready.startswith("mock kubelet ready:"), ready
        plugin = FakeDevicePlugin(directory, "fake.sock", ["d0", "d1", "d2"], prefer=None).start()
        plugin.register(directory / "kubelet.sock", "example.com/fake")
        admitted = process.stdout.readline()
        assert admitted == "admitted train: example.com/fake x2 -> d0, d1\n"
        assert process.stdout.readline() == "  env: FAKE_DEVICES=d0,d1\n"
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=20)
    finally:
        reap(process)
        if plugin is not None:
            plugin.stop()
    assert process.returncode == 0, stderr
    assert "mock kubelet stopped" in stdout
    assert "registered device plugin for example.com/fake at fake.sock" in stderr
    assert "ListAndWatch update for example.com/fake: capacity 3, allocatable 3" in stderr
    assert not (directory / "kubelet.sock").exists()
