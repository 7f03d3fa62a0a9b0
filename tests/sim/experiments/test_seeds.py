"""`--seeds`: the seed list syntax, mean ± sd of every figure, in the table and the JSON."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.sim.experiments.seeds import MAX_SEEDS, SeedError, Spread, parse_seeds


@pytest.mark.parametrize(
    ("text", "seeds"),
    [("7", [7]), ("0-3", [0, 1, 2, 3]), ("1,3,9-10", [1, 3, 9, 10]), ("2,2,1-2", [2, 1]), (" 4 , 5 ", [4, 5])],
)
def test_seed_lists(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "a", "3-1", "-2", "1-x", f"0-{MAX_SEEDS}"])
def test_bad_seed_lists_are_refused(text: str) -> None:
    with pytest.raises(SeedError, match="seeds"):
        parse_seeds(text)


def test_spread_is_the_mean_and_the_sample_standard_deviation() -> None:
    assert Spread.of([1.0, 2.0, 3.0]) == Spread(2.0, 1.0, 3)
    assert Spread.of([5.0]) == Spread(5.0, 0.0, 1)


def test_seeds_give_mean_and_sd_in_the_table_and_the_json() -> None:
    result = CliRunner().invoke(
        cli,
        [
            "sim",
            "compare",
            "--trace",
            "synthetic:jobs=60,nodes=2",
            "--policies",
            "best-fit",
            "--seeds",
            "0-2",
            "--json",
            "-",
            "--markdown",
        ],
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["seeds"] == [0, 1, 2] and len(data["runs"]) == 3
    waits = [run["results"][0]["wait_p99"] for run in data["runs"]]
    spread = Spread.of(waits)
    assert data["mean_sd"][0]["wait_p99"] == {"mean": round(spread.mean, 6), "sd": round(spread.sd, 6)}
    assert spread.sd > 0  # the seeds draw different traces
    assert "seeds 0-2, mean ± sd" in result.stderr and " ± " in result.stderr


def test_every_mean_and_sd_share_one_precision_and_unit() -> None:
    import re

    result = CliRunner().invoke(
        cli,
        ["sim", "compare", "--trace", "synthetic:jobs=200,nodes=8", "--policies", "first-fit,gang", "--seeds", "0-2"],
    )
    assert result.exit_code == 0, result.output
    pairs = re.findall(r"(\d+(?:\.(\d+))?) ± (\d+(?:\.(\d+))?)( %| s| min| h)?", result.stdout)
    assert len(pairs) >= 20
    for _, mean_decimals, _, sd_decimals, _ in pairs:
        assert len(mean_decimals) == len(sd_decimals)
    assert not re.search(r"[0-9] (s|min|h) ± ", result.stdout)  # one unit after both numbers, not one each
