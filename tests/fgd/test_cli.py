"""`gpuslice sim openb` and `gpuslice sim openb-report` through click."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["sim", *args])
    return result.exit_code, result.stdout, result.stderr


def test_openb_writes_one_record_per_policy_and_seed(trace_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "out" / "runs.json"
    code, out, err = invoke(
        "openb", "--policies", "bestfit,random", "--seeds", "42,43", "--ratio", "1.0", "--json", str(target),
        "--trace-dir", str(trace_dir),
    )  # fmt: skip
    assert code == 0, err
    records = json.loads(target.read_text())
    assert [(r["policy"], r["seed"]) for r in records] == [
        ("bestfit", 42),
        ("bestfit", 43),
        ("random", 42),
        ("random", 43),
    ]
    for record in records:
        assert {
            "workload",
            "policy",
            "seed",
            "unallocated_gpu_pct_at_100",
            "unallocated_gpu_pct_at_130",
            "curve",
        } <= set(record)
        assert record["workload"] == "default" and len(record["curve"]) == 101
    assert "bestfit" in out and "random" in out


def test_json_to_stdout_is_pure_json_and_the_report_reads_it(trace_dir: Path, tmp_path: Path) -> None:
    code, out, err = invoke("openb", "--policies", "fgd", "--seeds", "42", "--json", "-", "--trace-dir", str(trace_dir))
    assert code == 0, err
    (tmp_path / "r.json").write_text(out)
    assert json.loads(out)[0]["policy"] == "fgd" and "fgd" in err
    plot = tmp_path / "curves.png"
    code, out, err = invoke("openb-report", "--json", str(tmp_path / "r.json"), "--plot", str(plot))
    assert code == 0, err
    assert "Unallocated GPU %" in out and "4.77 ± 0.11" in out and "FGD" in out
    assert plot.stat().st_size > 10_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("openb", "--trace-dir", "/nonexistent/openb"), "/nonexistent/openb"),
        (("openb", "--policies", "best-fit"), "unknown best-fit"),
        (("openb", "--seeds", "x-y"), "is not N or N-M"),
        (("openb-report", "--json", "/nonexistent/r.json"), "cannot read records"),
    ],
)
def test_bad_options_fail_with_a_clear_message(args: tuple[str, ...], message: str) -> None:
    code, _, err = invoke(*args)
    assert code != 0 and message in err
