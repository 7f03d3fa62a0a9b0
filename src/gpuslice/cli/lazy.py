"""A click group whose subcommands are imported only when used."""

from __future__ import annotations

import importlib

import click


class LazyGroup(click.Group):
    """Subcommands are given as name -> "module:attribute" and imported on first use.

    Keeps `--help` fast and makes each subcommand pay only for its own imports (numpy, grpc):
    `lazy_commands` maps a name to ("module:attribute", one-line help shown by --help).
    """

    def __init__(
        self, *args: object, lazy_commands: dict[str, tuple[str, str]] | None = None, **kwargs: object
    ) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy_commands = dict(lazy_commands or {})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, self.lazy_commands[name][1]) for name in sorted(self.lazy_commands)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.lazy_commands) | set(super().list_commands(ctx)))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = self.lazy_commands.get(cmd_name)
        if entry is None:
            return super().get_command(ctx, cmd_name)
        target = entry[0]
        module_name, attribute = target.split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command
