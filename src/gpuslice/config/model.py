"""NVIDIA's v1 device-plugin config file as pydantic models (keys spelled as in NVIDIA's YAML)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

RESOURCE_PREFIX = "nvidia.com/"
MAX_RESOURCE_NAME_LENGTH = 63


class _Model(BaseModel):
    # NVIDIA ignores unknown keys; we accept them too and report them as warnings (see load.py).
    model_config = ConfigDict(populate_by_name=True, extra="allow", frozen=True)


class PluginFlags(_Model):
    pass_device_specs: bool = Field(False, alias="passDeviceSpecs")
    device_list_strategy: tuple[str, ...] = Field(("envvar",), alias="deviceListStrategy")
    device_id_strategy: Literal["uuid", "index"] = Field("uuid", alias="deviceIDStrategy")
    cdi_annotation_prefix: str = Field("cdi.k8s.io/", alias="cdiAnnotationPrefix")
    nvidia_ctk_path: str = Field("/usr/bin/nvidia-ctk", alias="nvidiaCTKPath")
    container_driver_root: str = Field("/driver-root", alias="containerDriverRoot")
    shared_devices_allocation_policy: Literal["distributed", "packed"] = Field(
        "distributed", alias="sharedDevicesAllocationPolicy"
    )

    @field_validator("device_list_strategy", mode="before")
    @classmethod
    def _string_or_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return (value,)
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return tuple(value)
        raise ValueError(f"invalid deviceListStrategy: {value!r}")

    @field_validator("device_list_strategy")
    @classmethod
    def _known_strategies(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        known = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
        for strategy in value:
            if strategy not in known:
                raise ValueError(f"invalid strategy: {strategy} (known: {', '.join(known)})")
        return value


class GfdFlags(_Model):
    oneshot: bool = False
    no_timestamp: bool = Field(False, alias="noTimestamp")
    sleep_interval: str | int = Field("60s", alias="sleepInterval")
    output_file: str = Field("/etc/kubernetes/node-feature-discovery/features.d/gfd", alias="outputFile")
    machine_type_file: str = Field("/sys/class/dmi/id/product_name", alias="machineTypeFile")


class Flags(_Model):
    mig_strategy: Literal["none", "single", "mixed"] = Field("none", alias="migStrategy")
    fail_on_init_error: bool = Field(True, alias="failOnInitError")
    mps_root: str | None = Field(None, alias="mpsRoot")
    nvidia_driver_root: str = Field("/", alias="nvidiaDriverRoot")
    nvidia_dev_root: str | None = Field(None, alias="nvidiaDevRoot")
    gdrcopy_enabled: bool = Field(False, alias="gdrcopyEnabled")
    gds_enabled: bool = Field(False, alias="gdsEnabled")
    mofed_enabled: bool = Field(False, alias="mofedEnabled")
    use_node_feature_api: bool | None = Field(None, alias="useNodeFeatureAPI")
    device_discovery_strategy: Literal["auto", "nvml", "tegra", "vfio"] = Field("auto", alias="deviceDiscoveryStrategy")
    plugin: PluginFlags = PluginFlags()
    gfd: GfdFlags = GfdFlags()


DeviceRef = int | str


class ReplicatedResource(_Model):
    name: str
    rename: str | None = None
    devices: Literal["all"] | int | tuple[DeviceRef, ...] = "all"
    replicas: int

    @field_validator("name", "rename")
    @classmethod
    def _qualify(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value:
            raise ValueError("no resource name specified")
        return value if value.startswith(RESOURCE_PREFIX) else RESOURCE_PREFIX + value

    @field_validator("replicas")
    @classmethod
    def _at_least_one(cls, value: int) -> int:
        # NVIDIA requires >= 2; replicas: 1 is a gpuslice extension (single-client MPS), checked in load.py.
        if value < 1:
            raise ValueError("number of replicas must be >= 2")
        return value


class ReplicatedResources(_Model):
    rename_by_default: bool = Field(False, alias="renameByDefault")
    fail_requests_greater_than_one: bool | None = Field(None, alias="failRequestsGreaterThanOne")
    resources: tuple[ReplicatedResource, ...] = ()

    @model_validator(mode="after")
    def _has_resources(self) -> ReplicatedResources:
        if not self.resources:
            raise ValueError("no resources specified")
        return self


class Sharing(_Model):
    time_slicing: ReplicatedResources | None = Field(None, alias="timeSlicing")
    mps: ReplicatedResources | None = None

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


class Resources(_Model):
    gpus: tuple[NamedPattern, ...] = ()
    mig: tuple[NamedPattern, ...] = ()


class Imex(_Model):
    channel_ids: tuple[int, ...] = Field((), alias="channelIDs")
    required: bool = False


class Config(_Model):
    """The whole v1 config file. Attribute names are snake_case; YAML keys are NVIDIA's camelCase."""

    version: str = "v1"
    flags: Flags = Flags()
    resources: Resources | None = None
    sharing: Sharing = Sharing()
    imex: Imex = Imex()

    @field_validator("version")
    @classmethod
    def _v1(cls, value: str) -> str:
        if value not in ("", "v1"):
            raise ValueError(f"unknown version: {value}")
        return "v1"
