"""Resolving CDI names as a container runtime does: load the spec files back, merge the edits of each name."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gpuslice.allocation.cdi import CdiError
from gpuslice.allocation.cdi_validate import spec_problems
from gpuslice.records import record

# Spec files are small; anything bigger in the directory is not one of ours and is refused.
MAX_SPEC_BYTES = 4 * 1024 * 1024
MAX_SPEC_FILES = 256


@record
class ResolvedEdits:
    """The container edits a set of CDI names adds, merged (each spec's common edits once, then each device's)."""

    env: tuple[str, ...] = ()
    device_nodes: tuple[Mapping[str, Any], ...] = ()
    mounts: tuple[Mapping[str, Any], ...] = ()
    hooks: tuple[Mapping[str, Any], ...] = ()

    @property
    def device_paths(self) -> tuple[str, ...]:
        return tuple(str(node["path"]) for node in self.device_nodes)

    @property
    def mount_paths(self) -> tuple[str, ...]:
        return tuple(str(mount["containerPath"]) for mount in self.mounts)

    @property
    def hook_names(self) -> tuple[str, ...]:
        """The hook subcommand of each hook (`create-symlinks`, ...): the argument after the program (and `hook`)."""
        names = []
        for hook in self.hooks:
            args = [str(a) for a in hook.get("args", [])]
            rest = args[2:] if args[1:2] == ["hook"] else args[1:]
            names.append(rest[0] if rest else "")
        return tuple(names)


def load_specs(directory: str | Path) -> dict[str, Mapping[str, Any]]:
    """The valid CDI specs (`*.json`) of a directory by file name; CdiError for an invalid one.

    Several files may share a kind (DRA writes one file per claim, all of kind `<driver>/claim`), as the
    CDI registry allows; a device name defined twice within a kind is refused when it is resolved."""
    specs: dict[str, Mapping[str, Any]] = {}
    paths = sorted(Path(directory).glob("*.json"))
    if len(paths) > MAX_SPEC_FILES:
        raise CdiError(f"{directory}: more than {MAX_SPEC_FILES} spec files")
    for path in paths:
        if path.stat().st_size > MAX_SPEC_BYTES:
            raise CdiError(f"{path}: larger than {MAX_SPEC_BYTES} bytes")
        try:
            spec = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CdiError(f"{path}: not a JSON CDI spec: {exc}") from exc
        problems = spec_problems(spec)
        if problems:
            raise CdiError(f"{path}: invalid CDI spec: {'; '.join(problems)}")
        specs[path.name] = spec
    return specs


def resolve(specs: Mapping[str, Mapping[str, Any]], names: Iterable[str]) -> ResolvedEdits:
    """The merged edits of fully qualified names (`vendor/class=device`); CdiError naming the first unresolved one.

    As a runtime does: the common edits of each spec file that defines a requested device, once per file,
    then each device's own edits."""
    common: dict[str, Mapping[str, Any]] = {}
    device_edits: list[Mapping[str, Any]] = []
    for name in dict.fromkeys(names):
        kind, separator, device = name.partition("=")
        if not separator or not device:
            raise CdiError(f"{name!r} is not a qualified CDI name (vendor/class=device)")
        of_kind = {file: spec for file, spec in specs.items() if spec["kind"] == kind}
        if not of_kind:
            raise CdiError(f"unresolvable CDI device {name}: no spec of kind {kind}")
        found = [(file, d) for file, spec in of_kind.items() for d in spec["devices"] if d["name"] == device]
        if not found:
            raise CdiError(f"unresolvable CDI device {name}: kind {kind} has no device {device!r}")
        if len(found) > 1:
            raise CdiError(f"conflicting CDI device {name}: defined in {', '.join(sorted(f for f, _ in found))}")
        ((file, entry),) = found
        common.setdefault(file, of_kind[file].get("containerEdits") or {})
        device_edits.append(entry.get("containerEdits") or {})
    merged = [*common.values(), *device_edits]
    return ResolvedEdits(
        env=tuple(e for edits in merged for e in edits.get("env", [])),
        device_nodes=_unique(n for edits in merged for n in edits.get("deviceNodes", [])),
        mounts=_unique(m for edits in merged for m in edits.get("mounts", [])),
        hooks=tuple(h for edits in merged for h in edits.get("hooks", [])),
    )


def _unique(items: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    # A runtime applies a device node or a mount once per container path; later duplicates add nothing.
    seen: dict[str, Mapping[str, Any]] = {}
    for item in items:
        seen.setdefault(str(item.get("path", item.get("containerPath"))), item)
    return tuple(seen.values())
