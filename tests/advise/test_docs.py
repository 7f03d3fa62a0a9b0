"""The documents about sharing say what the code does: same isolation facts, same rules, real commands."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gpuslice.advise import ISOLATION, RULES
from gpuslice.cli.main import cli

DOCS = Path(__file__).resolve().parents[2] / "docs"
OWN_DOCS = ("sharing-strategy.md", "allocation-path.md", "faq.md")
STRATEGY = (DOCS / "sharing-strategy.md").read_text()


def _code_blocks(text: str) -> list[list[str]]:
    return [block.splitlines() for block in re.findall(r"```(?:sh|console)\n(.*?)```", text, flags=re.DOTALL)]


def _commands(name: str) -> list[list[str]]:
    """Every `gpuslice ...` line in the document's shell blocks, as argv (comments and pipes cut off)."""
    found = []
    for block in _code_blocks((DOCS / name).read_text()):
        for line in block:
            line = line.strip().removeprefix("$ ")
            if line.startswith("gpuslice "):
                found.append(shlex.split(line.split(" | ")[0], comments=True)[1:])
    return found


def test_the_isolation_table_is_the_code_s() -> None:
    for mechanism, facts in ISOLATION.items():
        for text in (facts.memory, facts.faults, facts.performance, *facts.not_given):
            assert text in STRATEGY, f"{mechanism}: {text!r} is not in docs/sharing-strategy.md"


def test_every_rule_is_explained() -> None:
    for rule in RULES:
        assert f"`{rule}`" in STRATEGY


@pytest.mark.parametrize("name", OWN_DOCS)
def test_every_command_is_one_the_cli_accepts(name: str) -> None:
    commands = _commands(name)
    assert commands, f"{name} shows no gpuslice command"
    for argv in commands:
        # Our groups take no options of their own: each leading word names the next subcommand.
        command: click.Command = cli
        rest, path = list(argv), ["gpuslice"]
        while isinstance(command, click.Group):
            found = command.get_command(click.Context(command), rest[0])
            assert found is not None, f"{name}: no command {' '.join([*path, rest[0]])}"
            command, path, rest = found, [*path, rest[0]], rest[1:]
        try:
            command.make_context(path[-1], list(rest))
        except click.ClickException as exc:
            pytest.fail(f"{name}: `{' '.join([*path, *rest])}` is refused: {exc.format_message()}")


@pytest.mark.parametrize("name", OWN_DOCS)
def test_quoted_advise_output_is_what_advise_prints(name: str) -> None:
    for block in _code_blocks((DOCS / name).read_text()):
        lines = [line.strip() for line in block if line.strip()]
        if not lines or not lines[0].startswith("$ gpuslice advise "):
            continue
        result = CliRunner().invoke(cli, shlex.split(lines[0].removeprefix("$ "))[1:])
        assert result.exit_code == 0, result.output
        printed = [line.strip() for line in result.output.splitlines()]
        for quoted in lines[1:]:
            assert quoted in printed, f"{name}: {quoted!r} is not in the output of {lines[0]!r}"
