"""Per-claim opaque configs, strictly decoded: NVIDIA's `resource.nvidia.com/v1beta1` GpuConfig and MigDeviceConfig."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gpuslice.dra.quantity import QuantityError, parse_quantity

NVIDIA_API_VERSION = "resource.nvidia.com/v1beta1"
GPUSLICE_API_VERSION = "resource.gpuslice.io/v1beta1"
CONFIG_API_VERSIONS = (NVIDIA_API_VERSION, GPUSLICE_API_VERSION)
GPU_CONFIG = "GpuConfig"
MIG_CONFIG = "MigDeviceConfig"
MAX_PARAMETERS_BYTES = 10 * 1024  # OpaqueParametersMaxLength: the API server refuses more
MIN_PINNED_LIMIT = 2**20  # NVIDIA refuses pinned-memory limits under 1 MiB
MAX_PER_DEVICE_LIMITS = 64
# nvidia-smi compute-policy --set-timeslice takes 0..3 for these names.
TIMESLICE_LEVELS = {"Default": 0, "Short": 1, "Medium": 2, "Long": 3}


class ConfigDecodeError(ValueError):
    """An opaque config we cannot accept; the message says which field and why."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class TimeSlicingConfig(_Strict):
    interval: Literal["Default", "Short", "Medium", "Long"] = "Default"


class MpsConfig(_Strict):
    default_active_thread_percentage: Annotated[int, Field(ge=0, le=100)] | None = Field(
        None, alias="defaultActiveThreadPercentage"
    )
    default_pinned_device_memory_limit: int | None = Field(None, alias="defaultPinnedDeviceMemoryLimit")
    default_per_device_pinned_memory_limit: dict[str, int] = Field(
        default_factory=dict, alias="defaultPerDevicePinnedMemoryLimit"
    )

    @field_validator("default_pinned_device_memory_limit", mode="before")
    @classmethod
    def _quantity(cls, value: Any) -> Any:
        return None if value is None else _limit(value)

    @field_validator("default_per_device_pinned_memory_limit", mode="before")
    @classmethod
    def _quantities(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise ValueError("expected a map of GPU index or UUID to a quantity")
        if len(value) > MAX_PER_DEVICE_LIMITS:
            raise ValueError(f"at most {MAX_PER_DEVICE_LIMITS} entries")
        return {str(key): _limit(amount) for key, amount in value.items()}


def _limit(value: Any) -> int:
    try:
        amount = parse_quantity(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from exc
    if amount < MIN_PINNED_LIMIT:
        raise ValueError(f"a pinned-memory limit must be at least 1Mi, got {value!r}")
    return amount


class ClaimSharing(_Strict):
    strategy: Literal["TimeSlicing", "MPS"]
    time_slicing_config: TimeSlicingConfig | None = Field(None, alias="timeSlicingConfig")
    mps_config: MpsConfig | None = Field(None, alias="mpsConfig")

    @model_validator(mode="after")
    def _one_strategy(self) -> ClaimSharing:
        if self.strategy == "MPS" and self.time_slicing_config is not None:
            raise ValueError("timeSlicingConfig is only allowed with strategy TimeSlicing")
        if self.strategy == "TimeSlicing" and self.mps_config is not None:
            raise ValueError("mpsConfig is only allowed with strategy MPS")
        return self

    @property
    def interval(self) -> str:
        return self.time_slicing_config.interval if self.time_slicing_config is not None else "Default"

    @property
    def level(self) -> int:
        """The interval as `nvidia-smi compute-policy --set-timeslice` takes it."""
        return TIMESLICE_LEVELS[self.interval]

    @property
    def mps(self) -> MpsConfig:
        return self.mps_config if self.mps_config is not None else MpsConfig()


class DeviceConfig(_Strict):
    """GpuConfig or MigDeviceConfig: which kind it is, and the sharing it asks for (None: exclusive)."""

    api_version: str = Field(alias="apiVersion")
    kind: Literal["GpuConfig", "MigDeviceConfig"]
    sharing: ClaimSharing | None = None

    @field_validator("api_version")
    @classmethod
    def _api_version(cls, value: str) -> str:
        if value not in CONFIG_API_VERSIONS:
            raise ValueError(f"expected one of {', '.join(CONFIG_API_VERSIONS)}")
        return value

    @model_validator(mode="after")
    def _mig_time_slicing(self) -> DeviceConfig:
        if self.kind == MIG_CONFIG and self.sharing is not None and self.sharing.time_slicing_config is not None:
            raise ValueError("sharing.timeSlicingConfig: a MIG device has no time-slice interval to set")
        return self

    @property
    def device_type(self) -> str:
        return "gpu" if self.kind == GPU_CONFIG else "mig"


def decode_parameters(parameters: Any) -> DeviceConfig:
    """Strict decoding: unknown fields, wrong types and out-of-range values are refused, naming the field."""
    if not isinstance(parameters, Mapping):
        raise ConfigDecodeError(
            f"parameters must be an object with apiVersion and kind, got {type(parameters).__name__}"
        )
    size = len(json.dumps(parameters, separators=(",", ":")))
    if size > MAX_PARAMETERS_BYTES:
        raise ConfigDecodeError(f"parameters are {size} bytes; at most {MAX_PARAMETERS_BYTES} are allowed")
    try:
        return DeviceConfig.model_validate(parameters)
    except ValidationError as exc:
        raise ConfigDecodeError(_explain(exc)) from exc


def _explain(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:3]:
        where = ".".join(str(part) for part in error["loc"]) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field"
        parts.append(f"{where}: {message}")
    return "; ".join(parts)
