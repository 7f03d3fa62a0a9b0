"""A bad --policy (raises on import, in place(), or answers garbage) is one line naming it, exit 2."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.fgd.policies import FACTORIES

HEAD = "from gpuslice.fgd.policies import Placement\nfrom gpuslice.fgd.policies.heuristics import BestFitPolicy\n"


def _class(body: str) -> str:
    return HEAD + "class Bad(BestFitPolicy):\n    name = 'bad'\n" + body


@pytest.fixture
def user_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    before = dict(FACTORIES)
    folder = tmp_path / "modules"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    names = set(sys.modules)
    yield folder
    FACTORIES.clear()
    FACTORIES.update(before)
    for name in set(sys.modules) - names:
        del sys.modules[name]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("raise RuntimeError('boom at import')\n", "importing module 'user_bad' raised RuntimeError: boom at import"),
        ("def (:\n", "importing module 'user_bad' raised SyntaxError"),
        (
            _class("    def __init__(self, context):\n        raise KeyError('x')\n"),
            "policy 'bad': building it raised KeyError",
        ),
        (
            _class("    def place(self, shape, memory):\n        raise ZeroDivisionError('oops')\n"),
            "policy 'bad': place() raised ZeroDivisionError: oops",
        ),
        (
            _class("    def place(self, shape, memory):\n        return 'here'\n"),
            "place() returned 'here': not None and not a Placement",
        ),
        (
            _class("    def place(self, shape, memory):\n        return Placement(10**6, ())\n"),
            "node must be an index from 0 to 3",
        ),
        (
            _class("    def place(self, shape, memory):\n        return Placement(0, (99,) * shape.num_gpu)\n"),
            "gpus must be GPU indices of node",
        ),
        (
            _class(
                "    def place(self, shape, memory):\n"
                "        found = super().place(shape, memory)\n"
                "        return found and Placement(found.node, found.gpus + found.gpus[:1])\n"
            ),
            "distinct GPUs",
        ),
        (
            _class(
                "    def place(self, shape, memory):\n"
                "        found = super().place(shape, memory)\n"
                "        return found and Placement(found.node, (0,) * min(shape.num_gpu, 1))\n"
            ),
            "a chosen GPU has less than the pod's",
        ),
        (
            _class("    def bound(self, placement, shape):\n        raise ValueError('no')\n"),
            "policy 'bad': bound() raised ValueError: no",
        ),
    ],
)
@pytest.mark.parametrize("command", ["openb", "openb-replay"])
def test_a_bad_openb_policy_is_one_line(
    small_openb: Path, user_modules: Path, source: str, message: str, command: str
) -> None:
    (user_modules / "user_bad.py").write_text(source)
    extra = ["--seeds", "1"] if command == "openb" else []
    result = CliRunner().invoke(
        cli,
        [
            *("sim", command, "--trace-dir", str(small_openb), "--workload", "small", "--policies", "best-fit"),
            *(*extra, "--policy", "user_bad:Bad"),
        ],
    )
    assert result.exit_code == 2, result.output
    assert "Invalid value for --policy:" in result.stderr and message in result.stderr, result.stderr
    assert "Traceback" not in result.output


SIM_HEAD = "from gpuslice.sim.policies import FirstFit\nfrom gpuslice.sim.core.cluster import Binding\n"


def _sim_class(body: str) -> str:
    return SIM_HEAD + "class Bad(FirstFit):\n    name = 'bad'\n" + body


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("raise RuntimeError('boom')\n", "importing module 'sim_bad' raised RuntimeError: boom"),
        (
            _sim_class("    def place(self, pods, job, state):\n        return 1 / 0\n"),
            "place() raised ZeroDivisionError",
        ),
        (
            _sim_class("    def place(self, pods, job, state):\n        return [Binding(10**6, ())]\n"),
            "node must be an index",
        ),
        (
            _sim_class(
                "    def place(self, pods, job, state):\n"
                "        return [Binding(0, tuple(range(p.gpu_count))) for p in pods]\n"
            ),
            "did not change by exactly these bindings",
        ),
        (
            _sim_class("    def place(self, pods, job, state):\n        state.bind(pods[0], 0)\n        return None\n"),
            "None, but it changed the cluster",
        ),
        (
            _sim_class(
                "    def place(self, pods, job, state):\n"
                "        bindings = [Binding(0, tuple(range(p.gpu_count))) for p in pods]\n"
                "        for pod, binding in zip(pods, bindings):\n"
                "            state.apply(binding, pod)\n"
                "        return bindings\n"
            ),
            "more GPU, CPU or memory than a node has free",
        ),
    ],
)
def test_a_bad_compare_policy_is_one_line(user_modules: Path, source: str, message: str) -> None:
    from gpuslice.sim.policies import POLICIES

    before = dict(POLICIES)
    (user_modules / "sim_bad.py").write_text(source)
    try:
        result = CliRunner().invoke(
            cli, ["sim", "compare", "--trace", "adversarial", "--policies", "first-fit", "--policy", "sim_bad:Bad"]
        )
    finally:
        POLICIES.clear()
        POLICIES.update(before)
    assert result.exit_code == 2, result.output
    assert "Invalid value for --policy:" in result.stderr and message in result.stderr, result.stderr
    assert "Traceback" not in result.output
