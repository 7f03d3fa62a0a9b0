"""NVIDIA's command-line flags and environment variables for config keys, and their precedence."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuslice.config.load import ConfigError, parse_config_mapping
from gpuslice.config.model import Config, to_document
from gpuslice.records import record


@record
class FlagSpec:
    """One config key that a flag or environment variable may override."""

    key: str  # dotted YAML path, e.g. "flags.migStrategy"
    flag: str  # primary long option, e.g. "--mig-strategy"
    envvars: tuple[str, ...]
    kind: str  # "str", "bool", "list"
    aliases: tuple[str, ...] = ()
    help: str = ""


# The plugin's flags, with NVIDIA's names (k8s-device-plugin v0.20).
PLUGIN_FLAGS: tuple[FlagSpec, ...] = (
    FlagSpec("flags.migStrategy", "--mig-strategy", ("MIG_STRATEGY",), "str", help="none | single | mixed | dynamic"),
    FlagSpec("flags.failOnInitError", "--fail-on-init-error", ("FAIL_ON_INIT_ERROR",), "bool"),
    FlagSpec("flags.mpsRoot", "--mps-root", ("MPS_ROOT",), "str"),
    FlagSpec("flags.nvidiaDriverRoot", "--driver-root", ("NVIDIA_DRIVER_ROOT",), "str", ("--nvidia-driver-root",)),
    FlagSpec("flags.nvidiaDevRoot", "--dev-root", ("NVIDIA_DEV_ROOT",), "str", ("--nvidia-dev-root",)),
    FlagSpec("flags.gdrcopyEnabled", "--gdrcopy-enabled", ("GDRCOPY_ENABLED",), "bool"),
    FlagSpec("flags.gdsEnabled", "--gds-enabled", ("GDS_ENABLED",), "bool"),
    FlagSpec("flags.mofedEnabled", "--mofed-enabled", ("MOFED_ENABLED",), "bool"),
    FlagSpec("flags.deviceDiscoveryStrategy", "--device-discovery-strategy", ("DEVICE_DISCOVERY_STRATEGY",), "str"),
    FlagSpec("flags.plugin.passDeviceSpecs", "--pass-device-specs", ("PASS_DEVICE_SPECS",), "bool"),
    FlagSpec("flags.plugin.deviceListStrategy", "--device-list-strategy", ("DEVICE_LIST_STRATEGY",), "list"),
    FlagSpec("flags.plugin.deviceIDStrategy", "--device-id-strategy", ("DEVICE_ID_STRATEGY",), "str"),
    FlagSpec("flags.plugin.cdiAnnotationPrefix", "--cdi-annotation-prefix", ("CDI_ANNOTATION_PREFIX",), "str"),
    FlagSpec(
        "flags.plugin.nvidiaCTKPath",
        "--nvidia-cdi-hook-path",
        ("NVIDIA_CDI_HOOK_PATH", "NVIDIA_CTK_PATH"),
        "str",
        ("--nvidia-ctk-path",),
    ),
    FlagSpec(
        "flags.plugin.containerDriverRoot",
        "--driver-root-ctr-path",
        ("DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT"),
        "str",
        ("--container-driver-root",),
    ),
    FlagSpec(
        "flags.plugin.sharedDevicesAllocationPolicy",
        "--shared-devices-allocation-policy",
        ("SHARED_DEVICES_ALLOCATION_POLICY",),
        "str",
    ),
    FlagSpec("imex.channelIDs", "--imex-channel-ids", ("IMEX_CHANNEL_IDS",), "list"),
    FlagSpec("imex.required", "--imex-required", ("IMEX_REQUIRED",), "bool"),
    # CLI-only in NVIDIA's plugin; kept under `gpuslice:` so that a config file may set them too.
    FlagSpec(
        "gpuslice.cdiFeatureFlags",
        "--cdi-feature-flags",
        ("CDI_FEATURE_FLAGS",),
        "list",
        help="CDI spec feature flags, comma-separated (docs/cdi.md).",
    ),
    FlagSpec(
        "gpuslice.cdiDisableHooks",
        "--cdi-disable-hooks",
        ("CDI_DISABLE_HOOKS",),
        "list",
        help="CDI hooks to leave out of the spec, comma-separated, or all (docs/cdi.md).",
    ),
)

# gpu-feature-discovery's flags (the labeller); MIG strategy and failOnInitError have GFD_ env names too.
GFD_FLAGS: tuple[FlagSpec, ...] = (
    FlagSpec("flags.migStrategy", "--mig-strategy", ("GFD_MIG_STRATEGY", "MIG_STRATEGY"), "str"),
    FlagSpec("flags.failOnInitError", "--fail-on-init-error", ("GFD_FAIL_ON_INIT_ERROR", "FAIL_ON_INIT_ERROR"), "bool"),
    FlagSpec("flags.gfd.oneshot", "--oneshot", ("GFD_ONESHOT",), "bool"),
    FlagSpec("flags.gfd.noTimestamp", "--no-timestamp", ("GFD_NO_TIMESTAMP",), "bool"),
    FlagSpec("flags.gfd.sleepInterval", "--sleep-interval", ("GFD_SLEEP_INTERVAL",), "str"),
    FlagSpec("flags.gfd.outputFile", "--output-file", ("GFD_OUTPUT_FILE",), "str", ("--output", "-o")),
    FlagSpec("flags.gfd.machineTypeFile", "--machine-type-file", ("GFD_MACHINE_TYPE_FILE",), "str"),
    FlagSpec(
        "flags.useNodeFeatureAPI",
        "--use-node-feature-api",
        ("GFD_USE_NODE_FEATURE_API", "USE_NODE_FEATURE_API"),
        "bool",
    ),
)

_TRUE = {"1", "t", "true", "yes", "y", "on"}
_FALSE = {"0", "f", "false", "no", "n", "off"}


def coerce(spec: FlagSpec, raw: Any, source: str | None = None) -> Any:
    """Turn a flag or environment string into the value the config key expects.

    `source` names where the text came from (the env var); by default the flag.
    """
    if not isinstance(raw, str):
        return raw
    where = f"{source or spec.flag} (config {spec.key})"
    if spec.kind == "bool":
        lowered = raw.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ConfigError(f"{where}: invalid boolean value {raw!r} (expected true or false)")
    if spec.kind == "list":
        items = [item.strip() for item in raw.split(",") if item.strip()]
        if spec.key == "imex.channelIDs":
            try:
                return [int(item) for item in items]
            except ValueError as exc:
                raise ConfigError(f"{where}: channel IDs must be integers, got {raw!r}") from exc
        return items
    return raw


def apply_overrides(config: Config, overrides: Mapping[str, Any], source: str = "<config>") -> Config:
    """Return `config` with explicitly set flag/env values applied (flag > env > file > default).

    `overrides` maps dotted YAML keys (FlagSpec.key) to already-coerced values; only keys that the
    user actually set belong in it, so a key absent from both keeps the file's value.
    """
    if not overrides:
        return config
    # Only what was set, spelled as a file would (lists, durations as text), so that it validates again.
    data = to_document(config, explicit_only=True)
    for key, value in overrides.items():
        target = data
        parts = key.split(".")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = value
    return parse_config_mapping(data, f"{source} (with flags and environment)").config


def overrides_from_env(specs: tuple[FlagSpec, ...], environ: Mapping[str, str]) -> dict[str, Any]:
    """Values set through environment variables only (the CLI layer adds explicit flags on top)."""
    found: dict[str, Any] = {}
    for spec in specs:
        for name in spec.envvars:
            if name in environ:
                found[spec.key] = coerce(spec, environ[name], name)
                break
    return found
