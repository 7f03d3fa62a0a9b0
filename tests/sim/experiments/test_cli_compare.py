"""`gpuslice sim compare` end to end through click."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gpuslice.cli.main import cli


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["sim", "compare", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_to_stdout_is_pure_json_and_the_table_goes_to_stderr() -> None:
    code, out, err = invoke("--trace", "two-gang", "--policies", "first-fit,gang", "--json", "-")
    assert code == 0, err
    data = json.loads(out)
    assert data["trace"] == "two-gang"
    deadlocks = {r["policy"]: r["partial_allocation_deadlocks"] for r in data["results"]}
    assert deadlocks == {"first-fit": 1, "gang": 0}
    assert "first-fit" in err and "deadlocks" in err


def test_table_json_file_and_plot(tmp_path: Path) -> None:
    json_path, plot_path = tmp_path / "r.json", tmp_path / "r.png"
    code, out, err = invoke(
        "--trace", "adversarial:pairs=4", "--seed", "3", "--json", str(json_path), "--plot", str(plot_path), "--by-size"
    )
    assert code == 0, err
    assert "stranded" in out and "wait p99 by job size" in out
    assert [r["policy"] for r in json.loads(json_path.read_text())["results"]] == [
        "first-fit",
        "best-fit",
        "gang",
        "topology-aware",
    ]
    assert plot_path.stat().st_size > 10_000


def test_markdown_output() -> None:
    code, out, _ = invoke("--trace", "two-gang", "--policies", "gang", "--markdown")
    assert code == 0
    assert "| gang |" in out


def test_a_trace_file_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("# cluster: 1xh100x4\njob_id,submit,duration,pods,gpu\na,0,5,1,4\nb,0,5,1,4\n")
    code, out, err = invoke("--trace", str(path), "--policies", "best-fit", "--json", "-")
    assert code == 0, err
    assert json.loads(out)["results"][0]["makespan"] == 10


def test_unknown_policy_and_trace_are_usage_errors() -> None:
    code, _, err = invoke("--trace", "two-gang", "--policies", "first-fit,worst-fit")
    assert code == 2 and "unknown policy worst-fit" in err
    code, _, err = invoke("--trace", "no-such-trace")
    assert code == 2 and "neither a known trace" in err
