"""`sim openb --policy module:Name`: a user's class runs beside the built-in ones; bad references say why."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.fgd.policies import FACTORIES

# The same algorithm as the built-in best-fit under another name: its curve must be identical.
SAME_AS_BESTFIT = (
    "from gpuslice.fgd.policies.heuristics import BestFitPolicy\n\n\n"
    "class Mine(BestFitPolicy):\n    name = 'my-bestfit'\n"
)


@pytest.fixture
def user_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    before = dict(FACTORIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    names = set(sys.modules)
    yield tmp_path
    FACTORIES.clear()
    FACTORIES.update(before)
    for name in set(sys.modules) - names:
        del sys.modules[name]


def openb(trace_dir: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        cli, ["sim", "openb", "--seeds", "42", "--ratio", "0.3", "--trace-dir", str(trace_dir), *args]
    )
    return result.exit_code, result.stdout, result.stderr


def test_a_user_policy_runs_beside_the_built_in_ones(trace_dir: Path, user_modules: Path) -> None:
    (user_modules / "mine.py").write_text(SAME_AS_BESTFIT)
    code, out, err = openb(trace_dir, "--policies", "best-fit", "--policy", "mine:Mine", "--json", "-")
    assert code == 0, err
    records = {record["policy"]: record for record in json.loads(out)}
    assert set(records) == {"best-fit", "my-bestfit"}
    assert records["my-bestfit"]["curve"] == records["best-fit"]["curve"]


@pytest.mark.parametrize(
    ("source", "reference", "message"),
    [
        ("", "no_such_module_here:X", "cannot import module"),
        ("def X(context): ...\n", "user_bad:X", "is not a class"),
        ("class X:\n    name = ''\n", "user_bad:X", "`name` must be"),
        ("class X:\n    name = 'x'\n    def place(self, shape, memory): ...\n", "user_bad:X", "needs a method bound"),
        (
            "from gpuslice.fgd.policies.heuristics import RandomPolicy\n"
            "class X(RandomPolicy):\n    name = 'best-fit'\n",
            "user_bad:X",
            "is taken by",
        ),
    ],
)
def test_bad_references_say_why(trace_dir: Path, user_modules: Path, source: str, reference: str, message: str) -> None:
    if source:
        (user_modules / "user_bad.py").write_text(source)
    code, _, err = openb(trace_dir, "--policies", "best-fit", "--policy", reference)
    assert code == 2 and "Invalid value for --policy:" in err and message in err, err
