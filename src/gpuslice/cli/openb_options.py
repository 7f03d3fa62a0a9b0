"""The openb commands' option checks: a usage mistake exits 2 with usage, naming its option."""

from __future__ import annotations

from pathlib import Path

import click

from gpuslice.cli.policy_catalogue import policies_elsewhere
from gpuslice.fgd.trace import OpenbTraceError, list_workloads, resolve_trace_dir

MAX_WORKLOADS = 64


def check_policies(policies: str, policy_refs: tuple[str, ...]) -> list[str]:
    """--policies in their one spelling, then each --policy class registered under its own name."""
    from gpuslice.entrypoints import LoadError
    from gpuslice.fgd.policies import FACTORIES
    from gpuslice.fgd.policies.loader import register_openb_policy
    from gpuslice.fgd.sweep import parse_policies

    try:
        users = [register_openb_policy(reference, FACTORIES) for reference in policy_refs]
    except LoadError as error:
        raise click.BadParameter(str(error), param_hint="--policy") from None
    try:
        chosen = parse_policies(policies)
    except ValueError as error:
        raise click.BadParameter(f"{error} ({policies_elsewhere('openb')})", param_hint="--policies") from None
    return chosen + [name for name in users if name not in chosen]


def check_trace_dir(trace_dir: Path | None) -> Path:
    try:
        return resolve_trace_dir(trace_dir)
    except OpenbTraceError as error:
        raise click.BadParameter(str(error), param_hint="--trace-dir") from None


def check_workloads(workloads: str, folder: Path, allow_all: bool = True) -> list[str]:
    """The workload names (or every one for `all`), each of which must have its pod list in `folder`."""
    available = list_workloads(folder)
    names = available if allow_all and workloads == "all" else [w.strip() for w in workloads.split(",") if w.strip()]
    unknown = [name for name in names if name not in available]
    if unknown or not names or len(names) > MAX_WORKLOADS:
        problem = (
            f"more than {MAX_WORKLOADS} workloads"
            if len(names) > MAX_WORKLOADS
            else f"unknown workload(s) {', '.join(map(repr, unknown)) or '(none given)'} in {folder}"
        )
        raise click.BadParameter(
            f"{problem} (available: {', '.join(available) or 'none'}{'; or all' if allow_all else ''})",
            param_hint="--workload",
        )
    return list(dict.fromkeys(names))
