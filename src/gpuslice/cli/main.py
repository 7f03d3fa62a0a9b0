"""The `gpuslice` command: each subcommand lives in its own module and is loaded on demand."""

from __future__ import annotations

import sys

import click

from gpuslice.cli.lazy import LazyGroup

# Packages that only an extra brings (pyproject.toml [project.optional-dependencies]) -> that extra.
EXTRA_OF = {"rich": "sim", "matplotlib": "sim", "dask": "dask", "distributed": "dask"}
EXIT_MISSING_EXTRA = 3

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "plugin": ("gpuslice.cli.plugin_cmd:plugin", "Run the device plugin: one gRPC server per resource."),
    "dra": ("gpuslice.cli.dra_cmd:dra", "Run the DRA kubelet plugin, or print the ResourceSlices it publishes."),
    "kubelet": ("gpuslice.cli.kubelet_cmd:kubelet", "Run the mock kubelet (Registration + pod-resources)."),
    "demo": ("gpuslice.cli.demo_cmd:demo", "Narrated walkthrough: plugin and mock kubelet over real gRPC."),
    "sim": ("gpuslice.cli.sim_cmd:sim", "GPU cluster scheduling simulator."),
    "labels": ("gpuslice.cli.labels_cmd:labels", "Compute gpu-feature-discovery compatible node labels."),
    "advise": ("gpuslice.cli.advise_cmd:advise", "Recommend a GPU sharing mechanism for a tenant."),
}


@click.group(cls=LazyGroup, lazy_commands=SUBCOMMANDS)
@click.version_option(package_name="gpuslice")
def cli() -> None:
    """gpuslice: GPU device plugin, mock kubelet and GPU cluster scheduling simulator."""


def main() -> None:
    try:
        cli()
    except ModuleNotFoundError as exc:
        extra = EXTRA_OF.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        # The plugin image and `pip install gpuslice` leave the simulator's stack out on purpose.
        click.echo(
            f"gpuslice: error: this command needs the {extra!r} extra ({exc.name} is not installed); "
            f"install it with: pip install 'gpuslice[{extra}]'",
            err=True,
        )
        sys.exit(EXIT_MISSING_EXTRA)
