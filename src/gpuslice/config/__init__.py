"""NVIDIA-compatible configuration: the v1 config file, flags and env, merged into frozen settings."""

from gpuslice.config.flags import (
    GFD_FLAGS,
    PLUGIN_FLAGS,
    FlagSpec,
    apply_overrides,
    coerce,
    overrides_from_env,
)
from gpuslice.config.load import (
    ConfigError,
    LoadedConfig,
    load_config,
    parse_config_mapping,
    parse_config_text,
)
from gpuslice.config.model import (
    RESOURCE_PREFIX,
    Config,
    Extensions,
    Flags,
    GfdFlags,
    Imex,
    PluginFlags,
    ReplicatedResource,
    ReplicatedResources,
    Sharing,
)
from gpuslice.config.validate import (
    EffectiveSharing,
    SharingRule,
    effective_sharing,
    validate_startup,
)

__all__ = [
    "GFD_FLAGS",
    "PLUGIN_FLAGS",
    "RESOURCE_PREFIX",
    "Config",
    "ConfigError",
    "EffectiveSharing",
    "Extensions",
    "FlagSpec",
    "Flags",
    "GfdFlags",
    "Imex",
    "LoadedConfig",
    "PluginFlags",
    "ReplicatedResource",
    "ReplicatedResources",
    "Sharing",
    "SharingRule",
    "apply_overrides",
    "coerce",
    "effective_sharing",
    "load_config",
    "overrides_from_env",
    "parse_config_mapping",
    "parse_config_text",
    "validate_startup",
]
