"""`pip install gpuslice` (no extra) runs the plugin and the labels; the simulator says which extra it needs."""

from __future__ import annotations

import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuslice.kubelet import MockKubelet
from tests.support.process import WAIT_S, clean_env, finish, reap

ROOT = Path(__file__).resolve().parents[2]
SIM_ONLY = ("matplotlib", "rich")
NEVER_ON_THE_PLUGIN_PATH = ("numpy", *SIM_ONLY)
# Runs gpuslice as if these packages were not installed: any import of them fails as a missing one would.
RUN_WITHOUT = """
import importlib.abc, sys
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Missing())
sys.argv = ["gpuslice", *sys.argv[1:]]
from gpuslice.cli.main import main
main()
"""


def without(packages: tuple[str, ...], *args: str) -> list[str]:
    return [sys.executable, "-c", RUN_WITHOUT.format(blocked=set(packages)), *args]


@pytest.fixture
def kubelet(workdir: Path) -> Iterator[MockKubelet]:
    with MockKubelet(workdir / "dp", dial_timeout_s=5.0, checkpoint_enabled=False) as running:
        yield running


def test_the_plugin_serves_without_numpy_matplotlib_or_rich(kubelet: MockKubelet) -> None:
    args = ["plugin", "--backend", "fake", "--node-spec", "preset:dgx-h100", "--kubelet-socket"]
    command = without(NEVER_ON_THE_PLUGIN_PATH, *args, str(kubelet.socket_path))
    process = subprocess.Popen(command, env=clean_env(), stderr=subprocess.PIPE, text=True)
    try:
        assert kubelet.wait_for(resource="nvidia.com/gpu", registered=True, allocatable=8, timeout=WAIT_S)
        code, err = finish(process, signal.SIGTERM, timeout=WAIT_S)
    finally:
        reap(process)
    assert code == 0, err


def test_the_labels_are_written_without_numpy_matplotlib_or_rich() -> None:
    args = ["labels", "--backend", "fake", "--node-spec", "preset:h100x4", "--oneshot", "--output-file", "-"]
    result = subprocess.run(
        without(NEVER_ON_THE_PLUGIN_PATH, *args), env=clean_env(), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "nvidia.com/gpu.count=4" in result.stdout.splitlines()


@pytest.mark.parametrize(
    ("missing", "args"),
    [
        ("rich", ("sim", "compare", "--help")),  # the tables: imported with the command
        ("matplotlib", ("sim", "compare", "--trace", "synthetic:jobs=20", "--policies", "first-fit", "--plot")),
    ],
)
def test_a_simulator_command_names_the_extra_to_install(missing: str, args: tuple[str, ...], tmp_path: Path) -> None:
    command = without((missing,), *args, *([str(tmp_path / "plot.png")] if args[-1] == "--plot" else []))
    result = subprocess.run(command, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 3
    assert result.stderr.strip().endswith("install it with: pip install 'gpuslice[sim]'"), result.stderr
    assert f"{missing} is not installed" in result.stderr


def test_the_extras_hold_what_the_plugin_does_not_need() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {requirement.split(">")[0].split("=")[0].lower() for requirement in project["dependencies"]}
    sim = {requirement.split(">")[0].split("=")[0].lower() for requirement in project["optional-dependencies"]["sim"]}
    assert sim == set(SIM_ONLY) and not sim & base
    assert "gpuslice[sim]" in project["optional-dependencies"]["dev"]
