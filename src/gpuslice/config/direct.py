"""The direct reader: a valid v1 file to settings without pydantic; whatever it is unsure of goes to the schema."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields
from typing import Any

from gpuslice.config import model, rules

# Building the pydantic models of config.schema costs more than the rest of a plugin's start put together
# (issue 28), so a file is first read here: the same rules (config.rules), applied to the shapes a YAML
# file gives (plain dicts, lists, str, int, float, bool, None). Anything else, any rule that refuses, and
# anything pydantic might read otherwise than plainly (a snake_case attribute name for a key, a key
# pydantic reserves) is referred to the schema, which then gives the answer or words the error (file:line,
# key). So this reader only ever answers what the schema would: tests/config/test_direct_reader.py holds
# the two to the same settings, `explicit` sets and unknown-key warnings, on every config the tests read.


class Refer(Exception):
    """Not for this reader: the schema decides (and says why, where the file is wrong)."""


Unknown = list[str]
Check = Callable[[Any, str, Unknown], Any]  # (value, dotted key, unknown keys found) -> setting value


def read_direct(data: Mapping[str, Any]) -> tuple[model.Config, tuple[str, ...]] | None:
    """(settings, unknown dotted keys) of a valid file's top-level mapping, or None to ask the schema."""
    unknown: Unknown = []
    try:
        config = _read(model.Config, data, "", unknown)
    except Exception:  # a rule refusing (ValueError), Refer, or anything odd: the schema has the last word
        return None
    return config, tuple(unknown)


_Keys = tuple[dict[str, str], frozenset[str], tuple[str, ...]]
_KEYS: dict[type[Any], _Keys] = {}


def _keys(settings: type[Any]) -> _Keys:
    """(YAML key -> attribute, attribute names, required attributes) of a settings class."""
    found = _KEYS.get(settings)
    if found is None:
        items = [item for item in fields(settings) if item.name != "explicit"]
        keys = {item.metadata.get("key", item.name): item.name for item in items}
        required = tuple(item.name for item in items if item.default is MISSING and item.default_factory is MISSING)
        found = _KEYS[settings] = (keys, frozenset(item.name for item in items), required)
    return found


def _read(settings: type[Any], data: Any, prefix: str, unknown: Unknown) -> Any:
    if type(data) is not dict:
        raise Refer
    keys, attributes, required = _keys(settings)
    given: dict[str, tuple[str, Any]] = {}
    for key, value in data.items():
        if type(key) is not str:
            raise Refer
        attribute = keys.get(key)
        if attribute is None or (key in attributes and attribute != key):
            # an attribute name for its key (pydantic's populate_by_name) or a name pydantic keeps for itself
            if key in attributes or key.startswith(("_", "model_")):
                raise Refer
            unknown.append(prefix + key)
            continue
        given[attribute] = (key, value)
    before = _BEFORE.get(settings)
    if before is not None:
        before(data)
    checks = _CHECKS[settings]
    values = {}
    for attribute in checks:  # in declaration order: nested unknown keys come in the schema's order
        if attribute in given:
            key, value = given[attribute]
            values[attribute] = checks[attribute](value, prefix + key, unknown)
    if any(attribute not in values for attribute in required):
        raise Refer
    after = _AFTER.get(settings)
    if after is not None:
        after(values)
    return settings(**values, explicit=frozenset(given))


def _bool(value: Any, key: str, unknown: Unknown) -> bool:
    if type(value) is not bool:
        raise Refer
    return value


def _str(value: Any, key: str, unknown: Unknown) -> str:
    if type(value) is not str:
        raise Refer
    return value


def _optional(check: Check) -> Check:
    def optional(value: Any, key: str, unknown: Unknown) -> Any:
        return None if value is None else check(value, key, unknown)

    return optional


def _rule(rule: Callable[[Any], Any], plain: Check = _str) -> Check:
    """A value of the plain type (a string unless said), then the rule."""

    def checked(value: Any, key: str, unknown: Unknown) -> Any:
        return rule(plain(value, key, unknown))

    return checked


def _model(settings: type[Any]) -> Check:
    def nested(value: Any, key: str, unknown: Unknown) -> Any:
        return _read(settings, value, key + ".", unknown)

    return nested


def _models(settings: type[Any]) -> Check:
    def listed(value: Any, key: str, unknown: Unknown) -> tuple[Any, ...]:
        if type(value) not in (list, tuple):
            raise Refer
        return tuple(_read(settings, item, f"{key}[{position}].", unknown) for position, item in enumerate(value))

    return listed


def _any(value: Any, key: str, unknown: Unknown) -> Any:
    return value


def _strings(value: Any, key: str, unknown: Unknown) -> tuple[str, ...]:
    if type(value) is not str and not (type(value) in (list, tuple) and all(type(item) is str for item in value)):
        raise Refer
    return rules.known_device_list_strategies(rules.device_list_strategy(value))


def _duration(value: Any, key: str, unknown: Unknown) -> float | None:
    seconds = rules.parse_duration(value)
    if seconds is not None and not math.isfinite(seconds):
        raise Refer  # pydantic takes inf and nan; settings that never compare equal are not worth a fast path
    return seconds


def _devices(value: Any, key: str, unknown: Unknown) -> Any:
    checked = rules.devices(value)
    if isinstance(checked, tuple) and not all(type(item) in (int, str) for item in checked):
        raise Refer
    return checked


def _channel_ids(value: Any, key: str, unknown: Unknown) -> tuple[int, ...]:
    value = rules.channel_ids_or_none(value)
    if type(value) not in (list, tuple):
        raise Refer
    return rules.only_channel_zero(tuple(rules.integral(item) for item in value))


def _names(value: Any, key: str, unknown: Unknown) -> tuple[str, ...]:
    return rules.cdi_names(value)


def _resource_name(value: Any, key: str, unknown: Unknown) -> str:
    return rules.qualify_resource_name(_str(value, key, unknown))


def _time_slicing(value: Any, key: str, unknown: Unknown) -> Any:
    return _model(model.ReplicatedResources)(rules.time_slicing_present(value), key, unknown)


# Per settings class, in its declaration order: what each attribute's value must be (config.schema's types
# and validators, the rules themselves in config.rules).
_CHECKS: dict[type[Any], dict[str, Check]] = {
    model.PluginFlags: {
        "pass_device_specs": _optional(_bool),
        "device_list_strategy": _strings,
        "device_id_strategy": _rule(rules.device_id_strategy),
        "cdi_annotation_prefix": _str,
        "nvidia_ctk_path": _str,
        "container_driver_root": _str,
        "shared_devices_allocation_policy": _rule(rules.shared_devices_allocation_policy),
    },
    model.GfdFlags: {
        "oneshot": _bool,
        "no_timestamp": _bool,
        "sleep_interval": _duration,
        "output_file": _str,
        "machine_type_file": _str,
    },
    model.Flags: {
        "mig_strategy": _rule(rules.mig_strategy),
        "fail_on_init_error": _bool,
        "mps_root": _optional(_str),
        "nvidia_driver_root": _str,
        "nvidia_dev_root": _optional(_str),
        "gdrcopy_enabled": _bool,
        "gds_enabled": _bool,
        "mofed_enabled": _bool,
        "use_node_feature_api": _optional(_bool),
        "device_discovery_strategy": _rule(rules.device_discovery_strategy),
        "plugin": _model(model.PluginFlags),
        "gfd": _model(model.GfdFlags),
    },
    model.ReplicatedResource: {
        "name": _resource_name,
        "rename": _optional(_resource_name),
        "devices": _devices,
        "replicas": _rule(rules.replicas, _any),
        "model": _optional(_str),
    },
    model.ReplicatedResources: {
        "rename_by_default": _bool,
        "fail_requests_greater_than_one": _optional(_bool),
        "resources": _models(model.ReplicatedResource),
    },
    model.Sharing: {
        "time_slicing": _time_slicing,
        "mps": _optional(_model(model.ReplicatedResources)),
    },
    model.NamedPattern: {"pattern": _str, "name": _str},
    model.Resources: {"gpus": _models(model.NamedPattern), "mig": _models(model.NamedPattern)},
    model.Imex: {"channel_ids": _channel_ids, "required": _bool},
    model.Extensions: {
        "honor_devices": _bool,
        "allow_single_replica": _bool,
        "health_recovery": _bool,
        "per_container_mps_limits": _bool,
        "mps_visible_devices": _bool,
        "cdi_feature_flags": _names,
        "cdi_disabled_hooks": _names,
    },
    model.Config: {
        "version": _rule(rules.version),
        "flags": _model(model.Flags),
        "resources": _optional(_model(model.Resources)),
        "sharing": _model(model.Sharing),
        "imex": _model(model.Imex),
        "gpuslice": _model(model.Extensions),
    },
}
# Checks of the whole mapping before its values (the schema's mode="before" model validators) ...
_BEFORE: dict[type[Any], Callable[[dict[str, Any]], None]] = {
    model.ReplicatedResource: rules.required_resource_keys,
    model.NamedPattern: rules.required_pattern_keys,
}
# ... and after them (mode="after"), given the values read.
_AFTER: dict[type[Any], Callable[[dict[str, Any]], None]] = {
    model.ReplicatedResources: lambda values: rules.has_resources(values.get("resources", ())),
}
