"""NVIDIA's config semantics: defaults, unknown keys, precedence, effective sharing rules."""

from __future__ import annotations

import pytest

from gpuslice.config import (
    PLUGIN_FLAGS,
    apply_overrides,
    effective_sharing,
    load_config,
    overrides_from_env,
    parse_config_text,
)


def test_defaults_match_nvidia() -> None:
    config = load_config(None).config
    assert config.flags.mig_strategy == "none"
    assert config.flags.fail_on_init_error is True
    assert config.flags.plugin.device_list_strategy == ("envvar",)
    assert config.flags.plugin.device_id_strategy == "uuid"
    assert config.flags.plugin.shared_devices_allocation_policy == "distributed"
    assert config.flags.gfd.sleep_interval == 60.0
    assert config.sharing.strategy == "none"


def test_unknown_keys_warn_but_load() -> None:
    loaded = parse_config_text("flags:\n  colour: red\nextra: 1\n", "c.yaml")
    assert loaded.warnings == ("c.yaml: unknown key 'extra' ignored", "c.yaml: unknown key 'flags.colour' ignored")


def test_device_list_strategy_string_or_list() -> None:
    single = parse_config_text("flags:\n  plugin:\n    deviceListStrategy: cdi-cri\n").config
    several = parse_config_text("flags:\n  plugin:\n    deviceListStrategy: [envvar, cdi-annotations]\n").config
    assert single.flags.plugin.device_list_strategy == ("cdi-cri",)
    assert several.flags.plugin.device_list_strategy == ("envvar", "cdi-annotations")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("60s", 60.0), ("1m30s", 90.0), ("500ms", 0.5), ("infinite", None), ("2h", 7200.0)],
)
def test_sleep_interval_go_durations(text: str, seconds: float | None) -> None:
    config = parse_config_text(f"flags:\n  gfd:\n    sleepInterval: {text}\n").config
    assert config.flags.gfd.sleep_interval == seconds


def test_precedence_flag_over_env_over_file() -> None:
    config = parse_config_text("flags:\n  migStrategy: single\n  plugin:\n    deviceIDStrategy: index\n").config
    env = overrides_from_env(PLUGIN_FLAGS, {"MIG_STRATEGY": "mixed", "PASS_DEVICE_SPECS": "true"})
    merged = apply_overrides(config, env)
    assert merged.flags.mig_strategy == "mixed"  # env beats the file
    assert merged.flags.plugin.pass_device_specs is True
    assert merged.flags.plugin.device_id_strategy == "index"  # file value kept when nothing overrides it
    flagged = apply_overrides(config, {**env, "flags.migStrategy": "none"})
    assert flagged.flags.mig_strategy == "none"  # an explicit flag beats the env


def test_env_list_values_split_on_commas() -> None:
    env = overrides_from_env(PLUGIN_FLAGS, {"DEVICE_LIST_STRATEGY": "envvar, cdi-cri"})
    assert apply_overrides(load_config(None).config, env).flags.plugin.device_list_strategy == ("envvar", "cdi-cri")


TS = "sharing:\n  timeSlicing:\n"


@pytest.mark.parametrize(
    ("text", "advertised", "warnings"),
    [
        (TS + "    resources:\n    - name: gpu\n      replicas: 4\n", "nvidia.com/gpu", 0),
        (
            TS + "    renameByDefault: true\n    resources:\n    - name: gpu\n      replicas: 4\n",
            "nvidia.com/gpu.shared",
            0,
        ),
        (TS + "    resources:\n    - name: gpu\n      rename: slice\n      replicas: 4\n", "nvidia.com/gpu", 1),
        (TS + "    resources:\n    - name: gpu\n      devices: [0]\n      replicas: 4\n", "nvidia.com/gpu", 1),
        (
            "gpuslice:\n  honorDevices: true\n" + TS + "    resources:\n    - name: gpu\n      rename: slice\n"
            "      replicas: 4\n",
            "nvidia.com/slice",
            0,
        ),
    ],
)
def test_effective_sharing_applies_nvidia_naming_rules(text: str, advertised: str, warnings: int) -> None:
    sharing = effective_sharing(parse_config_text(text).config)
    assert sharing.strategy == "time-slicing"
    assert [rule.advertised_name for rule in sharing.rules] == [advertised]
    assert len(sharing.warnings) == warnings
    assert sharing.fail_requests_greater_than_one is False


def test_mps_wins_over_time_slicing_and_enforces_one_per_request() -> None:
    text = (
        "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 8\n"
        "  mps:\n    resources:\n    - name: gpu\n      replicas: 2\n"
    )
    sharing = effective_sharing(parse_config_text(text).config)
    assert sharing.strategy == "mps"
    assert [rule.replicas for rule in sharing.rules] == [2]
    assert sharing.fail_requests_greater_than_one is True


def test_honoured_devices_and_model_globs() -> None:
    text = (
        "gpuslice:\n  honorDevices: true\nsharing:\n  timeSlicing:\n    resources:\n"
        "    - name: gpu\n      devices: [0, 1]\n      replicas: 4\n"
        "    - name: gpu\n      model: 'NVIDIA A100*'\n      replicas: 2\n"
    )
    rules = effective_sharing(parse_config_text(text).config).rules
    assert rules[0].devices == (0, 1)
    assert rules[1].applies_to_model("NVIDIA A100-SXM4-40GB")
    assert not rules[1].applies_to_model("NVIDIA H100 80GB HBM3")


@pytest.mark.parametrize("text", ["30s", "infinite", "1m30s"])
def test_overrides_round_trip_the_sleep_interval(text: str) -> None:
    config = parse_config_text(f"flags:\n  gfd:\n    sleepInterval: {text}\n").config
    merged = apply_overrides(config, {"flags.migStrategy": "mixed"})
    assert merged.flags.gfd.sleep_interval == config.flags.gfd.sleep_interval
    assert merged.flags.mig_strategy == "mixed"
