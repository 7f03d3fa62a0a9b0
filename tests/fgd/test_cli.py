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
        "openb", "--policies", "best-fit,random", "--seeds", "42,43", "--ratio", "1.0", "--json", str(target),
        "--trace-dir", str(trace_dir),
    )  # fmt: skip
    assert code == 0, err
    records = json.loads(target.read_text())
    assert [(r["policy"], r["seed"]) for r in records] == [
        ("best-fit", 42),
        ("best-fit", 43),
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
    assert "best-fit" in out and "random" in out


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
    ("args", "option", "message"),
    [
        (("openb", "--trace-dir", "/nonexistent/openb"), "--trace-dir", "/nonexistent/openb"),
        (("openb", "--policies", "gang"), "--policies", "sim compare and lab run first-fit, best-fit, gang"),
        (("openb", "--seeds", "x-y"), "--seeds", "is not N or N-M"),
        (("openb", "--workload", "nope"), "--workload", "unknown workload(s) 'nope'"),
        (("openb", "--policy", "nope:X"), "--policy", "cannot import module 'nope'"),
        (("openb-replay", "--workload", "nope"), "--workload", "unknown workload(s) 'nope'"),
        (("openb-replay", "--policies", "x"), "--policies", "unknown x"),
    ],
)
def test_usage_mistakes_exit_2_with_usage_naming_the_option(
    args: tuple[str, ...], option: str, message: str, tmp_path: Path
) -> None:
    # A folder of its own, so that each mistake is the only one with or without the real trace beside us
    # (a workload is looked for in the trace folder, which is checked first).
    (tmp_path / "openb_pod_list_default.csv").touch()
    folder = () if "--trace-dir" in args else ("--trace-dir", str(tmp_path))
    code, _, err = invoke(*args, *folder)
    assert code == 2 and "Usage:" in err and f"Invalid value for {option}:" in err and message in err


def test_both_spellings_of_best_fit_run_as_one_policy(trace_dir: Path) -> None:
    code, out, _ = invoke(
        "openb", "--policies", "bestfit,best-fit", "--seeds", "42", "--json", "-", "--trace-dir", str(trace_dir)
    )
    assert code == 0
    assert [record["policy"] for record in json.loads(out.splitlines()[0])] == ["best-fit"]


def test_a_missing_records_file_is_a_usage_error_naming_the_option() -> None:
    code, _, err = invoke("openb-report", "--json", "/nonexistent/r.json")
    assert code == 2 and "Invalid value for --json: cannot read records" in err


def test_a_records_file_that_is_not_json_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text("not json")
    code, _, err = invoke("openb-report", "--json", str(tmp_path / "r.json"))
    assert code == 1 and "cannot read records" in err
