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

EXPECTED = {  # target -> ConfigMap key -> (sharing strategy, MIG strategy, device list strategy)
    "base": {"config.yaml": ("none", "none", ("envvar",))},
    "overlays/time-slicing": {"config.yaml": ("time-slicing", "none", ("envvar",))},
    "overlays/mps": {"config.yaml": ("mps", "none", ("envvar",))},
    "overlays/mig-mixed": {"config.yaml": ("none", "mixed", ("envvar",))},
    "overlays/per-node-config": {  # one config per node-label value; "default" for unlabelled nodes
        "default": ("none", "none", ("envvar",)),
        "a100-mig": ("none", "mixed", ("envvar",)),
        "l4-time-slicing": ("time-slicing", "none", ("envvar",)),
    },
    "overlays/cdi": {"config.yaml": ("none", "none", ("cdi-cri",))},
}
# Overlays whose config is what `gpuslice advise` prints (the file quotes the command).
ADVISED = ("overlays/time-slicing", "overlays/mps", "overlays/mig-mixed")


@pytest.mark.parametrize("target", TARGETS)
def test_shipped_configs_load_without_warnings(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    found = {}
    for key, text in find(rendered[target], "ConfigMap")["data"].items():
        loaded = parse_config_text(text, f"deploy/{target}: {key}")
        assert loaded.warnings == (), key
        config = loaded.config
        found[key] = (
            config.sharing.strategy,
            config.flags.mig_strategy,
            tuple(config.flags.plugin.device_list_strategy),
        )
    assert found == EXPECTED[target]


def _advise_commands(target: str) -> list[list[str]]:
    lines = (DEPLOY / target / "config.yaml").read_text().splitlines()
    return [shlex.split(line.lstrip("# "))[2:] for line in lines if line.lstrip("# ").startswith("gpuslice advise ")]


@pytest.mark.parametrize("target", ADVISED)
def test_overlay_config_is_what_advise_prints(target: str) -> None:
    commands = _advise_commands(target)
    assert len(commands) == 1, f"deploy/{target}/config.yaml should quote the advise command it came from"
    result = CliRunner().invoke(advise, [*commands[0], "--json"])
    assert result.exit_code == 0, result.output
    printed = yaml.safe_load(json.loads(result.output)["config_yaml"])
    shipped = yaml.safe_load((DEPLOY / target / "config.yaml").read_text())
    assert printed == shipped
