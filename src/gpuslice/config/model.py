"""NVIDIA's v1 config as frozen settings: the one config type the code reads (config.schema validates files into it)."""

from __future__ import annotations

from dataclasses import field, fields, is_dataclass
from typing import Any, Literal

from gpuslice.records import record

RESOURCE_PREFIX = "nvidia.com/"

DeviceRef = int | str

# Settings are built without validation (the defaults, or values config.schema has already checked), so
# they are plain frozen dataclasses: a plugin started without a config file never loads pydantic. A
# field's `key` metadata is its YAML key where that differs from the attribute (the schema's aliases).
# Each class has a docstring: dataclass() gives a class without one a signature-derived docstring, and
# computing that signature costs more than building the class (a plugin start creates ~70 dataclasses).
# `explicit` holds the attributes the file (or a flag or env var) set: what a re-validation keeps
# (apply_overrides), and what `labels` asks where "set explicitly" changes the meaning (gfd outputFile).


def setting(default: Any, key: str | None = None) -> Any:
    """A setting with its default and, where the YAML spells it otherwise, its key."""
    return field(default=default, metadata={"key": key} if key else {})


def _explicit_field() -> Any:
    return field(default=frozenset(), compare=False, repr=False)


@record(kw_only=True)
class PluginFlags:
    """`flags.plugin`: how Allocate answers name devices, and NVIDIA's CDI and device-list options."""

    # Unset (None): allocation.AllocateOptions.pass_device_specs holds the one default.
    pass_device_specs: bool | None = setting(None, "passDeviceSpecs")
    device_list_strategy: tuple[str, ...] = setting(("envvar",), "deviceListStrategy")
    device_id_strategy: Literal["uuid", "index"] = setting("uuid", "deviceIDStrategy")
    cdi_annotation_prefix: str = setting("cdi.k8s.io/", "cdiAnnotationPrefix")
    nvidia_ctk_path: str = setting("/usr/bin/nvidia-ctk", "nvidiaCTKPath")
    container_driver_root: str = setting("/driver-root", "containerDriverRoot")
    shared_devices_allocation_policy: Literal["distributed", "packed"] = setting(
        "distributed", "sharedDevicesAllocationPolicy"
    )
    explicit: frozenset[str] = _explicit_field()


@record(kw_only=True)
class GfdFlags:
    """`flags.gfd`: gpu-feature-discovery's settings (the `labels` command)."""

    oneshot: bool = False
    no_timestamp: bool = setting(False, "noTimestamp")
    sleep_interval: float | None = setting(60.0, "sleepInterval")  # seconds; None = infinite
    output_file: str = setting("/etc/kubernetes/node-feature-discovery/features.d/gfd", "outputFile")
    machine_type_file: str = setting("/sys/class/dmi/id/product_name", "machineTypeFile")
    explicit: frozenset[str] = _explicit_field()


@record(kw_only=True)
class Flags:
    """`flags`: MIG strategy, driver roots and the options every NVIDIA component reads."""

    # "vfio" is gpu-feature-discovery's only; the plugin refuses it at start-up (validate.py).
    # "dynamic" is a gpuslice extension (docs/dynamic-mig.md): MIG instances are created per Allocate.
    mig_strategy: Literal["none", "single", "mixed", "dynamic"] = setting("none", "migStrategy")
    fail_on_init_error: bool = setting(True, "failOnInitError")
    mps_root: str | None = setting(None, "mpsRoot")
    nvidia_driver_root: str = setting("/", "nvidiaDriverRoot")
    nvidia_dev_root: str | None = setting(None, "nvidiaDevRoot")
    gdrcopy_enabled: bool = setting(False, "gdrcopyEnabled")
    gds_enabled: bool = setting(False, "gdsEnabled")
    mofed_enabled: bool = setting(False, "mofedEnabled")
    use_node_feature_api: bool | None = setting(None, "useNodeFeatureAPI")
    device_discovery_strategy: Literal["auto", "nvml", "tegra", "vfio"] = setting("auto", "deviceDiscoveryStrategy")
    plugin: PluginFlags = PluginFlags()
    gfd: GfdFlags = GfdFlags()
    explicit: frozenset[str] = _explicit_field()

    @property
    def dev_root(self) -> str:
        """nvidiaDevRoot, which defaults to nvidiaDriverRoot when unset or empty (NVIDIA's rule)."""
        return self.nvidia_dev_root or self.nvidia_driver_root


@record(kw_only=True)
class ReplicatedResource:
    """One entry of `sharing.*.resources`: a resource shared `replicas` ways."""

    name: str = field()
    rename: str | None = None
    devices: Literal["all"] | int | tuple[DeviceRef, ...] = "all"
    replicas: int = field()
    # gpuslice extension (ignored by NVIDIA): restrict this entry to GPUs whose product name matches a glob.
    model: str | None = None
    explicit: frozenset[str] = _explicit_field()


@record(kw_only=True)
class ReplicatedResources:
    """`sharing.timeSlicing` or `sharing.mps`: the replicated resources and their naming."""

    rename_by_default: bool = setting(False, "renameByDefault")
    fail_requests_greater_than_one: bool | None = setting(None, "failRequestsGreaterThanOne")
    resources: tuple[ReplicatedResource, ...] = ()
    explicit: frozenset[str] = _explicit_field()


@record(kw_only=True)
class Sharing:
    """`sharing`: time-slicing or MPS (MPS wins when both are there)."""

    time_slicing: ReplicatedResources | None = field(default=None, metadata={"key": "timeSlicing"})
    mps: ReplicatedResources | None = None
    explicit: frozenset[str] = _explicit_field()

    @property
    def strategy(self) -> Literal["none", "time-slicing", "mps"]:
        """The active strategy: MPS wins whenever it is configured (NVIDIA's rule)."""
        if self.mps is not None:
            return "mps"
        if self.time_slicing is not None:
            return "time-slicing"
        return "none"

    @property
    def replicated(self) -> ReplicatedResources | None:
        """The replicated-resource block in force (the MPS one whenever `sharing.mps` is present)."""
        return self.mps if self.mps is not None else self.time_slicing


@record(kw_only=True)
class NamedPattern:
    """One `resources.gpus` / `resources.mig` entry (accepted and ignored, as NVIDIA does)."""

    pattern: str = field()
    name: str = field()
    explicit: frozenset[str] = _explicit_field()


@record(kw_only=True)
class Resources:
    """`resources`: NVIDIA's reserved name patterns."""

    gpus: tuple[NamedPattern, ...] = ()
    mig: tuple[NamedPattern, ...] = ()
    explicit: frozenset[str] = _explicit_field()


@record(kw_only=True)
class Imex:
    """`imex`: the IMEX channels Allocate hands out."""

    channel_ids: tuple[int, ...] = setting((), "channelIDs")
    required: bool = False
    explicit: frozenset[str] = _explicit_field()


@record(kw_only=True)
class Extensions:
    """gpuslice's own keys under `gpuslice:` (NVIDIA's plugin ignores unknown top-level keys).

    Each is off unless the config asks for it, so an NVIDIA config behaves exactly as with NVIDIA's plugin.
    """

    honor_devices: bool = setting(False, "honorDevices")  # honour sharing.*.resources[].devices/rename/model
    allow_single_replica: bool = setting(False, "allowSingleReplica")  # MPS/time-slicing with replicas: 1
    health_recovery: bool = setting(False, "healthRecovery")  # return a GPU to Healthy after a clean probe
    per_container_mps_limits: bool = setting(True, "perContainerMpsLimits")  # inject CUDA_MPS_* limits
    # MPS clients get CUDA_VISIBLE_DEVICES naming only their GPUs (NVIDIA #1299: a pod saw every GPU of the daemon).
    mps_visible_devices: bool = setting(True, "mpsVisibleDevices")
    # CDI spec generation: NVIDIA's --cdi-feature-flags and the hooks left out of the spec (names, or "all").
    cdi_feature_flags: tuple[str, ...] = setting((), "cdiFeatureFlags")
    cdi_disabled_hooks: tuple[str, ...] = setting((), "cdiDisableHooks")
    explicit: frozenset[str] = _explicit_field()


@record(kw_only=True)
class Config:
    """The whole v1 config file. Attribute names are snake_case; YAML keys are NVIDIA's camelCase."""

    version: str = "v1"
    flags: Flags = Flags()
    resources: Resources | None = None
    sharing: Sharing = Sharing()
    imex: Imex = Imex()
    gpuslice: Extensions = Extensions()
    explicit: frozenset[str] = _explicit_field()


def yaml_key(settings_type: type[Any], attribute: str) -> str:
    """The YAML key of one attribute of a settings class."""
    for item in fields(settings_type):
        if item.name == attribute:
            key: str = item.metadata.get("key", attribute)
            return key
    raise KeyError(f"{settings_type.__name__} has no setting {attribute!r}")


def go_duration(seconds: float | None) -> str:
    """A duration as the file spells it (nanoseconds exactly, or "infinite" for None)."""
    return "infinite" if seconds is None else f"{round(seconds * 1e9)}ns"


def to_document(settings: Any, *, explicit_only: bool = False) -> dict[str, Any]:
    """The settings as a file would spell them (YAML keys, lists, durations as text); validates back to equal.

    `explicit_only`: only what the file or an override set (`explicit`), and whatever differs from its
    default (settings built in code, or changed with dataclasses.replace), as a re-validation must see it.
    """
    document: dict[str, Any] = {}
    for item in fields(settings):
        if item.name == "explicit":
            continue
        value = getattr(settings, item.name)
        if explicit_only and item.name not in settings.explicit and value == item.default:
            continue
        if item.name == "sleep_interval":
            document[yaml_key(type(settings), item.name)] = go_duration(value)
        elif value is not None or item.name in settings.explicit:
            document[yaml_key(type(settings), item.name)] = _plain(value, explicit_only)
    return document


def _plain(value: Any, explicit_only: bool) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return to_document(value, explicit_only=explicit_only)
    if isinstance(value, tuple):
        return [_plain(item, explicit_only) for item in value]
    return value
