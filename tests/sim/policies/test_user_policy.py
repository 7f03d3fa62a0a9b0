"""`--policy module:Name` and the entry-point group: the docs' worst-fit example runs, bad references are refused."""

from __future__ import annotations

import csv
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.sim.policies import POLICIES

DOC = (Path(__file__).resolve().parents[3] / "docs" / "simulator.md").read_text()
# Two 1-GPU jobs on two empty 4-GPU nodes: best-fit packs both on node-0000, worst-fit spreads them.
TRACE = "# cluster: 2xh100x4\njob_id,submit,duration,pods,gpu\na,0,10,1,1\nb,0,10,1,1\n"


@pytest.fixture
def user_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for user modules; the policy registry and sys.modules are restored afterwards."""
    before = dict(POLICIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    names = set(sys.modules)
    yield tmp_path
    POLICIES.clear()
    POLICIES.update(before)
    for name in set(sys.modules) - names:
        del sys.modules[name]


def compare(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["sim", "compare", *args])
    return result.exit_code, result.stdout + result.stderr


def placements(path: Path) -> dict[tuple[str, str], str]:
    with path.open(newline="") as stream:
        return {(row["policy"], row["job_id"]): row["nodes"] for row in csv.DictReader(stream)}


def test_the_documented_worst_fit_runs_from_the_command_line(user_modules: Path) -> None:
    block = re.search(r"```python\n(# worst_fit\.py\n.*?)```", DOC, re.S)
    assert block, "docs/simulator.md lost the worst-fit example"
    (user_modules / "worst_fit.py").write_text(block.group(1))
    (user_modules / "t.csv").write_text(TRACE)
    out = user_modules / "out"
    code, text = compare(
        "--trace",
        str(user_modules / "t.csv"),
        "--policies",
        "best-fit",
        "--policy",
        "worst_fit:WorstFit",
        "--out",
        str(out),
    )
    assert code == 0, text
    assert placements(out / "jobs.csv") == {
        ("best-fit", "a"): "node-0000",
        ("best-fit", "b"): "node-0000",
        ("worst-fit", "a"): "node-0000",
        ("worst-fit", "b"): "node-0001",
    }


def test_an_installed_entry_point_is_found_by_name(user_modules: Path) -> None:
    (user_modules / "spread_pkg.py").write_text(
        "from gpuslice.sim.policies.best_fit import BestFit\n\n\nclass Spread(BestFit):\n    name = 'spread'\n"
    )
    dist = user_modules / "spread_pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: spread-pkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[gpuslice.sim.policies]\nspread = spread_pkg:Spread\n")
    code, text = compare("--trace", "two-gang", "--policies", "gang", "--policy", "spread", "--json", "-")
    assert code == 0, text
    assert '"policy": "spread"' in text


@pytest.mark.parametrize(
    ("source", "reference", "message"),
    [
        ("", "no_such_module_here:X", "cannot import module 'no_such_module_here'"),
        ("X = 1\n", "user_bad:Y", "has no 'Y'"),
        ("X = 1\n", "user_bad:X", "is not a policy class (it is of type int)"),
        ("class X:\n    def __init__(self, a): ...\n", "user_bad:X", "building the policy with no arguments failed"),
        ("class X:\n    name = 'x'\n    all_or_nothing = False\n", "user_bad:X", "needs a method place"),
        ("class X:\n    name = 'a:b'\n", "user_bad:X", "without ':' or ','"),
        ("from gpuslice.sim.policies import Gang\nclass X(Gang):\n    name = 'drf'\n", "user_bad:X", "built-in"),
        ("from gpuslice.sim.policies import Gang\nclass X(Gang):\n    pass\n", "user_bad:X", "is taken by"),
        ("", "not-installed", "neither module:Name nor an installed"),
    ],
)
def test_bad_references_are_usage_errors_that_say_why(
    user_modules: Path, source: str, reference: str, message: str
) -> None:
    if source:
        (user_modules / "user_bad.py").write_text(source)
    code, text = compare("--trace", "two-gang", "--policies", "gang", "--policy", reference)
    assert code == 2 and message in text, text
