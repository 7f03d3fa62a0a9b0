"""`gpuslice sim openb` and `gpuslice sim openb-report`: the FGD paper's protocol on the Alibaba openb trace."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from gpuslice.cli.console import table_console
from gpuslice.cli.executor_option import executor_option, open_executor
from gpuslice.cli.openb_options import check_policies, check_trace_dir, check_workloads
from gpuslice.executors import ExecutorSpec
from gpuslice.fgd.policies import OUR_POLICIES, PAPER_POLICIES
from gpuslice.fgd.policies.checked import PolicyFailure
from gpuslice.fgd.protocol import DEFAULT_RATIO
from gpuslice.fgd.trace import OpenbTraceError, resolve_trace_dir
from gpuslice.fsutil.atomic import atomic_write_text

F = TypeVar("F", bound=Callable[..., Any])
# Records hold a few figures per (workload, policy, seed) run: a file far larger is not one of ours.
MAX_RECORDS_BYTES = 256 << 20


def _sweep_options(default_policies: str) -> Callable[[F], F]:
    def decorate(function: F) -> F:
        options = [
            click.option(
                "--workload",
                "workloads",
                default="default",
                show_default=True,
                help="Pod list(s): default, cpu050, gpushare40, ... comma-separated, or 'all'.",
            ),
            click.option("--policies", default=default_policies, show_default=True, help="Comma-separated policies."),
            click.option(
                "--policy",
                "policy_refs",
                multiple=True,
                metavar="MODULE:NAME|ENTRY",
                help="Also run your own policy class (module:Name or a gpuslice.fgd.policies entry point). Repeatable.",
            ),
            click.option("--seeds", default="42-51", show_default=True, help="Seeds: 42-51, 42,44 or 7."),
            click.option(
                "--ratio",
                type=click.FloatRange(min=0, min_open=True),
                default=DEFAULT_RATIO,
                show_default=True,
                help="Inflation target.",
            ),
            click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Processes."),
            click.option(
                "--trace-dir",
                type=click.Path(file_okay=False, path_type=Path),
                default=None,
                help="Folder of openb CSVs [default: $GPUSLICE_OPENB_DIR, else ../shared/traces/openb].",
            ),
        ]
        for option in reversed(options):
            function = option(function)
        return executor_option(function)

    return decorate


def _run(
    workloads: str,
    policies: str,
    policy_refs: tuple[str, ...],
    seeds: str,
    ratio: float,
    jobs: int,
    trace_dir: Path | None,
    executor: ExecutorSpec,
) -> list[Any]:
    from gpuslice.fgd.sweep import parse_seeds, progress_line, run_sweep

    chosen_policies = check_policies(policies, policy_refs)
    try:
        chosen_seeds = parse_seeds(seeds)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--seeds") from None
    folder = check_trace_dir(trace_dir)
    names = check_workloads(workloads, folder)
    try:
        with open_executor(executor, jobs) as pool:
            return run_sweep(
                names,
                chosen_policies,
                chosen_seeds,
                ratio=ratio,
                trace_dir=folder,
                jobs=jobs,
                progress=lambda record: click.echo(progress_line(record), err=True),
                executor=pool,
                policy_refs=policy_refs,
            )
    except OpenbTraceError as error:  # bad input files: exit 2, as every front end does for bad input
        raise click.BadParameter(str(error), param_hint="--trace-dir") from None
    except PolicyFailure as error:  # a user policy (--policy) raised or answered garbage: its name and what
        raise click.BadParameter(str(error), param_hint="--policy") from None
    except ValueError as error:
        raise click.ClickException(str(error)) from None


@click.command("openb")
@_sweep_options(",".join(PAPER_POLICIES))
@click.option(
    "--json",
    "json_path",
    default=None,
    metavar="FILE|-",
    help="Write one record per (workload, policy, seed) to FILE, or - for stdout.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Write pods.csv, timeline.csv and summary.json into DIR (see docs/openb.md).",
)
def openb(
    workloads: str,
    policies: str,
    policy_refs: tuple[str, ...],
    seeds: str,
    ratio: float,
    jobs: int,
    trace_dir: Path | None,
    executor: ExecutorSpec,
    json_path: str | None,
    out_dir: Path | None,
) -> None:
    """Run the FGD paper's inflation protocol and report unallocated GPUs by policy and seed."""
    started = time.perf_counter()
    records = _run(workloads, policies, policy_refs, seeds, ratio, jobs, trace_dir, executor)
    if json_path == "-":
        json.dump(records, sys.stdout)
        sys.stdout.write("\n")
    elif json_path:
        atomic_write_text(json_path, json.dumps(records) + "\n")
    if out_dir is not None:
        from gpuslice.fgd.outputs import write_openb_outputs

        try:
            written = write_openb_outputs(records, out_dir, resolve_trace_dir(trace_dir))
        except OSError as error:
            raise click.ClickException(f"cannot write {out_dir}: {error.strerror or error}") from None
        click.echo(f"wrote {', '.join(str(path) for path in written)}", err=True)
    from gpuslice.fgd.sweep import summary_lines

    for line in summary_lines(records):
        click.echo(line, err=json_path == "-")
    click.echo(f"{len(records)} runs in {time.perf_counter() - started:.1f} s", err=json_path == "-")


@click.command("openb-report")
@_sweep_options(",".join((*PAPER_POLICIES, *OUR_POLICIES)))
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read records from FILE instead of running.",
)
@click.option(
    "--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write curves (PNG)."
)
def openb_report(
    workloads: str,
    policies: str,
    policy_refs: tuple[str, ...],
    seeds: str,
    ratio: float,
    jobs: int,
    trace_dir: Path | None,
    executor: ExecutorSpec,
    json_path: Path | None,
    plot_path: Path | None,
) -> None:
    """Print our table beside the published one (default trace) and draw the curves."""

    from gpuslice.fgd.report import plot_curves, render

    if json_path is not None:
        from gpuslice.fsutil.textread import InputFileError, read_bounded_text

        try:
            text = read_bounded_text(json_path, "records file", MAX_RECORDS_BYTES)
        except (OSError, InputFileError) as error:  # a path that names no readable file: a usage mistake
            raise click.BadParameter(f"cannot read records from {json_path}: {error}", param_hint="--json") from None
        try:
            records = json.loads(text)
        except ValueError as error:
            raise click.ClickException(f"cannot read records from {json_path}: {error}") from None
        if not isinstance(records, list) or not records:
            raise click.ClickException(
                f"{json_path} holds no records (expected the list written by `sim openb --json`)"
            )
        from gpuslice.fgd.policies import canonical_openb_policy

        for record in records:  # records written before the one spelling say `bestfit`
            if isinstance(record, dict) and isinstance(record.get("policy"), str):
                record["policy"] = canonical_openb_policy(record["policy"])
    else:
        records = _run(workloads, policies, policy_refs, seeds, ratio, jobs, trace_dir, executor)
    console = table_console()
    render(records, console)
    if plot_path is not None:
        workload = "default" if any(r["workload"] == "default" for r in records) else records[0]["workload"]
        try:
            click.echo(f"curves written to {plot_curves(records, plot_path, workload)}")
        except ValueError as error:
            raise click.ClickException(str(error)) from None
