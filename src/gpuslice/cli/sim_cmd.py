"""`gpuslice sim`: the cluster scheduling simulator's commands."""

from __future__ import annotations

import logging

import click

from gpuslice.cli.lazy import LazyGroup
from gpuslice.logs import configure_logging

SIM_SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "compare": ("gpuslice.cli.sim_compare_cmd:compare", "Compare placement policies on a trace."),
    "lab": ("gpuslice.cli.sim_lab_cmd:lab", "The lab's run: the comparison table and the built-in checks, PASS/FAIL."),
    "openb": ("gpuslice.cli.sim_openb_cmd:openb", "Run the FGD paper's protocol on the Alibaba openb trace."),
    "openb-replay": ("gpuslice.cli.sim_replay_cmd:openb_replay", "Replay openb in real time with a FIFO queue."),
    "snapshot": (
        "gpuslice.cli.sim_snapshot_cmd:snapshot",
        "A live cluster's stranded GPUs, now and per packing policy.",
    ),
    "openb-report": ("gpuslice.cli.sim_openb_cmd:openb_report", "Our openb table beside the published one."),
}


@click.group(cls=LazyGroup, lazy_commands=SIM_SUBCOMMANDS)
def sim() -> None:
    """Simulate GPU cluster scheduling policies on synthetic and real traces."""
    configure_logging(level=logging.WARNING)  # its reports go to stdout; only warnings are logged
