"""`gpuslice sim snapshot`: read a live cluster (read-only) and ask what each packing policy would strand."""

from __future__ import annotations

import json
import sys

import click

from gpuslice.cli.policy_catalogue import policies_elsewhere
from gpuslice.sim.traces.csv_format import MAX_TRACE_SECONDS
from gpuslice.snapshot.build import build_snapshot
from gpuslice.snapshot.kube import LightkubeReader, build_client
from gpuslice.snapshot.outputs import write_snapshot_outputs
from gpuslice.snapshot.render import text_tables, to_json
from gpuslice.snapshot.source import DEFAULT_DEADLINE_S, MAX_DEADLINE_S, SnapshotError, read_cluster
from gpuslice.snapshot.whatif import SNAPSHOT_POLICIES, canonical, what_if

MAX_POLICIES_TEXT = 4096


@click.command()
@click.option(
    "--kubeconfig", metavar="FILE", help="A kubeconfig [default: in-cluster, else $KUBECONFIG or ~/.kube/config]."
)
@click.option("--context", metavar="NAME", help="The kubeconfig context to use [default: the current one].")
@click.option(
    "--policies",
    default=",".join(SNAPSHOT_POLICIES),
    show_default=True,
    help="Comma-separated packing policies to re-place the pods with (first-fit, best-fit and openb's).",
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seeds the random policy.")
@click.option(
    "--timeout",
    "deadline_s",
    type=click.FloatRange(min=0, max=MAX_DEADLINE_S, min_open=True),
    default=DEFAULT_DEADLINE_S,
    show_default=True,
    help="Total deadline in seconds for reading the cluster (every page of every list).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the what-if as JSON instead of tables.")
@click.option(
    "--out",
    "out_dir",
    metavar="DIR",
    help="Also write the cluster and pods as an openb trace folder (sim openb --trace-dir DIR --workload snapshot).",
)
@click.option(
    "--duration",
    type=click.FloatRange(min=1, max=MAX_TRACE_SECONDS),
    default=3600.0,
    show_default=True,
    help="With --out: how long each pod runs in snapshot-trace.csv (the API does not say).",
)
def snapshot(
    kubeconfig: str | None,
    context: str | None,
    policies: str,
    seed: int,
    deadline_s: float,
    as_json: bool,
    out_dir: str | None,
    duration: float,
) -> None:
    """Stranded GPUs now, and what first-fit, best-fit, FGD... would strand with the same pods.

    Reads nodes and pods (and ResourceSlices and ResourceClaims where served) with list requests only; see
    docs/simulator.md for the model and deploy/ for the read-only ClusterRole."""
    if len(policies) > MAX_POLICIES_TEXT:
        raise click.BadParameter(f"longer than {MAX_POLICIES_TEXT} characters", param_hint="--policies")
    try:
        names = [canonical(name.strip()) for name in policies.split(",") if name.strip()]
    except ValueError as exc:
        raise click.BadParameter(f"{exc} ({policies_elsewhere('snapshot')})", param_hint="--policies") from None
    if not names:
        raise click.BadParameter("no policy given", param_hint="--policies")
    try:
        objects = read_cluster(LightkubeReader(build_client(kubeconfig, context)), deadline_s)
    except SnapshotError as exc:
        raise click.ClickException(str(exc)) from None
    result = what_if(build_snapshot(objects), list(dict.fromkeys(names)), seed)
    if as_json:
        sys.stdout.write(json.dumps(to_json(result), indent=1) + "\n")
    else:
        click.echo("\n".join(text_tables(result)))
    if out_dir:
        try:
            written, why_not = write_snapshot_outputs(result, out_dir, duration)
        except OSError as exc:
            raise click.ClickException(f"cannot write into {out_dir}: {exc.strerror or exc}") from None
        click.echo(f"wrote {', '.join(path.name for path in written)} to {out_dir}", err=True)
        if why_not:
            click.echo(f"no trace for sim compare: {why_not}", err=True)
