"""Config parity with NVIDIA's plugin: each difference found side by side is a row (accepted, refused, warnings)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuslice.config import (
    PLUGIN_FLAGS,
    ConfigError,
    apply_overrides,
    coerce,
    effective_sharing,
    overrides_from_env,
    parse_config_text,
    validate_startup,
)
from gpuslice.config.model import to_document
from gpuslice.config.validate import RESOURCES_IGNORED
from gpuslice.discovery import load_node_spec
from gpuslice.sharing import build_resources

TS = "sharing:\n  timeSlicing:\n    resources:\n"

# (id, config text, dotted attribute path, expected value): NVIDIA accepts these, so do we.
ACCEPTED: list[tuple[str, str, str, Any]] = [
    ("imex-null-channels", "imex:\n  channelIDs: null\n", "imex.channel_ids", ()),
    ("replicas-integral-float", TS + "    - name: gpu\n      replicas: 2.0\n", "sharing.time_slicing.resources", 2),
    (
        "devices-integral-float",
        TS + "    - name: gpu\n      replicas: 2\n      devices: 2.0\n",
        "sharing.time_slicing.resources.devices",
        2,
    ),
    ("channel-ids-integral-float", "imex:\n  channelIDs: [0.0]\n", "imex.channel_ids", (0,)),
    ("bool-true", "flags:\n  plugin:\n    passDeviceSpecs: true\n", "flags.plugin.pass_device_specs", True),
    # NVIDIA's sharing.mps is a pointer: null (or an empty value) is no MPS, where timeSlicing: null is refused.
    ("mps-null", "sharing:\n  mps: null\n", "sharing.mps", None),
    ("mps-empty-value", "sharing:\n  mps:\n", "sharing.mps", None),
    (
        "mps-null-next-to-time-slicing",
        TS + "    - name: gpu\n      replicas: 2\n  mps: null\n",
        "sharing.time_slicing.resources",
        2,
    ),
]


def _attribute(value: Any, path: str) -> Any:
    for part in path.split("."):
        value = getattr(value, part)
        if isinstance(value, tuple) and value and hasattr(value[0], "replicas"):
            value = value[0]
    return value.replicas if hasattr(value, "replicas") and path.endswith("resources") else value


@pytest.mark.parametrize(("text", "path", "expected"), [row[1:] for row in ACCEPTED], ids=[row[0] for row in ACCEPTED])
def test_nvidia_accepts_so_do_we(text: str, path: str, expected: Any) -> None:
    assert _attribute(parse_config_text(text, "c.yaml").config, path) == expected


# (id, config text, expected error fragment): NVIDIA refuses these; the text names the key, file and line.
REFUSED: list[tuple[str, str, str]] = [
    ("time-slicing-null", "sharing:\n  timeSlicing: null\n", "c.yaml:2: sharing.timeSlicing: no resources specified"),
    ("mps-empty", "sharing:\n  mps: {}\n", "c.yaml:2: sharing.mps: no resources specified"),
    (
        "bool-as-string",
        "flags:\n  plugin:\n    passDeviceSpecs: 'true'\n",
        "c.yaml:3: flags.plugin.passDeviceSpecs: expected a boolean (true or false), got the string 'true'",
    ),
    (
        "fail-on-init-string",
        'flags:\n  failOnInitError: "false"\n',
        "flags.failOnInitError: expected a boolean (true or false), got the string 'false'",
    ),
    (
        "channel-id-string",
        "imex:\n  channelIDs: ['0']\n",
        "imex.channelIDs[0]: expected an integer, got the string '0'",
    ),
    ("replicas-fraction", TS + "    - name: gpu\n      replicas: 2.5\n", "replicas must be an integer, got 2.5"),
    ("empty-name", TS + "    - name: ''\n      replicas: 2\n", "incorrect format for resource name 'nvidia.com/'"),
    ("flags-not-a-mapping", "flags: none\n", "c.yaml:1: flags: expected a mapping, got the string 'none'"),
    ("plugin-not-a-mapping", "flags:\n  plugin: [a]\n", "flags.plugin: expected a mapping, got a list"),
    ("string-key-gets-list", "flags:\n  mpsRoot: [a, b]\n", "flags.mpsRoot: expected a string, got a list"),
    ("string-key-gets-number", "flags:\n  plugin:\n    cdiAnnotationPrefix: 5\n", "got the number 5"),
    ("top-level-list", "- a\n- b\n", "c.yaml:1: the top level must be a mapping of config keys, got a list"),
    ("yaml-syntax", "version: v1\nflags: {migStrategy: mixed\n", "unable to parse config file c.yaml:3: YAML syntax"),
    (
        "bad-duration",
        "flags:\n  gfd:\n    sleepInterval: 5x\n",
        "c.yaml:3: flags.gfd.sleepInterval: invalid duration '5x'",
    ),
    ("duration-type", "flags:\n  gfd:\n    sleepInterval: [1]\n", "invalid duration: a list"),
    ("cdi-hook-name", "gpuslice:\n  cdiDisableHooks: ['rm -rf']\n", "gpuslice.cdiDisableHooks: 'rm -rf' is not a hook"),
    ("cdi-too-many-flags", "gpuslice:\n  cdiFeatureFlags: [" + ", ".join(["a"] * 33) + "]\n", "at most 32 names"),
]


@pytest.mark.parametrize(("text", "expected"), [row[1:] for row in REFUSED], ids=[row[0] for row in REFUSED])
def test_nvidia_refuses_so_do_we(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config_text(text, "c.yaml")
    assert expected in str(caught.value)


def test_vfio_discovery_is_refused_at_plugin_start() -> None:
    config = parse_config_text("flags:\n  deviceDiscoveryStrategy: vfio\n").config  # gpu-feature-discovery's value
    with pytest.raises(ConfigError, match="invalid --device-discovery-strategy option vfio"):
        validate_startup(config)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"FAIL_ON_INIT_ERROR": "maybe"}, "FAIL_ON_INIT_ERROR (config flags.failOnInitError): invalid boolean value"),
        ({"PASS_DEVICE_SPECS": "yes please"}, "PASS_DEVICE_SPECS (config flags.plugin.passDeviceSpecs)"),
        ({"IMEX_CHANNEL_IDS": "zero"}, "IMEX_CHANNEL_IDS (config imex.channelIDs): channel IDs must be integers"),
    ],
)
def test_bad_env_value_names_the_variable_and_key(environ: dict[str, str], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        overrides_from_env(PLUGIN_FLAGS, environ)


# A config file that sets every plugin key, as NVIDIA's users write them next to env overrides.
FULL_FILE = """
version: v1
flags:
  migStrategy: single
  failOnInitError: true
  mpsRoot: /run/nvidia/mps
  nvidiaDriverRoot: /run/nvidia/driver
  nvidiaDevRoot: /
  gdrcopyEnabled: false
  gdsEnabled: false
  mofedEnabled: false
  deviceDiscoveryStrategy: nvml
  plugin:
    passDeviceSpecs: false
    deviceListStrategy: [envvar, cdi-cri]
    deviceIDStrategy: uuid
    cdiAnnotationPrefix: cdi.k8s.io/
    nvidiaCTKPath: /usr/bin/nvidia-ctk
    containerDriverRoot: /driver-root
    sharedDevicesAllocationPolicy: distributed
  gfd:
    sleepInterval: 30s
sharing:
  timeSlicing:
    resources:
    - name: gpu
      replicas: 4
      devices: [0, 1]
imex:
  channelIDs: [0]
  required: false
gpuslice:
  cdiFeatureFlags: [disable-ipc-discoverer]
"""

# One flag or env text per plugin key, and the value it must leave in the merged config.
OVERRIDE_TEXT: dict[str, tuple[str, Any]] = {
    "flags.migStrategy": ("mixed", "mixed"),
    "flags.failOnInitError": ("false", False),
    "flags.mpsRoot": ("/mps", "/mps"),
    "flags.nvidiaDriverRoot": ("/x", "/x"),
    "flags.nvidiaDevRoot": ("/y", "/y"),
    "flags.gdrcopyEnabled": ("true", True),
    "flags.gdsEnabled": ("true", True),
    "flags.mofedEnabled": ("true", True),
    "flags.deviceDiscoveryStrategy": ("auto", "auto"),
    "flags.plugin.passDeviceSpecs": ("true", True),
    "flags.plugin.deviceListStrategy": ("cdi-annotations,envvar", ["cdi-annotations", "envvar"]),
    "flags.plugin.deviceIDStrategy": ("index", "index"),
    "flags.plugin.cdiAnnotationPrefix": ("example.com/", "example.com/"),
    "flags.plugin.nvidiaCTKPath": ("/usr/local/bin/nvidia-cdi-hook", "/usr/local/bin/nvidia-cdi-hook"),
    "flags.plugin.containerDriverRoot": ("/host", "/host"),
    "flags.plugin.sharedDevicesAllocationPolicy": ("packed", "packed"),
    "imex.channelIDs": ("", []),
    "imex.required": ("true", True),
    "gpuslice.cdiFeatureFlags": ("a,b", ["a", "b"]),
    "gpuslice.cdiDisableHooks": ("all", ["all"]),
}


def test_every_plugin_key_has_an_override_row() -> None:
    assert set(OVERRIDE_TEXT) == {spec.key for spec in PLUGIN_FLAGS}


@pytest.mark.parametrize("spec", PLUGIN_FLAGS, ids=[spec.key for spec in PLUGIN_FLAGS])
def test_config_file_plus_any_override_is_accepted(spec: Any) -> None:
    loaded = parse_config_text(FULL_FILE, "c.yaml")
    text, expected = OVERRIDE_TEXT[spec.key]
    merged = apply_overrides(loaded.config, {spec.key: coerce(spec, text)}, "c.yaml")
    value: Any = to_document(merged)
    for part in spec.key.split("."):
        value = value[part]
    assert value == expected
    # The keys nobody overrode keep the file's values.
    assert merged.flags.plugin.device_list_strategy == (
        ("envvar", "cdi-cri") if spec.key != "flags.plugin.deviceListStrategy" else ("cdi-annotations", "envvar")
    )


RENAMED = "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources: [{name: gpu, rename: x, replicas: 2}]"

# (id, config text, warning expected among effective_sharing's warnings)
WARNINGS: list[tuple[str, str, str]] = [
    (
        "rename-with-rename-by-default",
        RENAMED,
        "Setting the 'rename' field in sharing.timeSlicing.resources is not yet supported in the config. Ignoring...",
    ),
    ("custom-resources", "resources:\n  gpus:\n  - {pattern: '*A100*', name: a100}\n", RESOURCES_IGNORED),
    (
        "listed-twice",
        TS + "    - {name: gpu, replicas: 2}\n    - {name: gpu, replicas: 4}\n",
        "nvidia.com/gpu is listed more than once; advertising the union of its replicas (4 per device)",
    ),
]


@pytest.mark.parametrize(("text", "expected"), [row[1:] for row in WARNINGS], ids=[row[0] for row in WARNINGS])
def test_nvidia_warns_so_do_we(text: str, expected: str) -> None:
    assert any(expected in warning for warning in effective_sharing(parse_config_text(text).config).warnings)


def test_rename_by_default_wins_over_an_explicit_rename() -> None:
    (rule,) = effective_sharing(parse_config_text(RENAMED).config).rules
    assert rule.advertised_name == "nvidia.com/gpu.shared"


def test_resource_listed_twice_advertises_the_union() -> None:
    node = load_node_spec("preset:h100x4").node
    config = parse_config_text(TS + "    - {name: gpu, replicas: 2}\n    - {name: gpu, replicas: 4}\n").config
    (resource,) = build_resources(node, config).resources
    ids = [device.id for device in resource.devices]
    assert len(ids) == 16
    assert {device_id.split("::")[1] for device_id in ids} == {"0", "1", "2", "3"}
