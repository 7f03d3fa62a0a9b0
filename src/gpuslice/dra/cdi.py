"""One transient CDI spec per claim: device nodes per device, the claim's sharing env and MPS mounts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuslice.allocation.cdi import (
    CONTROL_NODES,
    CdiError,
    build_spec,
    common_edits,
    device_nodes,
    qualified_name,
    write_spec,
)
from gpuslice.dra.names import CLAIM_CDI_CLASS, cdi_kind
from gpuslice.gpu import Gpu, MigInstance


@dataclass(frozen=True)
class ClaimDeviceEdits:
    """The device nodes of one prepared device (its GPU, and the MIG capabilities for a MIG device)."""

    device: str
    gpu: Gpu
    mig: MigInstance | None


@dataclass(frozen=True)
class ClaimEdits:
    """Edits that apply to every device of the claim: env and mounts (sharing, MPS)."""

    env: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[tuple[str, str], ...] = ()  # (container path, host path)
    driver: Mapping[str, Any] = field(default_factory=dict)  # the driver's files and hooks (common containerEdits)


def spec_file_name(driver: str, claim_uid: str) -> str:
    """CDI's transient spec name, `<vendor>-<class>_<claim uid>.json` (one file per claim, removed on unprepare)."""
    return f"k8s.{driver}-{CLAIM_CDI_CLASS}_{claim_uid}.json"


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
    driver's files and hooks) plus the claim's env and mounts; each device its own nodes. The lowest
    cdiVersion that carries it (checked, CdiError if not)."""
    env = [f"{key}={value}" for key, value in sorted(edits.env.items())]
    common = common_edits(dev_root, control_nodes, {k: v for k, v in edits.driver.items() if v}, env)
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


def remove_claim_spec(path: str | Path) -> None:
    try:
        Path(path).unlink(missing_ok=True)
    except OSError as exc:
        raise CdiError(f"cannot remove CDI spec {path}: {exc.strerror or exc}") from exc
