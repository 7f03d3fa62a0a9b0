"""`gpuslice demo`: the narrated walkthrough (what `make demo` runs)."""

from __future__ import annotations

import json
import logging
import sys

import click

from gpuslice.demo import render_text, run_demo
from gpuslice.logs import configure_logging


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of text.")
@click.option("--verbose", is_flag=True, help="Also log what the plugin and the kubelet do.")
def demo(as_json: bool, verbose: bool) -> None:
    """Whole GPUs, time-slicing and MIG through a real gRPC plugin and a mock kubelet, with proofs."""
    configure_logging(level=logging.INFO if verbose else logging.ERROR)
    report = run_demo()
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else render_text(report))
    sys.exit(0 if report.ok else 1)
