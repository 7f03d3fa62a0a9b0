"""Option handling the simulator commands share: seeds, the trace, the policy list with user policies, --out."""

from __future__ import annotations

from collections.abc import Sequence

import click
from rich.console import Console

from gpuslice.entrypoints import LoadError
from gpuslice.sim.core.model import SimModelError
from gpuslice.sim.experiments.seeds import SeedError, SeedSweep, parse_seeds
from gpuslice.sim.experiments.variants import add_user_policy
from gpuslice.sim.policies import canonical_policy
from gpuslice.sim.report.outputs import OutputError, write_outputs
from gpuslice.sim.traces import Trace, TraceError, resolve_trace


def resolve_seeds(seed: int, seed_list: str | None) -> list[int]:
    if seed_list is None:
        return [seed]
    try:
        return parse_seeds(seed_list)
    except SeedError as exc:
        raise click.BadParameter(str(exc), param_hint="--seeds") from exc


def load_trace_option(trace_ref: str, seed: int) -> Trace:
    try:
        return resolve_trace(trace_ref, seed)
    except (TraceError, SimModelError) as exc:
        raise click.BadParameter(str(exc), param_hint="--trace") from exc


def policy_names(policies: str | None, policy_refs: Sequence[str], defaults: Sequence[str]) -> list[str]:
    """--policies (or the defaults), then each --policy class loaded and registered under its own name."""
    if policies is None:
        names = list(defaults)
    else:
        names = [canonical_policy(name) for name in policies.split(",") if name.strip()]
        if not names:
            raise click.BadParameter("no policy given", param_hint="--policies")
    for reference in policy_refs:
        try:
            name = add_user_policy(reference)
        except (LoadError, SimModelError) as exc:
            raise click.BadParameter(str(exc), param_hint="--policy") from exc
        if name not in names:
            names.append(name)
    return names


def write_out_dir(sweep: SeedSweep, out_dir: str, step: float | None, status: Console) -> None:
    try:
        written = write_outputs(sweep, out_dir, step)
    except OutputError as exc:
        raise click.BadParameter(str(exc), param_hint="--step") from exc
    except OSError as exc:
        raise click.ClickException(f"cannot write into {out_dir}: {exc.strerror or exc}") from exc
    status.print(f"wrote {', '.join(path.name for path in written)} to {out_dir}")
