"""Trace physics columns: tenant weights, checkpoint intervals and GPU memory run the extensions on user traces."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.sim.extensions.checkpoint import NEVER, Checkpointing
from gpuslice.sim.traces import TraceError, load_trace, parse_trace, trace_to_text

# A low-priority job checkpoints every 100 s; a high-priority job preempts it at t = 250 and runs 100 s.
# Saving and restoring cost nothing here, so the low job resumes at 350 from its 200 s checkpoint and ends at
# 350 + 800 = 1150; without checkpoints it starts over and ends at 350 + 1000 = 1350.
CHECKPOINTS = """# cluster: 1xh100x4
# checkpoint_save: 0
# checkpoint_restore: 0
job_id,submit,duration,pods,gpu,priority,checkpoint_interval
low,0,1000,1,4,0,{interval}
high,250,100,1,4,10,
"""


def compare(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["sim", "compare", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(("interval", "end"), [("100", "1150"), ("none", "1350")])
def test_checkpoint_intervals_from_the_trace_decide_what_a_preemption_costs(
    tmp_path: Path, interval: str, end: str
) -> None:
    path = tmp_path / "t.csv"
    path.write_text(CHECKPOINTS.format(interval=interval))
    code, _, err = compare("--trace", str(path), "--policies", "preempt", "--out", str(tmp_path / "o"))
    assert code == 0, err
    with (tmp_path / "o" / "jobs.csv").open(newline="") as stream:
        rows = [(row["job_id"], row["status"], row["start"], row["end"]) for row in csv.DictReader(stream)]
    assert rows == [("low", "evicted", "0", "250"), ("low", "done", "350", end), ("high", "done", "250", "350")]


def test_tenant_weights_attach_fairness_and_feed_weighted_drf() -> None:
    text = (
        "# cluster: 1xh100x4\njob_id,submit,duration,pods,gpu,tenant,tenant_weight\n"
        "a1,0,100,1,2,a,2\na2,0,100,1,2,a,\nb1,0,100,1,2,b,1\n"
    )
    trace = parse_trace(text, "w.csv")
    assert trace.physics.tenant_weights == {"a": 2.0, "b": 1.0}
    assert parse_trace(trace_to_text(trace)).physics == trace.physics


def test_tenant_weights_run_wdrf_with_the_fairness_report(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text(
        "# cluster: 1xh100x4\njob_id,submit,duration,pods,gpu,tenant,tenant_weight\na,0,9,1,2,a,2\nb,0,9,1,2,b,1\n"
    )
    code, out, err = compare("--trace", str(path), "--policies", "wdrf", "--json", "-")
    assert code == 0, err
    assert "jain_index" in json.loads(out)["results"][0]


def test_a_gpu_memory_column_runs_the_sharing_tiers_on_a_user_trace(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text(
        "# cluster: 1xh100x4\njob_id,submit,duration,pods,gpu,gpu_memory_mib\n"
        "inf-1,0,100,1,0.25,10000\ninf-2,0,100,1,0.25,\ntrain,0,100,1,2,\n"
    )
    trace = load_trace(path)
    assert trace.physics.gpu_memory == {"inf-1": 10000}
    code, out, err = compare("--trace", str(path), "--policies", "whole,mig,time-slicing", "--json", "-")
    assert code == 0, err
    assert [record["jobs_completed"] for record in json.loads(out)["results"]] == [3, 3, 3]
    code, _, err = compare("--trace", str(path), "--policies", "best-fit")
    assert code == 2 and "compares sharing plans" in err


def test_checkpoint_costs_round_trip() -> None:
    trace = parse_trace(CHECKPOINTS.format(interval="100"), "c.csv")
    costs = trace.physics.checkpoints
    assert costs is not None and costs.checkpoints == {"low": Checkpointing(100.0, 0.0, 0.0), "high": NEVER}
    assert parse_trace(trace_to_text(trace)).physics == trace.physics


HEADER = "# cluster: 1xh100x4\n"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("job_id,submit,duration,pods,gpu,tenant_weight\na,0,1,1,1,-1\n", "t.csv:3: tenant_weight: must be above 0"),
        ("job_id,submit,duration,pods,gpu,tenant_weight\na,0,1,1,1,x\n", "t.csv:3: tenant_weight: not a number"),
        ("job_id,submit,duration,pods,gpu,tenant_weight\na,0,1,1,1,inf\n", "t.csv:3: tenant_weight: must be above 0"),
        (
            "job_id,submit,duration,pods,gpu,tenant,tenant_weight\na,0,1,1,1,t,1\nb,0,1,1,1,t,2\n",
            "t.csv:4: tenant_weight: tenant 't' has 1.0 on line 3, here 2.0",
        ),
        ("job_id,submit,duration,pods,gpu,checkpoint_interval\na,0,1,1,1,0\n", "t.csv:3: checkpoint_interval: must be"),
        (
            "job_id,submit,duration,pods,gpu,checkpoint_interval\na,0,1,1,1,10\na,0,1,1,0,20\n",
            "t.csv:4: checkpoint_interval: job 'a' has 10.0 on line 3, here 20.0",
        ),
        ("job_id,submit,duration,pods,gpu,gpu_memory_mib\na,0,1,1,0.5,1.5\n", "t.csv:3: gpu_memory_mib: not a whole"),
        ("job_id,submit,duration,pods,gpu,gpu_memory_mib\na,0,1,1,0.5,0\n", "t.csv:3: gpu_memory_mib: must be 1 to"),
        (
            "# checkpoint_save: soon\njob_id,submit,duration,pods,gpu,checkpoint_interval\na,0,1,1,1,5\n",
            "t.csv: header checkpoint_save: not a number",
        ),
    ],
)
def test_bad_values_name_the_file_line_and_column(body: str, message: str) -> None:
    with pytest.raises(TraceError) as caught:
        parse_trace(HEADER + body, "t.csv")
    assert message in str(caught.value)
