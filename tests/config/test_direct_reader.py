"""The direct config reader (config.direct) answers a valid file as the pydantic schema does, and refers the rest."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gpuslice.config import direct, parse_config_text
from gpuslice.config.load import parse_config_mapping
from tests.support.config_paths import agreeing_read, snapshot

ROOT = Path(__file__).resolve().parents[2]


def shipped_configs() -> list[tuple[str, str]]:
    """Every v1 config we ship or document: deploy/ files and the YAML examples of docs/."""
    found = []
    for path in sorted((ROOT / "deploy").rglob("*.yaml")):
        text = path.read_text()
        if re.search(r"^version: v1$", text, flags=re.MULTILINE) and "kind:" not in text:
            found.append((str(path.relative_to(ROOT)), text))
    for path in sorted((ROOT / "docs").glob("*.md")):
        for number, block in enumerate(re.findall(r"```yaml\n(.*?)```", path.read_text(), flags=re.DOTALL)):
            if block.startswith("version: v1"):
                found.append((f"{path.relative_to(ROOT)}#{number}", block))
    return found


SHIPPED = shipped_configs()


def test_the_shipped_configs_are_found() -> None:
    names = [name for name, _ in SHIPPED]
    assert any(name.startswith("deploy/") for name in names) and any(name.startswith("docs/") for name in names)


@pytest.mark.parametrize(("name", "text"), SHIPPED, ids=[name for name, _ in SHIPPED])
def test_every_shipped_config_is_read_directly_as_the_schema_reads_it(name: str, text: str) -> None:
    data = yaml.safe_load(text)
    assert agreeing_read(data) is not None, f"{name} went to the schema"


# Mappings the schema reads, but not plainly: the direct reader refers them (and the schema answers).
REFERRED = [
    ({"flags": {"mig_strategy": "single"}}, "an attribute name for its key (pydantic's populate_by_name)"),
    ({"flags": {"plugin": {"device_id_strategy": "index"}}}, "the same, nested"),
    ({"_private": 1}, "a key pydantic keeps for itself"),
    ({"model_config": 1}, "the same"),
    ({"imex": {"channelIDs": {0}}}, "a set, which YAML's !!set gives"),
    ({"sharing": {"timeSlicing": {"resources": ({"name": "gpu", "replicas": 2},)}}}, "fine: a tuple"),
    ({1: "x"}, "a key that is not a string"),
]


@pytest.mark.parametrize(("data", "why"), REFERRED, ids=[why for _, why in REFERRED])
def test_what_the_direct_reader_refers_gets_the_schemas_answer(data: dict[Any, Any], why: str) -> None:
    agreeing_read(data)
    if direct.read_direct(data) is None:
        try:
            loaded = parse_config_mapping(data)
        except Exception as exc:  # the schema's refusal is the answer: it is what the file gets
            assert type(exc).__name__ == "ConfigError", why
        else:
            assert loaded.config is not None


def test_a_valid_file_is_answered_without_the_schema() -> None:
    text = "version: v1\nflags:\n  migStrategy: mixed\n  plugin: {deviceListStrategy: [envvar, cdi-cri]}\nextra: 1\n"
    data = yaml.safe_load(text)
    read = direct.read_direct(data)
    assert read is not None
    config, unknown = read
    assert config.flags.mig_strategy == "mixed" and config.flags.plugin.device_list_strategy == ("envvar", "cdi-cri")
    assert config.explicit == {"version", "flags"} and config.flags.explicit == {"mig_strategy", "plugin"}
    assert unknown == ("extra",)
    loaded = parse_config_text(text, "c.yaml")
    assert snapshot(loaded.config) == snapshot(config)
    assert loaded.warnings == ("c.yaml: unknown key 'extra' ignored",)


def test_an_invalid_file_gets_the_schemas_message_with_file_line_and_key() -> None:
    text = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 0\n"
    assert direct.read_direct(yaml.safe_load(text)) is None
    with pytest.raises(ValueError, match=r"^invalid config c.yaml:6: sharing.timeSlicing.resources\[0\].replicas: "):
        parse_config_text(text, "c.yaml")


# Per key, values the file may give (each valid) and values it may not: generated files mix them.
GOOD: dict[str, list[Any]] = {
    "bool": [True, False],
    "str": ["", "/run/nvidia/driver", "x"],
    "migStrategy": ["none", "single", "mixed", "dynamic"],
    "deviceDiscoveryStrategy": ["auto", "nvml", "tegra"],
    "deviceListStrategy": ["envvar", ["envvar", "cdi-cri"], ["volume-mounts"], "cdi-annotations"],
    "deviceIDStrategy": ["uuid", "index"],
    "sharedDevicesAllocationPolicy": ["distributed", "packed"],
    "sleepInterval": ["60s", "1m30s", "500ms", "infinite", 10**9, 2.5e9],
    "name": ["gpu", "nvidia.com/gpu", "mig-1g.10gb"],
    "replicas": [1, 2, 4, 8.0, 16384],
    "devices": ["all", 2, 1.0, [0, "1"], ["GPU-8a0d2a53-8b9e-4d3b-9a47-5c2f0e4f8d11"], ["0:1"]],
    "channelIDs": [[], [0], None, [0.0]],
    "cdiNames": [[], ["a", "b-1"], "x,y"],
    "pattern": ["*", "*A100*"],
}
BAD: list[Any] = [None, "true", 1, 0, -1, 2.5, "", "bogus", [], [1, "x"], {}, {"a": 1}, True, [None], "GPU-x::1"]

BOOLS = ("failOnInitError", "gdrcopyEnabled", "gdsEnabled", "mofedEnabled")
FLAG_KEYS = {
    **dict.fromkeys(BOOLS, "bool"),
    "migStrategy": "migStrategy",
    "mpsRoot": "str",
    "nvidiaDriverRoot": "str",
    "nvidiaDevRoot": "str",
    "useNodeFeatureAPI": "bool",
    "deviceDiscoveryStrategy": "deviceDiscoveryStrategy",
}
PLUGIN_KEYS = {
    "passDeviceSpecs": "bool",
    "deviceListStrategy": "deviceListStrategy",
    "deviceIDStrategy": "deviceIDStrategy",
    "cdiAnnotationPrefix": "str",
    "nvidiaCTKPath": "str",
    "containerDriverRoot": "str",
    "sharedDevicesAllocationPolicy": "sharedDevicesAllocationPolicy",
}
GFD_KEYS = {"oneshot": "bool", "noTimestamp": "bool", "sleepInterval": "sleepInterval", "outputFile": "str"}
RESOURCE_KEYS = {"name": "name", "rename": "name", "devices": "devices", "replicas": "replicas", "model": "str"}
EXTENSION_KEYS = {
    "honorDevices": "bool",
    "allowSingleReplica": "bool",
    "healthRecovery": "bool",
    "perContainerMpsLimits": "bool",
    "mpsVisibleDevices": "bool",
    "cdiFeatureFlags": "cdiNames",
    "cdiDisableHooks": "cdiNames",
}
UNKNOWN = st.sampled_from(["extra", "migstrategy", "Flags", "foo-bar"])


def value(kind: str, bad: bool) -> st.SearchStrategy[Any]:
    good = st.sampled_from(GOOD[kind])
    return st.one_of(good, st.sampled_from(BAD)) if bad else good


def block(keys: dict[str, str], bad: bool, **nested: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A mapping of some of `keys` (and nested blocks), with unknown keys among them when `bad`."""
    plain = {key: value(kind, bad) for key, kind in keys.items()}
    mapping = st.fixed_dictionaries({}, optional={**plain, **nested})
    if not bad:
        return mapping
    return st.tuples(mapping, st.dictionaries(UNKNOWN, st.integers(), max_size=2)).map(
        lambda pair: {**pair[1], **pair[0]}
    )


def documents(bad: bool) -> st.SearchStrategy[dict[str, Any]]:
    resource = block(RESOURCE_KEYS, bad).map(lambda entry: entry if bad else {"name": "gpu", "replicas": 2, **entry})
    resources = st.lists(resource, min_size=0 if bad else 1, max_size=3)
    replicated = block({"renameByDefault": "bool", "failRequestsGreaterThanOne": "bool"}, bad, resources=resources)
    replicated = (
        replicated if bad else replicated.map(lambda entry: {"resources": [{"name": "gpu", "replicas": 2}], **entry})
    )
    pattern = st.fixed_dictionaries({"pattern": value("pattern", bad), "name": value("name", bad)})
    sharing = st.one_of(
        st.fixed_dictionaries({}, optional={"timeSlicing": replicated}),
        st.fixed_dictionaries({"mps": replicated}),
    )
    top: dict[str, st.SearchStrategy[Any]] = {
        "version": st.sampled_from(["v1", ""] + (["v2", 1] if bad else [])),
        "flags": block(FLAG_KEYS, bad, plugin=block(PLUGIN_KEYS, bad), gfd=block(GFD_KEYS, bad)),
        "resources": block({}, bad, gpus=st.lists(pattern, max_size=2), mig=st.lists(pattern, max_size=2)),
        "sharing": sharing,
        "imex": block({"channelIDs": "channelIDs", "required": "bool"}, bad),
        "gpuslice": block(EXTENSION_KEYS, bad),
    }
    return block({}, bad, **top)


@given(documents(bad=False))
def test_fuzz_direct_reader_answers_every_valid_file_as_the_schema(data: dict[str, Any]) -> None:
    assert agreeing_read(data) is not None, data


@given(documents(bad=True))
def test_fuzz_direct_reader_never_accepts_what_the_schema_refuses(data: dict[str, Any]) -> None:
    agreeing_read(data)
