"""Reading a config file: YAML/JSON to a validated Config, errors naming the key, file and line."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuslice.config.direct import read_direct
from gpuslice.config.limits import MAX_CONFIG_BYTES
from gpuslice.config.model import Config
from gpuslice.config.rules import describe_value
from gpuslice.fsutil.plain_yaml import read_plain_yaml
from gpuslice.fsutil.textread import InputFileError, read_bounded_text
from gpuslice.records import record


class ConfigError(ValueError):
    """A config that must be refused before anything registers; names the key and the reason."""


@record
class LoadedConfig:
    """A validated config plus the warnings met while reading it (unknown keys, ignored values)."""

    config: Config
    warnings: tuple[str, ...] = ()
    source: str = "<defaults>"


def load_config(path: str | Path | None) -> LoadedConfig:
    """Load and validate a config file; None or an empty path gives the defaults."""
    if path is None or str(path) == "":
        return LoadedConfig(Config())
    source = str(path)
    try:
        text = read_bounded_text(path, "config", MAX_CONFIG_BYTES)
    except OSError as exc:
        raise ConfigError(f"unable to load config: error opening config file {source}: {exc.strerror or exc}") from exc
    except InputFileError as exc:
        raise ConfigError(str(exc)) from exc
    return parse_config_text(text, source)


def parse_config_text(text: str, source: str = "<config>") -> LoadedConfig:
    """Parse YAML (JSON is YAML) text into a LoadedConfig."""
    # A plain file that the direct reader takes is read without PyYAML (fsutil.plain_yaml says why); anything
    # else, and every error, goes the whole way: PyYAML's nodes give the error messages their line numbers.
    plain, data = read_plain_yaml(text)
    if plain and (data is None or isinstance(data, dict)):
        read = read_direct(data or {})
        if read is not None:
            return _loaded(read, source)
    import yaml  # only a config file needs the parser: the default (no file) path starts without it

    from gpuslice.fsutil.safe_yaml import UnsafeYaml, load_yaml

    try:
        data, root = load_yaml(text)
    except UnsafeYaml as exc:  # well-formed, but a bomb or too deep: say which limit
        raise ConfigError(f"unable to parse config file {source}: {exc}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"unable to parse config file {where}: YAML syntax error: {problem}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"unable to parse config file {source}:1: the top level must be a mapping of config keys, "
            f"got {describe_value(data)}"
        )
    return parse_config_mapping(data, source, root)


def parse_config_mapping(data: Mapping[str, Any], source: str = "<config>", node: Any = None) -> LoadedConfig:
    """Validate an already-parsed mapping; `node` (a PyYAML node) adds line numbers to errors."""
    # The direct reader answers for a valid file without pydantic; the schema for the rest, and words errors.
    read = read_direct(data)
    if read is None:
        read = _read_with_schema(data, source, node)
    return _loaded(read, source)


def _loaded(read: tuple[Config, tuple[str, ...]], source: str) -> LoadedConfig:
    config, unknown = read
    warnings = tuple(f"{source}: unknown key {key!r} ignored" for key in unknown)
    return LoadedConfig(config, warnings, source)


def _read_with_schema(data: Mapping[str, Any], source: str, node: Any) -> tuple[Config, tuple[str, ...]]:
    # pydantic only where the direct reader refers: a valid file, or a plugin on the defaults, never loads it
    from pydantic import ValidationError

    from gpuslice.config.schema import read_with_schema

    try:
        return read_with_schema(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = _dotted(first["loc"])
        line = _line_of(node, first["loc"])
        where = f"{source}:{line}" if line else source
        reason = _reason(first)
        raise ConfigError(f"invalid config {where}: {key}: {reason}") from exc


# Pydantic's own type errors, said as the fact NVIDIA's decoder reports (a wrong YAML type for the key).
_EXPECTED = {
    "model_type": "a mapping",
    "dict_type": "a mapping",
    "model_attributes_type": "a mapping",
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "tuple_type": "a list",
    "list_type": "a list",
    "bool_type": "a boolean (true or false)",
    "bool_parsing": "a boolean (true or false)",
}


def _reason(error: Any) -> str:
    expected = _EXPECTED.get(str(error["type"]))
    if expected is not None:
        return f"expected {expected}, got {describe_value(error.get('input'))}"
    return str(error["msg"]).removeprefix("Value error, ")


def _dotted(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _line_of(node: Any, loc: tuple[int | str, ...]) -> int | None:
    """1-based line of the deepest YAML node on the error's path."""
    if node is None:
        return None
    import yaml  # a node exists only when a file was parsed, so the parser is loaded already

    line = None
    for part in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            node = next((value for key, value in node.value if key.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            node = None
    if node is not None:
        line = node.start_mark.line + 1
    return line
