"""The `gpuslice` command: each subcommand lives in its own module and is loaded on demand."""

from __future__ import annotations

import importlib

import click

# name -> "module:attribute" of a click command; loaded lazily so `gpuslice --help` stays fast
# and a subcommand's heavy imports (numpy, grpc) are paid only when it runs.
SUBCOMMANDS: dict[str, str] = {
    "plugin": "gpuslice.cli.plugin_cmd:plugin",
    "kubelet": "gpuslice.cli.kubelet_cmd:kubelet",
    "demo": "gpuslice.cli.demo_cmd:demo",
    "sim": "gpuslice.cli.sim_cmd:sim",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported when first used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command


@click.group(cls=LazyGroup)
@click.version_option(package_name="gpuslice")
def cli() -> None:
    """gpuslice: GPU device plugin, mock kubelet and GPU cluster scheduling simulator."""


def main() -> None:
    cli()
