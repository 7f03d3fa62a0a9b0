"""Per-node configs: which named config file a node uses, from its label, a default and NVIDIA's fallbacks."""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Literal

from gpuslice.config.limits import MAX_CONFIG_BYTES
from gpuslice.records import record

log = logging.getLogger("gpuslice.config")

# NVIDIA's config-manager names (flags and env vars) and defaults; the Helm chart's fallbacks are named,single.
DEFAULT_NODE_LABEL = "nvidia.com/device-plugin.config"
NAMED_FALLBACK = "default"  # the file the `named` fallback looks for
# A ConfigMap holds at most 1 MiB, so more files than this means the directory is not a ConfigMap mount.
MAX_CONFIGS = 256
MAX_LABEL_VALUE = 63
MAX_LABEL_NAME = 63
MAX_LABEL_PREFIX = 253
MAX_CONFIG_NAME = 253  # a ConfigMap key

Source = Literal["label", "default", "named", "single", "empty"]
FallbackStrategy = Literal["named", "single", "empty"]
FALLBACK_STRATEGIES: tuple[FallbackStrategy, ...] = ("named", "single", "empty")
DEFAULT_FALLBACK_STRATEGIES: tuple[FallbackStrategy, ...] = ("named", "single")

# Patterns as text, compiled by `re` (and cached there) at their first use: compiling them all at import
# cost every plugin start a few tenths of a millisecond, for checks it may never make.
_LABEL_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_CONFIG_NAME = r"[-._a-zA-Z0-9]+"  # what a ConfigMap key may be


class NodeConfigError(ValueError):
    """No config can be chosen, or a per-node setting is malformed; the message names the setting."""


@record
class NodeConfigSettings:
    """Where the named configs are and how one is chosen (NVIDIA's config-manager settings)."""

    directory: Path  # CONFIG_FILE_SRCDIR: one file per config name, as a ConfigMap volume mounts them
    node_name: str  # NODE_NAME
    label: str = DEFAULT_NODE_LABEL  # NODE_LABEL
    default: str | None = None  # DEFAULT_CONFIG
    fallbacks: tuple[FallbackStrategy, ...] = DEFAULT_FALLBACK_STRATEGIES  # FALLBACK_STRATEGIES

    def __post_init__(self) -> None:
        check_label_key(self.label)
        if not self.node_name:
            raise NodeConfigError("NODE_NAME: required with CONFIG_FILE_SRCDIR (set it from spec.nodeName)")
        if self.default is not None and not _is_config_name(self.default):
            raise NodeConfigError(f"DEFAULT_CONFIG: {self.default!r} is not a config name (a ConfigMap key)")


@record
class NodeConfigChoice:
    """The config a node uses: `name` None is the empty config (built-in defaults)."""

    name: str | None
    source: Source
    problem: str | None = None  # why the label's value was not used, when it named no config

    def path(self, directory: Path) -> Path | None:
        return None if self.name is None else directory / self.name

    def describe(self) -> str:
        what = "the empty config (built-in defaults)" if self.name is None else f"config {self.name!r}"
        return f"{what} (from {'the node label' if self.source == 'label' else self.source})"


def parse_fallbacks(text: str) -> tuple[FallbackStrategy, ...]:
    """FALLBACK_STRATEGIES: comma-separated, in order; empty means no fallback."""
    parsed: list[FallbackStrategy] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if item not in FALLBACK_STRATEGIES:
            raise NodeConfigError(
                f"FALLBACK_STRATEGIES: unknown strategy {item!r} (known: {', '.join(FALLBACK_STRATEGIES)})"
            )
        if item not in parsed:
            parsed.append(item)  # type: ignore[arg-type]
    return tuple(parsed)


def check_label_key(key: str) -> None:
    """NODE_LABEL must be a Kubernetes label key: [prefix/]name, prefix a DNS subdomain."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > MAX_LABEL_PREFIX or not re.fullmatch(_DNS_SUBDOMAIN, prefix)):
        raise NodeConfigError(f"NODE_LABEL: {key!r}: the prefix must be a DNS subdomain of at most 253 characters")
    if not name or len(name) > MAX_LABEL_NAME or not re.fullmatch(_LABEL_VALUE, name):
        raise NodeConfigError(
            f"NODE_LABEL: {key!r}: the name must be 1-63 characters of [A-Za-z0-9-_.], "
            "starting and ending with a letter or digit"
        )


def choose_config(
    label_value: str | None,
    available: Collection[str],
    default: str | None = None,
    fallbacks: Sequence[FallbackStrategy] = DEFAULT_FALLBACK_STRATEGIES,
) -> NodeConfigChoice:
    """The config for a node whose label is `label_value` (None: absent, or the API could not be read).

    Order, as NVIDIA's config-manager: the label's value, which must name an available config; then
    `default`, which must exist too; then each fallback in turn: `named` (a config called "default"),
    `single` (the only config there is), `empty` (built-in defaults). A label naming no config does not
    stop the search here (NVIDIA's init container fails instead): the choice carries the problem, so a
    running plugin can keep its current config and a starting one can still come up.
    """
    problem = None
    if label_value:
        if len(label_value) <= MAX_LABEL_VALUE and label_value in available:
            return NodeConfigChoice(label_value, "label")
        problem = f"specified config {_shown(label_value)} does not exist"
    if default is not None:
        if default not in available:
            raise NodeConfigError(
                f"DEFAULT_CONFIG: specified config {default!r} does not exist (available: {_listing(available)})"
            )
        return NodeConfigChoice(default, "default", problem)
    for strategy in fallbacks:
        if strategy == "named" and NAMED_FALLBACK in available:
            return NodeConfigChoice(NAMED_FALLBACK, "named", problem)
        if strategy == "single" and len(available) == 1:
            return NodeConfigChoice(next(iter(available)), "single", problem)
        if strategy == "empty":
            return NodeConfigChoice(None, "empty", problem)
    reason = "no config was set, no default was provided, and all fallbacks failed"
    tried = ",".join(fallbacks) or "none"
    raise NodeConfigError(
        f"{problem + '; ' if problem else ''}{reason} (fallbacks: {tried}; available: {_listing(available)})"
    )


def list_configs(directory: Path) -> tuple[str, ...]:
    """The config names in `directory` (CONFIG_FILE_SRCDIR), sorted; NodeConfigError naming the directory.

    Entries starting with ".." are a ConfigMap volume's own bookkeeping and skipped, as NVIDIA does; so
    are directories and names that cannot be ConfigMap keys. An entry that cannot be a config file (a
    symlink loop or a dangling link, a FIFO, a socket, a device, a file over the config size cap) is
    skipped with a warning: one bad entry must not keep the node from every other config.
    """
    names: list[str] = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.startswith(".."):
                    continue
                if len(names) >= MAX_CONFIGS:
                    raise NodeConfigError(f"CONFIG_FILE_SRCDIR {directory}: more than {MAX_CONFIGS} entries")
                if _is_config_name(entry.name) and _usable(entry):
                    names.append(entry.name)
    except OSError as exc:
        raise NodeConfigError(f"CONFIG_FILE_SRCDIR {directory}: cannot list: {exc.strerror or exc}") from exc
    return tuple(sorted(names))


def _usable(entry: os.DirEntry[str]) -> bool:
    """A regular file (through links) of at most MAX_CONFIG_BYTES; anything else is skipped, with a warning."""
    try:
        info = os.stat(entry.path)  # follows links, as a ConfigMap volume's keys are links
    except OSError as exc:
        log.warning("CONFIG_FILE_SRCDIR: skipping %r: %s", entry.name, exc.strerror or exc)
        return False
    if stat.S_ISDIR(info.st_mode):
        return False
    if not stat.S_ISREG(info.st_mode):
        log.warning("CONFIG_FILE_SRCDIR: skipping %r: not a regular file", entry.name)
        return False
    if info.st_size > MAX_CONFIG_BYTES:
        log.warning("CONFIG_FILE_SRCDIR: skipping %r: %d bytes, over %d", entry.name, info.st_size, MAX_CONFIG_BYTES)
        return False
    return True


def _is_config_name(name: str) -> bool:
    return len(name) <= MAX_CONFIG_NAME and name not in (".", "..") and bool(re.fullmatch(_CONFIG_NAME, name))


def _shown(value: str) -> str:
    """A label value in a message: quoted, and cut if it is longer than any label value may be."""
    return repr(value if len(value) <= MAX_LABEL_VALUE else value[:MAX_LABEL_VALUE] + "...")


def _listing(available: Collection[str]) -> str:
    return ", ".join(sorted(available)) or "none"
