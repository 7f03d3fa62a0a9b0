"""NVIDIA's v1 device-plugin config file as pydantic models (keys spelled as in NVIDIA's YAML)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator, model_validator
from pydantic.functional_validators import BeforeValidator

from gpuslice.config.limits import MAX_REPLICAS
from gpuslice.gpu.refs import InvalidDeviceReference, parse_device_reference

RESOURCE_PREFIX = "nvidia.com/"
MAX_RESOURCE_NAME_LENGTH = 63


def strict_bool(value: Any) -> Any:
    """A YAML/JSON boolean only: NVIDIA's decoder refuses "true" (a string) where it wants a bool."""
    if isinstance(value, bool):
        return value
    raise ValueError(f"expected a boolean (true or false), got {describe_value(value)}")


def integral(value: Any) -> Any:
    """An integer, or a float with no fractional part (NVIDIA's YAML-to-JSON step turns 2.0 into 2)."""
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {describe_value(value)}")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int):
        return value
    raise ValueError(f"expected an integer, got {describe_value(value)}")


def describe_value(value: Any) -> str:
    """The YAML type and value of a wrong input, for error texts ("the string 'true'")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


YamlBool = Annotated[bool, BeforeValidator(strict_bool)]


class _Model(BaseModel):
    # NVIDIA ignores unknown keys; we accept them too and report them as warnings (see load.py).
    model_config = ConfigDict(populate_by_name=True, extra="allow", frozen=True)


class PluginFlags(_Model):
    # Unset (None): allocation.AllocateOptions.pass_device_specs holds the one default.
    pass_device_specs: YamlBool | None = Field(None, alias="passDeviceSpecs")
    device_list_strategy: tuple[str, ...] = Field(("envvar",), alias="deviceListStrategy")
    device_id_strategy: Literal["uuid", "index"] = Field("uuid", alias="deviceIDStrategy")
    cdi_annotation_prefix: str = Field("cdi.k8s.io/", alias="cdiAnnotationPrefix")
    nvidia_ctk_path: str = Field("/usr/bin/nvidia-ctk", alias="nvidiaCTKPath")
    container_driver_root: str = Field("/driver-root", alias="containerDriverRoot")
    shared_devices_allocation_policy: Literal["distributed", "packed"] = Field(
        "distributed", alias="sharedDevicesAllocationPolicy"
    )

    @field_validator("device_id_strategy", mode="before")
    @classmethod
    def _id_strategy(cls, value: Any) -> Any:
        if value not in ("uuid", "index"):
            raise ValueError(f"invalid --device-id-strategy option: {value}")
        return value

    @field_validator("shared_devices_allocation_policy", mode="before")
    @classmethod
    def _policy(cls, value: Any) -> Any:
        if value not in ("distributed", "packed"):
            raise ValueError(f"invalid --shared-devices-allocation-policy option: {value}")
        return value

    @field_validator("device_list_strategy", mode="before")
    @classmethod
    def _string_or_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return (value,)
        # A tuple is what a loaded config holds; re-validating it (file + overrides) must accept it.
        if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
            return tuple(value)
        raise ValueError(f"invalid deviceListStrategy: {value!r}")

    @field_validator("device_list_strategy")
    @classmethod
    def _known_strategies(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        known = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
        for strategy in value:
            if strategy not in known:
                raise ValueError(f"invalid --device-list-strategy option: invalid strategy: {strategy}")
        return value


def parse_duration(value: Any) -> float | None:
    """A Go duration ("60s", "1m30s", "500ms"), an integer of nanoseconds, or "infinite" (None)."""
    if isinstance(value, bool):
        raise ValueError(f"invalid duration: {describe_value(value)}")
    if isinstance(value, int | float):
        return float(value) / 1e9
    if not isinstance(value, str):
        raise ValueError(f"invalid duration: {describe_value(value)}")
    if value == "infinite":
        return None
    nanoseconds = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise ValueError(f"invalid duration {value!r} (a Go duration such as 60s or 1m30s, or infinite)")
    return sum(float(number) * nanoseconds[unit] for number, unit in parts) / 1e9


class GfdFlags(_Model):
    oneshot: YamlBool = False
    no_timestamp: YamlBool = Field(False, alias="noTimestamp")
    sleep_interval: float | None = Field(60.0, alias="sleepInterval")  # seconds; None = infinite
    output_file: str = Field("/etc/kubernetes/node-feature-discovery/features.d/gfd", alias="outputFile")
    machine_type_file: str = Field("/sys/class/dmi/id/product_name", alias="machineTypeFile")

    @field_validator("sleep_interval", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float | None:
        return parse_duration(value)

    @field_serializer("sleep_interval")
    def _duration_text(self, value: float | None) -> str:
        # Serialise as a Go duration so that dump -> validate (apply_overrides) round-trips.
        return "infinite" if value is None else f"{round(value * 1e9)}ns"


class Flags(_Model):
    # "vfio" is gpu-feature-discovery's only; the plugin refuses it at start-up (validate.py).
    # "dynamic" is a gpuslice extension (docs/dynamic-mig.md): MIG instances are created per Allocate.
    mig_strategy: Literal["none", "single", "mixed", "dynamic"] = Field("none", alias="migStrategy")
    fail_on_init_error: YamlBool = Field(True, alias="failOnInitError")
    mps_root: str | None = Field(None, alias="mpsRoot")
    nvidia_driver_root: str = Field("/", alias="nvidiaDriverRoot")
    nvidia_dev_root: str | None = Field(None, alias="nvidiaDevRoot")
    gdrcopy_enabled: YamlBool = Field(False, alias="gdrcopyEnabled")
    gds_enabled: YamlBool = Field(False, alias="gdsEnabled")
    mofed_enabled: YamlBool = Field(False, alias="mofedEnabled")
    use_node_feature_api: YamlBool | None = Field(None, alias="useNodeFeatureAPI")
    device_discovery_strategy: Literal["auto", "nvml", "tegra", "vfio"] = Field("auto", alias="deviceDiscoveryStrategy")
    plugin: PluginFlags = PluginFlags()
    gfd: GfdFlags = GfdFlags()

    @property
    def dev_root(self) -> str:
        """nvidiaDevRoot, which defaults to nvidiaDriverRoot when unset or empty (NVIDIA's rule)."""
        return self.nvidia_dev_root or self.nvidia_driver_root

    @field_validator("mig_strategy", mode="before")
    @classmethod
    def _mig_strategy(cls, value: Any) -> Any:
        if value not in ("none", "single", "mixed", "dynamic"):
            raise ValueError(f"unknown MIG strategy: {value}")
        return value

    @field_validator("device_discovery_strategy", mode="before")
    @classmethod
    def _discovery(cls, value: Any) -> Any:
        if value not in ("auto", "nvml", "tegra", "vfio"):
            raise ValueError(f"invalid --device-discovery-strategy option {value}")
        return value


DeviceRef = int | str

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _is_devices_list_item(item: Any) -> bool:
    """A `devices` list item as NVIDIA takes it: a device reference (gpu.refs) with no replica suffix or spaces."""
    try:
        reference = parse_device_reference(item)
    except InvalidDeviceReference:
        return False
    return reference.replica is None and reference.text == str(item)


def qualify_resource_name(value: str) -> str:
    """Prefix a bare name with nvidia.com/ and apply NVIDIA's name checks (exact texts)."""
    full = value if value.startswith(RESOURCE_PREFIX) else RESOURCE_PREFIX + value
    if len(full) > MAX_RESOURCE_NAME_LENGTH:
        raise ValueError(f"fully-qualified resource name must be 63 characters or less: {full}")
    short = full.removeprefix(RESOURCE_PREFIX)
    if len(short) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(short):
        raise ValueError(
            f"incorrect format for resource name '{full}': a lowercase RFC 1123 subdomain must consist of lower case "
            "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        )
    return full


class ReplicatedResource(_Model):
    name: str
    rename: str | None = None
    devices: Literal["all"] | int | tuple[DeviceRef, ...] = "all"
    replicas: int
    # gpuslice extension (ignored by NVIDIA): restrict this entry to GPUs whose product name matches a glob.
    model: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _required(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if data.get("name") is None:
                raise ValueError("no resource name specified")
            if data.get("replicas") is None:
                raise ValueError("no replicas specified")
        return data

    @field_validator("name", "rename")
    @classmethod
    def _qualify(cls, value: str | None) -> str | None:
        return None if value is None else qualify_resource_name(value)

    @field_validator("replicas", mode="before")
    @classmethod
    def _replicas(cls, value: Any) -> Any:
        # NVIDIA requires >= 2; replicas: 1 is the gpuslice single-client MPS extension, checked in validate.py.
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # NVIDIA's YAML-to-JSON step turns 2.0 into 2
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"replicas must be an integer, got {value!r}")
        if value < 1:
            raise ValueError("number of replicas must be >= 2")
        if value > MAX_REPLICAS:
            raise ValueError(f"{value} replicas is over the limit of {MAX_REPLICAS} (see docs/security.md)")
        return value

    @field_validator("devices", mode="before")
    @classmethod
    def _devices(cls, value: Any) -> Any:
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # NVIDIA's YAML-to-JSON step turns 2.0 into 2
        if isinstance(value, bool):
            raise ValueError(f"unrecognized type for devices spec: {value!r}")
        if isinstance(value, str):
            if value != "all":
                raise ValueError(f"devices set as '{value}' but the only valid string input is 'all'")
            return value
        if isinstance(value, int):
            if value <= 0:
                raise ValueError(f"devices set as '{value}' but a count of devices must be > 0")
            return value
        if isinstance(value, list | tuple):
            for item in value:
                if not _is_devices_list_item(item):
                    raise ValueError(f"unsupported type for device in devices list: {item}, {type(item).__name__}")
            return tuple(value)
        raise ValueError(f"unrecognized type for devices spec: {value!r}")


class ReplicatedResources(_Model):
    rename_by_default: YamlBool = Field(False, alias="renameByDefault")
    fail_requests_greater_than_one: YamlBool | None = Field(None, alias="failRequestsGreaterThanOne")
    resources: tuple[ReplicatedResource, ...] = ()

    @model_validator(mode="after")
    def _has_resources(self) -> ReplicatedResources:
        if not self.resources:
            raise ValueError("no resources specified")
        return self


class Sharing(_Model):
    time_slicing: ReplicatedResources | None = Field(None, alias="timeSlicing")
    mps: ReplicatedResources | None = None

    @field_validator("time_slicing", "mps", mode="before")
    @classmethod
    def _present_means_configured(cls, value: Any) -> Any:
        # `timeSlicing: null` names the strategy without resources: NVIDIA refuses it the same way.
        if value is None:
            raise ValueError("no resources specified")
        return value

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


class NamedPattern(_Model):
    pattern: str
    name: str

    @model_validator(mode="before")
    @classmethod
    def _required(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if not data.get("pattern"):
                raise ValueError("resources must have a 'pattern' field set")
            if not data.get("name"):
                raise ValueError("resources must have a 'name' field set")
        return data


class Resources(_Model):
    gpus: tuple[NamedPattern, ...] = ()
    mig: tuple[NamedPattern, ...] = ()


class Imex(_Model):
    channel_ids: tuple[Annotated[int, BeforeValidator(integral)], ...] = Field((), alias="channelIDs")
    required: YamlBool = False

    @field_validator("channel_ids", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        # `channelIDs: null` is valid for NVIDIA (its own test vector): no channel.
        return () if value is None else value

    @field_validator("channel_ids")
    @classmethod
    def _only_zero(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if value not in ((), (0,)):
            found = "[" + " ".join(str(v) for v in value) + "]"
            raise ValueError(
                f"invalid IMEX channel IDs: invalid IMEX config: channelIDs must be [] or [0]; found {found}"
            )
        return value


MAX_CDI_NAMES = 32
_CDI_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")


class Extensions(_Model):
    """gpuslice's own keys under `gpuslice:` (NVIDIA's plugin ignores unknown top-level keys).

    Each is off unless the config asks for it, so an NVIDIA config behaves exactly as with NVIDIA's plugin.
    """

    honor_devices: YamlBool = Field(False, alias="honorDevices")  # honour sharing.*.resources[].devices/rename/model
    allow_single_replica: YamlBool = Field(False, alias="allowSingleReplica")  # MPS/time-slicing with replicas: 1
    health_recovery: YamlBool = Field(False, alias="healthRecovery")  # return a GPU to Healthy after a clean probe
    per_container_mps_limits: YamlBool = Field(True, alias="perContainerMpsLimits")  # inject CUDA_MPS_* limits
    # MPS clients get CUDA_VISIBLE_DEVICES naming only their GPUs (NVIDIA #1299: a pod saw every GPU of the daemon).
    mps_visible_devices: YamlBool = Field(True, alias="mpsVisibleDevices")
    # CDI spec generation: NVIDIA's --cdi-feature-flags and the hooks left out of the spec (names, or "all").
    cdi_feature_flags: tuple[str, ...] = Field((), alias="cdiFeatureFlags")
    cdi_disabled_hooks: tuple[str, ...] = Field((), alias="cdiDisableHooks")

    @field_validator("cdi_feature_flags", "cdi_disabled_hooks", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [item.strip() for item in value.split(",") if item.strip()]
        if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"expected a list of names, got {describe_value(value)}")
        if len(value) > MAX_CDI_NAMES:
            raise ValueError(f"at most {MAX_CDI_NAMES} names, got {len(value)}")
        for item in value:
            if not _CDI_NAME.fullmatch(item):
                raise ValueError(f"{item[:80]!r} is not a hook or feature-flag name (lower-case letters, digits, '-')")
        return tuple(value)


class Config(_Model):
    """The whole v1 config file. Attribute names are snake_case; YAML keys are NVIDIA's camelCase."""

    version: str = "v1"
    flags: Flags = Flags()
    resources: Resources | None = None
    sharing: Sharing = Sharing()
    imex: Imex = Imex()
    gpuslice: Extensions = Extensions()

    @field_validator("version")
    @classmethod
    def _v1(cls, value: str) -> str:
        if value not in ("", "v1"):
            raise ValueError(f"unknown version: {value}")
        return "v1"
