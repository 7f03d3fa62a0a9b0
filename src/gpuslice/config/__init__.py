"""NVIDIA-compatible configuration: the v1 config file, flags and env, merged into frozen settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuslice.exports import lazy_exports

if TYPE_CHECKING:
    from gpuslice.config.flags import GFD_FLAGS as GFD_FLAGS
    from gpuslice.config.flags import PLUGIN_FLAGS as PLUGIN_FLAGS
    from gpuslice.config.flags import FlagSpec as FlagSpec
    from gpuslice.config.flags import apply_overrides as apply_overrides
    from gpuslice.config.flags import coerce as coerce
    from gpuslice.config.flags import overrides_from_env as overrides_from_env
    from gpuslice.config.load import ConfigError as ConfigError
    from gpuslice.config.load import LoadedConfig as LoadedConfig
    from gpuslice.config.load import load_config as load_config
    from gpuslice.config.load import parse_config_mapping as parse_config_mapping
    from gpuslice.config.load import parse_config_text as parse_config_text
    from gpuslice.config.model import RESOURCE_PREFIX as RESOURCE_PREFIX
    from gpuslice.config.model import Config as Config
    from gpuslice.config.model import Extensions as Extensions
    from gpuslice.config.model import Flags as Flags
    from gpuslice.config.model import GfdFlags as GfdFlags
    from gpuslice.config.model import Imex as Imex
    from gpuslice.config.model import PluginFlags as PluginFlags
    from gpuslice.config.model import ReplicatedResource as ReplicatedResource
    from gpuslice.config.model import ReplicatedResources as ReplicatedResources
    from gpuslice.config.model import Sharing as Sharing
    from gpuslice.config.validate import EffectiveSharing as EffectiveSharing
    from gpuslice.config.validate import SharingRule as SharingRule
    from gpuslice.config.validate import effective_sharing as effective_sharing
    from gpuslice.config.validate import validate_startup as validate_startup

__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "gpuslice.config.flags": (
            "GFD_FLAGS",
            "PLUGIN_FLAGS",
            "FlagSpec",
            "apply_overrides",
            "coerce",
            "overrides_from_env",
        ),
        "gpuslice.config.load": (
            "ConfigError",
            "LoadedConfig",
            "load_config",
            "parse_config_mapping",
            "parse_config_text",
        ),
        "gpuslice.config.model": (
            "RESOURCE_PREFIX",
            "Config",
            "Extensions",
            "Flags",
            "GfdFlags",
            "Imex",
            "PluginFlags",
            "ReplicatedResource",
            "ReplicatedResources",
            "Sharing",
        ),
        "gpuslice.config.validate": ("EffectiveSharing", "SharingRule", "effective_sharing", "validate_startup"),
    },
)
