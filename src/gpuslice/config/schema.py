"""NVIDIA's v1 config file as pydantic models: what a file is validated with before it becomes settings (model.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator
from pydantic.functional_validators import BeforeValidator

from gpuslice.config import model as settings
from gpuslice.config import rules
from gpuslice.config.model import DeviceRef

# The rules (and their texts) are config.rules; these models say where each applies.
YamlBool = Annotated[bool, BeforeValidator(rules.strict_bool)]


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
        return rules.device_id_strategy(value)

    @field_validator("shared_devices_allocation_policy", mode="before")
    @classmethod
    def _policy(cls, value: Any) -> Any:
        return rules.shared_devices_allocation_policy(value)

    @field_validator("device_list_strategy", mode="before")
    @classmethod
    def _string_or_list(cls, value: Any) -> Any:
        return rules.device_list_strategy(value)

    @field_validator("device_list_strategy")
    @classmethod
    def _known_strategies(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return rules.known_device_list_strategies(value)


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
        return rules.parse_duration(value)


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
        return rules.mig_strategy(value)

    @field_validator("device_discovery_strategy", mode="before")
    @classmethod
    def _discovery(cls, value: Any) -> Any:
        return rules.device_discovery_strategy(value)


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
            rules.required_resource_keys(data)
        return data

    @field_validator("name", "rename")
    @classmethod
    def _qualify(cls, value: str | None) -> str | None:
        return None if value is None else rules.qualify_resource_name(value)

    @field_validator("replicas", mode="before")
    @classmethod
    def _replicas(cls, value: Any) -> Any:
        return rules.replicas(value)

    @field_validator("devices", mode="before")
    @classmethod
    def _devices(cls, value: Any) -> Any:
        return rules.devices(value)


class ReplicatedResourcesSchema(_Model):
    settings_type = settings.ReplicatedResources
    model_config = _model_config(settings.ReplicatedResources)

    rename_by_default: YamlBool = False
    fail_requests_greater_than_one: YamlBool | None = None
    resources: tuple[ReplicatedResourceSchema, ...] = ()

    @model_validator(mode="after")
    def _has_resources(self) -> ReplicatedResourcesSchema:
        rules.has_resources(self.resources)
        return self


class SharingSchema(_Model):
    settings_type = settings.Sharing
    model_config = _model_config(settings.Sharing)

    time_slicing: ReplicatedResourcesSchema | None = None
    mps: ReplicatedResourcesSchema | None = None

    @field_validator("time_slicing", mode="before")
    @classmethod
    def _present_means_configured(cls, value: Any) -> Any:
        return rules.time_slicing_present(value)


class NamedPatternSchema(_Model):
    settings_type = settings.NamedPattern
    model_config = _model_config(settings.NamedPattern)

    pattern: str
    name: str

    @model_validator(mode="before")
    @classmethod
    def _required(cls, data: Any) -> Any:
        if isinstance(data, dict):
            rules.required_pattern_keys(data)
        return data


class ResourcesSchema(_Model):
    settings_type = settings.Resources
    model_config = _model_config(settings.Resources)

    gpus: tuple[NamedPatternSchema, ...] = ()
    mig: tuple[NamedPatternSchema, ...] = ()


class ImexSchema(_Model):
    settings_type = settings.Imex
    model_config = _model_config(settings.Imex)

    channel_ids: tuple[Annotated[int, BeforeValidator(rules.integral)], ...] = ()
    required: YamlBool = False

    @field_validator("channel_ids", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        return rules.channel_ids_or_none(value)

    @field_validator("channel_ids")
    @classmethod
    def _only_zero(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        return rules.only_channel_zero(value)


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
        return rules.cdi_names(value)


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
        return rules.version(value)


def read_with_schema(data: Mapping[str, Any]) -> tuple[settings.Config, tuple[str, ...]]:
    """(settings, unknown dotted keys) of a file's top-level mapping; raises pydantic's ValidationError."""
    parsed = ConfigSchema.model_validate(dict(data))
    config: settings.Config = to_settings(parsed)
    return config, tuple(unknown_keys(parsed))


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
