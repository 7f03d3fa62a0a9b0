"""NVIDIA's plugin flags and the exit codes, for `gpuslice plugin` and `gpuslice dra` (neither loads the other)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import click

from gpuslice.config import PLUGIN_FLAGS, coerce, overrides_from_env

EXIT_BAD_INPUT = 2
EXIT_START_FAILED = 1
_FLAG_PREFIX = "nvidia_"


def nvidia_flags(command: Callable[..., None]) -> Callable[..., None]:
    """NVIDIA's plugin flags (config.PLUGIN_FLAGS): each overrides its config key; its env vars are read apart,
    so that a flag beats an env var which beats the file. Bool flags alone mean true (`--pass-device-specs`)."""
    for spec in reversed(PLUGIN_FLAGS):
        extra = {"is_flag": False, "flag_value": "true"} if spec.kind == "bool" else {}
        command = click.option(
            spec.flag,
            *spec.aliases,
            _FLAG_PREFIX + spec.key.replace(".", "_"),
            default=None,
            help=f"Config {spec.key} (env {', '.join(spec.envvars)}). {spec.help}".strip(),
            **extra,  # type: ignore[arg-type]
        )(command)
    return command


def nvidia_overrides(values: Mapping[str, str | None], environ: Mapping[str, str]) -> dict[str, object]:
    """Env vars first, then the flags given on the command line over them (NVIDIA's precedence)."""
    overrides: dict[str, object] = overrides_from_env(PLUGIN_FLAGS, environ)
    for spec in PLUGIN_FLAGS:
        given = values.get(_FLAG_PREFIX + spec.key.replace(".", "_"))
        if given is not None:
            overrides[spec.key] = coerce(spec, given)
    return overrides
