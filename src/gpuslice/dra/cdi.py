"""DRA's CDI specs: one per claim (device nodes, sharing env, MPS mounts, the driver's files) and one base spec
with the driver's hooks that every container names once, however many claims it has."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from gpuslice.allocation.cdi import (
    CONTROL_NODES,
    VOID_VISIBLE_DEVICES,
    CdiError,
    build_spec,
    common_edits,
    device_nodes,
    qualified_name,
    split_hooks,
    write_spec,
)
from gpuslice.dra.names import CLAIM_CDI_CLASS, cdi_kind
from gpuslice.fsutil.atomic import temp_file_pattern
from gpuslice.fsutil.regular import first_entries
from gpuslice.gpu import Gpu, MigInstance
from gpuslice.records import record

MAX_SCANNED_ENTRIES = 100_000  # a CDI dir holds a few specs per claim; a flooded one is not walked for ever
BASE_CDI_CLASS = "device"  # NVIDIA's DRA driver names its node-wide spec's class so, too
BASE_DEVICE = "base"


@record
class ClaimDeviceEdits:
    """The device nodes of one prepared device (its GPU, and the MIG capabilities for a MIG device)."""

    device: str
    gpu: Gpu
    mig: MigInstance | None


@record
class ClaimEdits:
    """Edits that apply to every device of the claim: env and mounts (sharing, MPS)."""

    env: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[tuple[str, str], ...] = ()  # (container path, host path)
    driver: Mapping[str, Any] = field(default_factory=dict)  # the driver's files and hooks (common containerEdits)


def spec_file_name(driver: str, claim_uid: str) -> str:
    """CDI's transient spec name, `<vendor>-<class>_<claim uid>.json` (one file per claim, removed on unprepare)."""
    return f"k8s.{driver}-{CLAIM_CDI_CLASS}_{claim_uid}.json"


def claim_spec_path(directory: str | Path, driver: str, claim_uid: str) -> Path:
    """Where this plugin writes the claim's spec: the only spec path a checkpoint record may name."""
    return Path(directory) / spec_file_name(driver, claim_uid)


def cdi_device_name(claim_uid: str, device: str) -> str:
    """`<claim uid>-<device>`: unique per claim, so a runtime's cached spec can never serve another claim."""
    return f"{claim_uid}-{device}"


def cdi_id(driver: str, claim_uid: str, device: str) -> str:
    return qualified_name(cdi_kind(driver), cdi_device_name(claim_uid, device))


def claim_spec(
    driver: str,
    claim_uid: str,
    devices: Sequence[ClaimDeviceEdits],
    edits: ClaimEdits,
    dev_root: str = "/",
    control_nodes: Sequence[str] = CONTROL_NODES,
) -> dict[str, Any]:
    """The claim's spec, common edits from the one builder (void, the control nodes this node has, the
    driver's files; its hooks go in base_spec) plus the claim's env and mounts; each device its own
    nodes. The lowest cdiVersion that carries it (checked, CdiError if not)."""
    env = [f"{key}={value}" for key, value in sorted(edits.env.items())]
    # The hooks are in the base spec (once per container); mounts, nodes and env repeat harmlessly.
    files, _hooks = split_hooks({k: v for k, v in edits.driver.items() if v})
    common = common_edits(dev_root, control_nodes, files, env)
    mounts = [*common.pop("mounts", ())]
    mounts += [
        {"containerPath": container, "hostPath": host, "options": ["rw", "nosuid", "nodev", "bind"]}
        for container, host in edits.mounts
    ]
    if mounts:
        common["mounts"] = mounts
    return build_spec(
        cdi_kind(driver),
        [
            {
                "name": cdi_device_name(claim_uid, entry.device),
                "containerEdits": {"deviceNodes": device_nodes(entry.gpu, entry.mig, dev_root)},
            }
            for entry in devices
        ],
        common,
    )


def write_claim_spec(directory: str | Path, driver: str, claim_uid: str, spec: Mapping[str, Any]) -> Path:
    """Write the claim's spec atomically; CdiError naming the path when the spec is invalid or cannot be written."""
    return write_spec(directory, spec_file_name(driver, claim_uid), spec)


def remove_claim_spec(directory: str | Path, driver: str, claim_uid: str) -> None:
    """Remove the claim's spec from our own CDI dir; the path is derived, never taken from a record."""
    path = claim_spec_path(directory, driver, claim_uid)
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        raise CdiError(f"cannot remove CDI spec {path}: {exc.strerror or exc}") from exc


def leftover_claim_files(directory: str | Path, driver: str, prepared: Collection[str]) -> list[Path]:
    """What a killed prepare can leave in our CDI dir: this driver's claim specs of claims no record
    holds, and the temp files of unfinished spec writes. Only names of our own pattern; no directories."""
    spec = re.compile(rf"k8s\.{re.escape(driver)}-{re.escape(CLAIM_CDI_CLASS)}_(?P<uid>[A-Za-z0-9-]+)\.json")
    temp = temp_file_pattern(spec.pattern)
    try:
        entries = first_entries(directory, MAX_SCANNED_ENTRIES)
    except OSError as exc:
        raise CdiError(f"cannot list CDI dir {directory}: {exc.strerror or exc}") from exc

    def ours(name: str) -> bool:
        match = spec.fullmatch(name)
        return (match is not None and match["uid"] not in prepared) or temp.fullmatch(name) is not None

    return [Path(e.path) for e in entries if ours(e.name) and not e.is_dir(follow_symlinks=False)]


def base_kind(driver: str) -> str:
    return f"k8s.{driver}/{BASE_CDI_CLASS}"


def base_spec_file_name(driver: str) -> str:
    """`k8s.<driver>-device_base.json`: CDI's transient name form, as NVIDIA's DRA driver names its base spec."""
    return f"k8s.{driver}-{BASE_CDI_CLASS}_{BASE_DEVICE}.json"


def base_cdi_id(driver: str) -> str:
    return qualified_name(base_kind(driver), BASE_DEVICE)


def base_spec(driver: str, driver_edits: Mapping[str, Any]) -> dict[str, Any] | None:
    """The node's base spec: the driver's hooks as common edits, applied once per container that names its
    one device; None when there are no hooks (all disabled, or no driver files found)."""
    _rest, hooks = split_hooks(driver_edits)
    if not hooks:
        return None
    # A device must edit something; void is what every spec says as well.
    device = {"name": BASE_DEVICE, "containerEdits": {"env": [VOID_VISIBLE_DEVICES]}}
    return build_spec(base_kind(driver), [device], {"hooks": hooks})


def write_base_spec(directory: str | Path, driver: str, driver_edits: Mapping[str, Any]) -> tuple[str, ...]:
    """Write (or, without hooks, remove) the base spec; the CDI IDs every prepared device names besides its own.

    It stays when the plugin stops: prepared claims' containers may restart before the plugin is back.
    """
    spec = base_spec(driver, driver_edits)
    path = Path(directory) / base_spec_file_name(driver)
    if spec is None:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise CdiError(f"cannot remove CDI spec {path}: {exc.strerror or exc}") from exc
        return ()
    write_spec(directory, base_spec_file_name(driver), spec)
    return (base_cdi_id(driver),)
