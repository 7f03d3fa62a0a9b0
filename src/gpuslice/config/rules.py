"""The v1 file's value rules, with NVIDIA's texts: one copy for the pydantic schema and the direct reader."""

from __future__ import annotations

import re
from typing import Any

from gpuslice.config.limits import MAX_REPLICAS
from gpuslice.config.model import RESOURCE_PREFIX
from gpuslice.gpu.refs import InvalidDeviceReference, parse_device_reference

# Each function takes the value as the file gave it and returns the value the setting holds, or raises
# ValueError with the text the error message carries. config.schema runs them as pydantic validators (the
# reader that words every error); config.direct runs them on a file that is valid (the fast reader).

MAX_RESOURCE_NAME_LENGTH = 63
MAX_CDI_NAMES = 32
_CDI_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_NANOSECONDS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")


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


def device_id_strategy(value: Any) -> Any:
    if value not in ("uuid", "index"):
        raise ValueError(f"invalid --device-id-strategy option: {value}")
    return value


def shared_devices_allocation_policy(value: Any) -> Any:
    if value not in ("distributed", "packed"):
        raise ValueError(f"invalid --shared-devices-allocation-policy option: {value}")
    return value


def device_list_strategy(value: Any) -> tuple[str, ...]:
    """One strategy or a list of them (a tuple too: a loaded config re-validated with overrides)."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise ValueError(f"invalid deviceListStrategy: {value!r}")


def known_device_list_strategies(value: tuple[str, ...]) -> tuple[str, ...]:
    for strategy in value:
        if strategy not in DEVICE_LIST_STRATEGIES:
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
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise ValueError(f"invalid duration {value!r} (a Go duration such as 60s or 1m30s, or infinite)")
    return sum(float(number) * _NANOSECONDS[unit] for number, unit in parts) / 1e9


def mig_strategy(value: Any) -> Any:
    if value not in ("none", "single", "mixed", "dynamic"):
        raise ValueError(f"unknown MIG strategy: {value}")
    return value


def device_discovery_strategy(value: Any) -> Any:
    if value not in ("auto", "nvml", "tegra", "vfio"):
        raise ValueError(f"invalid --device-discovery-strategy option {value}")
    return value


def is_devices_list_item(item: Any) -> bool:
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


def required_resource_keys(data: dict[str, Any]) -> None:
    """A `sharing.*.resources` entry names its resource and its replicas (NVIDIA's texts)."""
    if data.get("name") is None:
        raise ValueError("no resource name specified")
    if data.get("replicas") is None:
        raise ValueError("no replicas specified")


def replicas(value: Any) -> int:
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


def devices(value: Any) -> Any:
    """`all`, a count of devices, or a list of device references."""
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
            if not is_devices_list_item(item):
                raise ValueError(f"unsupported type for device in devices list: {item}, {type(item).__name__}")
        return tuple(value)
    raise ValueError(f"unrecognized type for devices spec: {value!r}")


def has_resources(resources: tuple[Any, ...]) -> None:
    if not resources:
        raise ValueError("no resources specified")


def time_slicing_present(value: Any) -> Any:
    # NVIDIA's timeSlicing is a struct, so `timeSlicing: null` still reaches its resource check and is
    # refused; its mps is a pointer, so `mps: null` is simply no MPS (pydantic's default for None).
    if value is None:
        raise ValueError("no resources specified")
    return value


def required_pattern_keys(data: dict[str, Any]) -> None:
    if not data.get("pattern"):
        raise ValueError("resources must have a 'pattern' field set")
    if not data.get("name"):
        raise ValueError("resources must have a 'name' field set")


def channel_ids_or_none(value: Any) -> Any:
    # `channelIDs: null` is valid for NVIDIA (its own test vector): no channel.
    return () if value is None else value


def only_channel_zero(value: tuple[int, ...]) -> tuple[int, ...]:
    if value not in ((), (0,)):
        found = "[" + " ".join(str(v) for v in value) + "]"
        raise ValueError(f"invalid IMEX channel IDs: invalid IMEX config: channelIDs must be [] or [0]; found {found}")
    return value


def cdi_names(value: Any) -> tuple[str, ...]:
    """CDI feature flags or hook names: a list, or one comma-separated string."""
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


def version(value: str) -> str:
    if value not in ("", "v1"):
        raise ValueError(f"unknown version: {value}")
    return "v1"
