"""--out, --json and --plot replace a planted link instead of writing through it, create nothing outside the
folder, and neutralise spreadsheet formulas in every CSV (tests of #25 item 9)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.fsutil.atomic import atomic_text_writer

HOSTILE_TRACE = """# cluster: 1xh100x4
job_id,submit,duration,pods,gpu,tenant
=HYPERLINK("http://x"),0,10,1,1,=cmd
+1+1,1,10,1,1,a
-2+3,2,10,1,1,a
@SUM(A1),3,10,1,1,a
"""


def _plant(folder: Path, names: list[str], outside: Path) -> dict[str, Path]:
    """In `folder`, each name a symlink: half to an existing victim file, half dangling into `outside`."""
    folder.mkdir(parents=True)
    outside.mkdir()
    planted = {}
    for i, name in enumerate(names):
        target = outside / f"victim-{name}" if i % 2 == 0 else outside / f"new-{name}"
        if i % 2 == 0:
            target.write_text("victim\n")
        (folder / name).symlink_to(target)
        planted[name] = target
    return planted


def _check_replaced(folder: Path, planted: dict[str, Path], outside: Path) -> None:
    for name in planted:
        path = folder / name
        assert path.is_file() and not path.is_symlink(), name
    assert sorted(p.name for p in outside.iterdir()) == sorted(
        t.name for t in planted.values() if t.name.startswith("victim-")
    )  # nothing new outside
    assert all(t.read_text() == "victim\n" for t in planted.values() if t.name.startswith("victim-"))


def test_sim_compare_out_json_and_plot(tmp_path: Path) -> None:
    trace = tmp_path / "hostile.csv"
    trace.write_text(HOSTILE_TRACE)
    out, outside = tmp_path / "out", tmp_path / "outside"
    planted = _plant(out, ["jobs.csv", "timeline.csv", "summary.json", "r.json", "p.png"], outside)
    result = CliRunner().invoke(
        cli,
        [
            *("sim", "compare", "--trace", str(trace), "--policies", "first-fit", "--out", str(out)),
            *("--json", str(out / "r.json"), "--plot", str(out / "p.png")),
        ],
    )
    assert result.exit_code == 0, result.output
    _check_replaced(out, planted, outside)
    rows = list(csv.DictReader((out / "jobs.csv").open()))
    assert [row["job_id"] for row in rows] == ['\'=HYPERLINK("http://x")', "'+1+1", "'-2+3", "'@SUM(A1)"]
    assert rows[0]["tenant"] == "'=cmd"


def test_sim_openb_and_replay_out(tmp_path: Path, small_openb: Path) -> None:
    runner = CliRunner()
    for command, extra in (("openb", ["--seeds", "1"]), ("openb-replay", [])):
        out, outside = tmp_path / command, tmp_path / f"outside-{command}"
        planted = _plant(out, ["pods.csv", "timeline.csv", "summary.json", "r.json"], outside)
        result = runner.invoke(
            cli,
            [
                *("sim", command, "--trace-dir", str(small_openb), "--workload", "small", "--policies", "best-fit"),
                *(*extra, "--out", str(out), "--json", str(out / "r.json")),
            ],
        )
        assert result.exit_code == 0, result.output
        _check_replaced(out, planted, outside)
        header = (out / "pods.csv").read_text().splitlines()[0].split(",")
        assert ("arrival_index" in header) == (command == "openb") and "gpu_milli" in header and "num_gpu" in header


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "data.csv"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_text_writer(target) as stream:
        stream.write("half")
        raise RuntimeError("disk full")
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["data.csv"]
