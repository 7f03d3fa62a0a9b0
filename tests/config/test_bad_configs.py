"""Every bad config is refused before anything registers, naming the key, the line and NVIDIA's reason."""

from __future__ import annotations

import pytest

from gpuslice.config import ConfigError, parse_config_text, validate_startup

TS = "sharing:\n  timeSlicing:\n    resources:\n"

# (id, config text, expected fragment of the error). Texts follow NVIDIA's where NVIDIA has one.
BAD_CONFIGS: list[tuple[str, str, str]] = [
    ("version", "version: v2\n", "version: unknown version: v2"),
    ("mig-strategy", "flags:\n  migStrategy: both\n", "flags.migStrategy: unknown MIG strategy: both"),
    ("fail-on-init", "flags:\n  failOnInitError: maybe\n", "flags.failOnInitError"),
    ("discovery", "flags:\n  deviceDiscoveryStrategy: cuda\n", "invalid --device-discovery-strategy option cuda"),
    ("list-strategy", "flags:\n  plugin:\n    deviceListStrategy: [envvar, nope]\n", "invalid strategy: nope"),
    ("list-strategy-type", "flags:\n  plugin:\n    deviceListStrategy: 3\n", "invalid deviceListStrategy: 3"),
    ("id-strategy", "flags:\n  plugin:\n    deviceIDStrategy: serial\n", "invalid --device-id-strategy option: serial"),
    (
        "alloc-policy",
        "flags:\n  plugin:\n    sharedDevicesAllocationPolicy: random\n",
        "invalid --shared-devices-allocation-policy option: random",
    ),
    ("sleep-interval", "flags:\n  gfd:\n    sleepInterval: soon\n", "flags.gfd.sleepInterval: invalid duration"),
    ("no-resources", "sharing:\n  timeSlicing:\n    renameByDefault: true\n", "no resources specified"),
    ("empty-resources", "sharing:\n  mps:\n    resources: []\n", "no resources specified"),
    ("no-name", TS + "    - replicas: 4\n", "no resource name specified"),
    ("no-replicas", TS + "    - name: gpu\n", "no replicas specified"),
    ("zero-replicas", TS + "    - name: gpu\n      replicas: 0\n", "number of replicas must be >= 2"),
    ("negative-replicas", TS + "    - name: gpu\n      replicas: -3\n", "number of replicas must be >= 2"),
    ("string-replicas", TS + "    - name: gpu\n      replicas: lots\n", "replicas must be an integer"),
    (
        "devices-string",
        TS + "    - name: gpu\n      replicas: 2\n      devices: some\n",
        "devices set as 'some' but the only valid string input is 'all'",
    ),
    (
        "devices-count",
        TS + "    - name: gpu\n      replicas: 2\n      devices: 0\n",
        "devices set as '0' but a count of devices must be > 0",
    ),
    (
        "devices-item",
        TS + "    - name: gpu\n      replicas: 2\n      devices: [GPU-UUID]\n",
        "unsupported type for device in devices list: GPU-UUID, str",
    ),
    (
        "devices-negative",
        TS + "    - name: gpu\n      replicas: 2\n      devices: [-1]\n",
        "unsupported type for device in devices list: -1, int",
    ),
    (
        "devices-float",
        TS + "    - name: gpu\n      replicas: 2\n      devices: 2.5\n",
        "unrecognized type for devices spec: 2.5",
    ),
    (
        "name-too-long",
        TS + "    - name: " + "g" * 60 + "\n      replicas: 2\n",
        "fully-qualified resource name must be 63 characters or less",
    ),
    (
        "name-format",
        TS + "    - name: GPU_Big\n      replicas: 2\n",
        "incorrect format for resource name 'nvidia.com/GPU_Big'",
    ),
    (
        "rename-format",
        TS + "    - name: gpu\n      rename: -bad\n      replicas: 2\n",
        "incorrect format for resource name 'nvidia.com/-bad'",
    ),
    ("pattern-missing", "resources:\n  gpus:\n  - name: gpu\n", "resources must have a 'pattern' field set"),
    ("pattern-name-missing", "resources:\n  mig:\n  - pattern: '*'\n", "resources must have a 'name' field set"),
    ("imex", "imex:\n  channelIDs: [1]\n", "channelIDs must be [] or [0]; found [1]"),
    ("not-a-mapping", "- just\n- a list\n", "the top level must be a mapping"),
    ("yaml-syntax", "flags: {migStrategy: mixed\n", "unable to parse config file"),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in BAD_CONFIGS], ids=[i for i, _, _ in BAD_CONFIGS])
def test_bad_config_is_refused_with_its_reason(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config_text(text, "cfg.yaml")
    assert expected in str(caught.value)
    assert "cfg.yaml" in str(caught.value)


def test_error_names_the_line() -> None:
    text = (
        "version: v1\nflags:\n  migStrategy: mixed\nsharing:\n  timeSlicing:\n    resources:\n"
        "    - name: gpu\n      replicas: 1x\n"
    )
    with pytest.raises(ConfigError, match=r"cfg.yaml:8: sharing.timeSlicing.resources\[0\].replicas"):
        parse_config_text(text, "cfg.yaml")


STARTUP: list[tuple[str, str, str]] = [
    (
        "mps-mixed",
        "flags:\n  migStrategy: mixed\n  mpsRoot: /run/nvidia/mps\nsharing:\n  mps:\n    resources:\n"
        "    - name: gpu\n      replicas: 2\n",
        "using --mig-strategy=mixed is not supported with MPS",
    ),
    (
        "mps-root",
        "sharing:\n  mps:\n    resources:\n    - name: gpu\n      replicas: 4\n",
        "using MPS requires --mps-root to be specified",
    ),
    ("one-replica", TS + "    - name: gpu\n      replicas: 1\n", "number of replicas must be >= 2"),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in STARTUP], ids=[i for i, _, _ in STARTUP])
def test_startup_validation(text: str, expected: str) -> None:
    config = parse_config_text(text).config
    with pytest.raises(ConfigError, match="unable to validate flags") as caught:
        validate_startup(config)
    assert expected in str(caught.value)


def test_single_replica_is_an_opt_in_extension() -> None:
    text = (
        "gpuslice:\n  allowSingleReplica: true\nflags:\n  mpsRoot: /run/nvidia/mps\n"
        "sharing:\n  mps:\n    resources:\n    - name: gpu\n      replicas: 1\n"
    )
    validate_startup(parse_config_text(text).config)


def test_table_has_at_least_twenty_cases() -> None:
    assert len(BAD_CONFIGS) + len(STARTUP) >= 20
