"""`gpuslice sim openb-replay`: the openb pod lists replayed in real time with a FIFO queue, policy by policy."""

from __future__ import annotations

import json
from pathlib import Path

import click

from gpuslice.cli.console import table_console
from gpuslice.cli.executor_option import executor_option, open_executor
from gpuslice.cli.openb_options import check_policies, check_trace_dir, check_workloads
from gpuslice.executors import ExecutorSpec
from gpuslice.fgd.policies import PAPER_POLICIES
from gpuslice.fgd.policies.checked import PolicyFailure
from gpuslice.fsutil.atomic import atomic_write_text


@click.command("openb-replay")
@click.option("--workload", "workloads", default="default", show_default=True, help="Pod list(s), comma-separated.")
@click.option("--policies", default=",".join((*PAPER_POLICIES, "fgd-cpu")), show_default=True)
@click.option("--policy", "policy_refs", multiple=True, metavar="MODULE:NAME|ENTRY", help="Also run your own class.")
@click.option("--seed", type=click.IntRange(min=0), default=42, show_default=True, help="Tie order and node sample.")
@click.option(
    "--compress",
    type=click.FloatRange(1, 1e6),
    default=1.0,
    show_default=True,
    help="Divide arrival times by this (run times kept): the same pods at K times the load.",
)
@click.option(
    "--nodes",
    "node_fraction",
    type=click.FloatRange(0, 1, min_open=True),
    default=1.0,
    show_default=True,
    help="Replay on this seeded fraction of the nodes.",
)
@click.option("--trace-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Processes.")
@executor_option
@click.option("--json", "json_path", metavar="FILE|-", default=None, help="One record per (workload, policy).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--markdown", is_flag=True, help="Print the table as GitHub markdown.")
@click.option("--out", "out_dir", metavar="DIR", help="Write pods.csv, timeline.csv and summary.json into DIR.")
def openb_replay(
    workloads: str,
    policies: str,
    policy_refs: tuple[str, ...],
    seed: int,
    compress: float,
    node_fraction: float,
    trace_dir: Path | None,
    jobs: int,
    executor: ExecutorSpec,
    json_path: str | None,
    plot_path: Path | None,
    markdown: bool,
    out_dir: str | None,
) -> None:
    """Replay openb in time: arrivals at creation_time, departures after the traced run time, a FIFO queue."""

    from gpuslice.fgd.replay import ReplayResult, load_pod_times
    from gpuslice.fgd.replay_report import plot_replay, replay_markdown, replay_table, write_replay_outputs
    from gpuslice.fgd.sweep import ReplayJob, execute, run_replay_job, workload
    from gpuslice.fgd.trace import OpenbTraceError

    chosen = check_policies(policies, policy_refs)
    folder = check_trace_dir(trace_dir)
    names = check_workloads(workloads, folder, allow_all=False)
    try:
        for name in names:
            load_pod_times(workload(name, folder))  # a bad file fails here, before any run or worker starts
    except OpenbTraceError as error:
        raise click.BadParameter(str(error), param_hint="--trace-dir") from None
    try:
        todo = [
            ReplayJob(name, policy, seed, compress, node_fraction, folder, policy_refs)
            for name in names
            for policy in chosen
        ]

        def done(result: ReplayResult) -> None:
            click.echo(f"{result.workload:<12} {result.policy:<12} {result.seconds:5.1f} s", err=True)

        with open_executor(executor, jobs) as pool:
            results = execute(run_replay_job, todo, range(len(todo)), jobs, pool, done)
    except PolicyFailure as error:  # a user policy (--policy) raised or answered garbage: its name and what
        raise click.BadParameter(str(error), param_hint="--policy") from None
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    title = (
        f"openb replayed in real time: arrivals compressed {compress:g}x, {node_fraction:g} of the nodes, seed {seed}"
    )
    console = table_console(stderr=json_path == "-")
    if markdown:
        console.print(replay_markdown(results, title), markup=False, highlight=False, soft_wrap=True)
    else:
        console.print(replay_table(results, title))
    records = [result.record() for result in results]
    if json_path == "-":
        click.echo(json.dumps(records))
    elif json_path:
        atomic_write_text(json_path, json.dumps(records, indent=1) + "\n")
    if out_dir:
        written = write_replay_outputs(results, out_dir)
        click.echo(f"wrote {', '.join(path.name for path in written)} to {out_dir}", err=True)
    if plot_path is not None:
        plot_replay(results, plot_path)
        click.echo(f"plot written to {plot_path}", err=True)
