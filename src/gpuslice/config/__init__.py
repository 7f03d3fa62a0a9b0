"""NVIDIA-compatible configuration: the v1 config file, flags and env, merged into frozen settings."""

from gpuslice.config.load import ConfigError, LoadedConfig, load_config, parse_config_mapping, parse_config_text
from gpuslice.config.model import (
    RESOURCE_PREFIX,
    Config,
    Flags,
    GfdFlags,
    Imex,
    PluginFlags,
    ReplicatedResource,
    ReplicatedResources,
    Sharing,
)

__all__ = [
    "RESOURCE_PREFIX",
    "Config",
    "ConfigError",
    "Flags",
    "GfdFlags",
    "Imex",
    "LoadedConfig",
    "PluginFlags",
    "ReplicatedResource",
    "ReplicatedResources",
    "Sharing",
    "load_config",
    "parse_config_mapping",
    "parse_config_text",
]
