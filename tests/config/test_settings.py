"""The settings (config.model) and the file schema (config.schema) say the same thing: fields, keys, defaults."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpuslice.config import Config, Flags, PluginFlags, apply_overrides, parse_config_mapping, parse_config_text
from gpuslice.config.model import to_document
from gpuslice.config.schema import ConfigSchema, _Model, to_settings

FULL_FILE = """
version: v1
flags:
  migStrategy: mixed
  failOnInitError: false
  nvidiaDriverRoot: /run/nvidia/driver
  plugin:
    passDeviceSpecs: true
    deviceListStrategy: [envvar, cdi-cri]
    deviceIDStrategy: index
  gfd:
    sleepInterval: 1m30s
    outputFile: /tmp/gfd
resources:
  gpus: [{pattern: "*", name: gpu}]
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
      - {name: gpu, replicas: 4, devices: [0, "1"]}
imex:
  channelIDs: [0]
gpuslice:
  honorDevices: true
  cdiFeatureFlags: [a, b]
"""


def schema_classes() -> list[type[_Model]]:
    found: list[type[_Model]] = []
    pending: list[type[Any]] = [_Model]
    while pending:
        for child in pending.pop().__subclasses__():
            found.append(child)
            pending.append(child)
    return found


@pytest.mark.parametrize("schema", schema_classes(), ids=lambda schema: schema.__name__)
def test_each_schema_has_its_settings_fields_keys_and_defaults(schema: type[_Model]) -> None:
    settings = {item.name: item for item in dataclasses.fields(schema.settings_type) if item.name != "explicit"}
    assert set(schema.model_fields) == set(settings)
    for name, field in schema.model_fields.items():
        assert field.alias == settings[name].metadata.get("key", name)
        default = settings[name].default
        if default is dataclasses.MISSING:
            assert field.is_required(), name
        elif isinstance(field.default, _Model):
            assert to_settings(field.default) == default, name
        else:
            assert field.default == default, name


def test_the_defaults_are_what_an_empty_file_validates_to() -> None:
    assert parse_config_mapping({}).config == Config()
    assert to_settings(ConfigSchema()) == Config()


def test_explicit_names_what_the_file_set_and_nothing_else() -> None:
    config = parse_config_text("flags:\n  gfd:\n    outputFile: /tmp/x\n").config
    assert config.explicit == {"flags"}
    assert config.flags.explicit == {"gfd"}
    assert config.flags.gfd.explicit == {"output_file"}
    assert config.flags.plugin.explicit == frozenset()
    assert Config().explicit == frozenset()


@pytest.mark.parametrize("explicit_only", [False, True])
def test_a_document_validates_back_to_the_same_settings(explicit_only: bool) -> None:
    config = parse_config_text(FULL_FILE).config
    assert parse_config_mapping(to_document(config, explicit_only=explicit_only)).config == config


def test_overrides_keep_what_the_file_set_and_only_that() -> None:
    config = parse_config_text(FULL_FILE).config
    merged = apply_overrides(config, {"flags.migStrategy": "single"})
    assert merged == dataclasses.replace(config, flags=dataclasses.replace(config.flags, mig_strategy="single"))
    assert merged.flags.gfd.sleep_interval == 90.0
    assert merged.flags.gfd.explicit == {"sleep_interval", "output_file"}


def test_overrides_keep_settings_built_in_code() -> None:
    built = Config(flags=Flags(mig_strategy="mixed", plugin=PluginFlags(device_id_strategy="index")))
    merged = apply_overrides(built, {"flags.failOnInitError": False})
    assert merged.flags.mig_strategy == "mixed"
    assert merged.flags.plugin.device_id_strategy == "index"
    assert merged.flags.fail_on_init_error is False
