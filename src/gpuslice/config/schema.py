"""NVIDIA's v1 config file as pydantic models: what a file is validated with before it becomes settings (model.py)."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator
from pydantic.functional_validators import BeforeValidator

from gpuslice.config import model as settings
from gpuslice.config.limits import MAX_REPLICAS
from gpuslice.config.model import RESOURCE_PREFIX, DeviceRef
from gpuslice.gpu.refs import InvalidDeviceReference, parse_device_reference

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


def _model_config(settings_type: type[Any]) -> ConfigDict:
    """A schema's pydantic config: its YAML keys are the settings class's (model.yaml_key), so both agree."""
    # NVIDIA ignores unknown keys; we accept them too and report them as warnings (unknown_keys).
    return ConfigDict(
        populate_by_name=True,
        extra="allow",
        frozen=True,
        alias_generator=lambda attribute: settings.yaml_key(settings_type, attribute),
    )


class _Model(BaseModel):
    settings_type: ClassVar[type[Any]]


class PluginFlagsSchema(_Model):
    settings_type = settings.PluginFlags
    model_config = _model_config(settings.PluginFlags)

    # Unset (None): allocation.AllocateOptions.pass_device_specs holds the one default.
    pass_device_specs: YamlBool | None = None
    device_list_strategy: tuple[str, ...] = ("envvar",)
    device_id_strategy: Literal["uuid", "index"] = "uuid"
    cdi_annotation_prefix: str = "cdi.k8s.io/"
    nvidia_ctk_path: str = "/usr/bin/nvidia-ctk"
    container_driver_root: str = "/driver-root"
    shared_devices_allocation_policy: Literal["distributed", "packed"] = "distributed"

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


class GfdFlagsSchema(_Model):
    settings_type = settings.GfdFlags
    model_config = _model_config(settings.GfdFlags)

    oneshot: YamlBool = False
    no_timestamp: YamlBool = False
    sleep_interval: float | None = 60.0  # seconds; None = infinite
    output_file: str = "/etc/kubernetes/node-feature-discovery/features.d/gfd"
    machine_type_file: str = "/sys/class/dmi/id/product_name"

    @field_validator("sleep_interval", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float | None:
        return parse_duration(value)


class FlagsSchema(_Model):
    settings_type = settings.Flags
    model_config = _model_config(settings.Flags)

    # "vfio" is gpu-feature-discovery's only; the plugin refuses it at start-up (validate.py).
    # "dynamic" is a gpuslice extension (docs/dynamic-mig.md): MIG instances are created per Allocate.
    mig_strategy: Literal["none", "single", "mixed", "dynamic"] = "none"
    fail_on_init_error: YamlBool = True
    mps_root: str | None = None
    nvidia_driver_root: str = "/"
    nvidia_dev_root: str | None = None
    gdrcopy_enabled: YamlBool = False
    gds_enabled: YamlBool = False
    mofed_enabled: YamlBool = False
    use_node_feature_api: YamlBool | None = None
    device_discovery_strategy: Literal["auto", "nvml", "tegra", "vfio"] = "auto"
    plugin: PluginFlagsSchema = PluginFlagsSchema()
    gfd: GfdFlagsSchema = GfdFlagsSchema()

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


class ReplicatedResourceSchema(_Model):
    settings_type = settings.ReplicatedResource
    model_config = _model_config(settings.ReplicatedResource)

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


class ReplicatedResourcesSchema(_Model):
    settings_type = settings.ReplicatedResources
    model_config = _model_config(settings.ReplicatedResources)

    rename_by_default: YamlBool = False
    fail_requests_greater_than_one: YamlBool | None = None
    resources: tuple[ReplicatedResourceSchema, ...] = ()

    @model_validator(mode="after")
    def _has_resources(self) -> ReplicatedResourcesSchema:
        if not self.resources:
            raise ValueError("no resources specified")
        return self


class SharingSchema(_Model):
    settings_type = settings.Sharing
    model_config = _model_config(settings.Sharing)

    time_slicing: ReplicatedResourcesSchema | None = None
    mps: ReplicatedResourcesSchema | None = None

    @field_validator("time_slicing", mode="before")
    @classmethod
    def _present_means_configured(cls, value: Any) -> Any:
        # NVIDIA's timeSlicing is a struct, so `timeSlicing: null` still reaches its resource check and is
        # refused; its mps is a pointer, so `mps: null` is simply no MPS (pydantic's default for None).
        if value is None:
            raise ValueError("no resources specified")
        return value


class NamedPatternSchema(_Model):
    settings_type = settings.NamedPattern
    model_config = _model_config(settings.NamedPattern)

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


class ResourcesSchema(_Model):
    settings_type = settings.Resources
    model_config = _model_config(settings.Resources)

    gpus: tuple[NamedPatternSchema, ...] = ()
    mig: tuple[NamedPatternSchema, ...] = ()


class ImexSchema(_Model):
    settings_type = settings.Imex
    model_config = _model_config(settings.Imex)

    channel_ids: tuple[Annotated[int, BeforeValidator(integral)], ...] = ()
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


class ExtensionsSchema(_Model):
    """gpuslice's own keys under `gpuslice:` (NVIDIA's plugin ignores unknown top-level keys).

    Each is off unless the config asks for it, so an NVIDIA config behaves exactly as with NVIDIA's plugin.
    """

    settings_type = settings.Extensions
    model_config = _model_config(settings.Extensions)
    honor_devices: YamlBool = False  # honour sharing.*.resources[].devices/rename/model
    allow_single_replica: YamlBool = False  # MPS/time-slicing with replicas: 1
    health_recovery: YamlBool = False  # return a GPU to Healthy after a clean probe
    per_container_mps_limits: YamlBool = True  # inject CUDA_MPS_* limits
    # MPS clients get CUDA_VISIBLE_DEVICES naming only their GPUs (NVIDIA #1299: a pod saw every GPU of the daemon).
    mps_visible_devices: YamlBool = True
    # CDI spec generation: NVIDIA's --cdi-feature-flags and the hooks left out of the spec (names, or "all").
    cdi_feature_flags: tuple[str, ...] = ()
    cdi_disabled_hooks: tuple[str, ...] = ()

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


class ConfigSchema(_Model):
    """The whole v1 config file. Attribute names are snake_case; YAML keys are NVIDIA's camelCase."""

    settings_type = settings.Config
    model_config = _model_config(settings.Config)
    version: str = "v1"
    flags: FlagsSchema = FlagsSchema()
    resources: ResourcesSchema | None = None
    sharing: SharingSchema = SharingSchema()
    imex: ImexSchema = ImexSchema()
    gpuslice: ExtensionsSchema = ExtensionsSchema()

    @field_validator("version")
    @classmethod
    def _v1(cls, value: str) -> str:
        if value not in ("", "v1"):
            raise ValueError(f"unknown version: {value}")
        return "v1"


def to_settings(model: _Model) -> Any:
    """The settings (model.py) a validated schema model stands for, with what the file set as `explicit`."""
    names = type(model).model_fields
    values = {name: _settings_value(getattr(model, name)) for name in names}
    return model.settings_type(**values, explicit=frozenset(model.model_fields_set & names.keys()))


def _settings_value(value: Any) -> Any:
    if isinstance(value, _Model):
        return to_settings(value)
    if isinstance(value, tuple):
        return tuple(_settings_value(item) for item in value)
    return value


def unknown_keys(model: BaseModel, prefix: str = "") -> list[str]:
    """Every key the file gave that no model knows (dotted, with list positions), for the warnings."""
    found = [f"{prefix}{key}" for key in (model.model_extra or {})]
    for name, value in model:
        field = type(model).model_fields.get(name)
        alias = field.alias if field is not None and field.alias else name
        children = value if isinstance(value, tuple) else (value,)
        for position, child in enumerate(children):
            if isinstance(child, BaseModel):
                suffix = f"[{position}]" if isinstance(value, tuple) else ""
                found.extend(unknown_keys(child, f"{prefix}{alias}{suffix}."))
    return found
