"""`--out DIR`: jobs.csv, timeline.csv and summary.json read back with csv, with known values and invariants."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from gpuslice.cli.main import cli

# Two 4-GPU jobs on one 4-GPU node: b waits for a. c can never fit (8 GPUs on a 4-GPU node): rejected.
TRACE = """# cluster: 1xh100x4
job_id,submit,duration,pods,gpu
a,0,100,1,4
b,0,100,1,4
c,10,100,1,8
"""


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["sim", "compare", *args])
    return result.exit_code, result.stdout + result.stderr


def read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as stream:
        return list(csv.DictReader(stream))


def test_jobs_and_timeline_of_a_tiny_trace_have_the_known_values(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE)
    out = ("--out", str(tmp_path / "o"), "--step", "50")
    code, text = run("--trace", str(trace), "--policies", "best-fit", "--markdown", *out)
    assert code == 0, text
    jobs = {row["job_id"]: row for row in read(tmp_path / "o" / "jobs.csv")}
    assert [(j["status"], j["start"], j["end"], j["wait"]) for j in jobs.values()] == [
        ("done", "0", "100", "0"),
        ("done", "100", "200", "100"),
        ("rejected", "", "", ""),
    ]
    assert jobs["b"]["nodes"] == "node-0000" and jobs["b"]["placement"] == "node-0000[0,1,2,3]"
    timeline = read(tmp_path / "o" / "timeline.csv")
    assert [row["time"] for row in timeline] == ["0", "50", "100", "150", "200"]
    assert [row["queued_jobs"] for row in timeline] == ["1", "1", "0", "0", "0"]
    assert [row["busy_gpus"] for row in timeline] == ["4", "4", "4", "4", "0"]
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["results"][0]["jobs_rejected"] == 1 and summary["results"][0]["jobs_unfinished"] == 0
    # Waits 0 and 100 s: p50 50 s, p99 99 s (linear interpolation); c is shown as rejected, not hidden.
    assert "| best-fit | 100.0 % | 100.0 % | 50 s | 99 s | 0.00 | 0 | 0 | 2/3 | 1 | 0 | 3.3 min | 2.5 min | 0 |" in text


def test_invariants_hold_with_evictions_and_deadlocks(tmp_path: Path) -> None:
    """Kueue over-commit evicts and requeues; first-fit deadlocks: every job is accounted once either way."""
    out = tmp_path / "o"
    code, text = run("--trace", "two-gang", "--policies", "first-fit,gang,kueue:overcommit=2", "--out", str(out))
    assert code == 0, text
    summary = {record["policy"]: record for record in json.loads((out / "summary.json").read_text())["results"]}
    rows = read(out / "jobs.csv")
    for policy, record in summary.items():
        mine = [row for row in rows if row["policy"] == policy]
        finals = [row for row in mine if row["status"] != "evicted"]
        assert sorted(Counter(row["job_id"] for row in finals).values()) == [1] * record["jobs_total"]
        assert sum(row["status"] == "evicted" for row in mine) == record["evictions"]
        assert sum(row["status"] == "done" for row in finals) == record["jobs_completed"]
        for row in mine:
            if row["wait"]:
                assert float(row["wait"]) >= 0 and float(row["start"]) >= float(row["submit"])
    assert summary["kueue:overcommit=2"]["evictions"] > 0
    deadlocked = [row for row in rows if row["policy"] == "first-fit"]
    assert {row["status"] for row in deadlocked} == {"deadlocked"} and all(row["nodes"] for row in deadlocked)
    for row in read(out / "timeline.csv"):
        allocated, busy, free = float(row["allocated_gpus"]), float(row["busy_gpus"]), float(row["free_gpus"])
        assert 0 <= busy <= allocated <= 64 and allocated + free == 64
        assert 0 <= float(row["stranded_gpus"]) <= free and 0 <= float(row["fragmentation"]) <= 1


def test_sharing_tiers_write_the_same_files(tmp_path: Path) -> None:
    out = tmp_path / "o"
    code, text = run("--trace", "sharing:jobs=40,nodes=1", "--policies", "mig,whole", "--out", str(out))
    assert code == 0, text
    rows = read(out / "jobs.csv")
    assert len(rows) == 80 and all(row["status"] == "done" and row["nodes"] == "node-0000" for row in rows)


def test_a_step_that_would_write_too_many_samples_is_refused(tmp_path: Path) -> None:
    code, text = run("--trace", "two-gang", "--policies", "gang", "--out", str(tmp_path), "--step", "0.01")
    assert code == 2 and "the limit is 100000" in text
