"""The config each kustomization ships loads cleanly, selects its mechanism, and is what `advise` prints."""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gpuslice.cli.advise_cmd import advise
from gpuslice.config import parse_config_text
from tests.deploy.rendering import DEPLOY, TARGETS, find

EXPECTED = {  # target -> (sharing strategy, MIG strategy)
    "base": ("none", "none"),
    "overlays/time-slicing": ("time-slicing", "none"),
    "overlays/mps": ("mps", "none"),
    "overlays/mig-mixed": ("none", "mixed"),
}


@pytest.mark.parametrize("target", TARGETS)
def test_shipped_config_loads_without_warnings(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    text = find(rendered[target], "ConfigMap")["data"]["config.yaml"]
    loaded = parse_config_text(text, f"deploy/{target}/config.yaml")
    assert loaded.warnings == ()
    assert (loaded.config.sharing.strategy, loaded.config.flags.mig_strategy) == EXPECTED[target]


def _advise_commands(target: str) -> list[list[str]]:
    lines = (DEPLOY / target / "config.yaml").read_text().splitlines()
    return [shlex.split(line.lstrip("# "))[2:] for line in lines if line.lstrip("# ").startswith("gpuslice advise ")]


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "base"])
def test_overlay_config_is_what_advise_prints(target: str) -> None:
    commands = _advise_commands(target)
    assert len(commands) == 1, f"deploy/{target}/config.yaml should quote the advise command it came from"
    result = CliRunner().invoke(advise, [*commands[0], "--json"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(json.loads(result.output)["config_yaml"])
    shipped = yaml.safe_load((DEPLOY / target / "config.yaml").read_text())
    assert printed == shipped
