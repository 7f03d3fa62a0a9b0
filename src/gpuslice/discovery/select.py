"""Backend selection: `--backend auto|nvml|hostpath|fake` and what failOnInitError does when nothing is found."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from gpuslice.discovery.backend import Backend, FakeBackend
from gpuslice.discovery.nodespec import NodeSpecError
from gpuslice.gpu import Node

if TYPE_CHECKING:
    from gpuslice.discovery.nvml import NvmlLibrary

log = logging.getLogger(__name__)

BACKEND_KINDS = ("auto", "nvml", "hostpath", "fake")


class BackendInitError(RuntimeError):
    """No usable backend (and failOnInitError is set), or a backend that cannot be built at all.

    `kind` is the requested backend; `reasons` lists what each attempted source said.
    """

    def __init__(self, kind: str, reasons: list[str]) -> None:
        self.kind = kind
        self.reasons = reasons
        super().__init__(f"backend {kind!r}: " + "; ".join(reasons))


class IdleBackend(Backend):
    """A backend that advertises no GPUs (failOnInitError=false and nothing found); `reason` says why."""

    name = "idle"

    def __init__(self, reason: str, node_name: str | None = None) -> None:
        self.reason = reason
        self.node_name = node_name or socket.gethostname()

    def discover(self) -> Node:
        return Node(name=self.node_name, gpus=(), extra={"backend": self.name, "reason": self.reason})


def make_fake_backend(
    kind: str, node_spec_ref: str | None, driver_root: str, fail_on_init_error: bool, *, node_name: str | None
) -> Backend:
    """make_backend for `fake` alone (no NVML or host paths can load); ValueError naming any other kind."""
    if kind != "fake":
        raise ValueError(f"backend {kind!r} is not available here; only 'fake' (a node spec) is")
    return FakeBackend.from_ref(node_spec_ref)


def make_backend(
    kind: str,
    node_spec_ref: str | None,
    driver_root: str | Path,
    fail_on_init_error: bool,
    *,
    nvml_library: NvmlLibrary | None = None,
    node_name: str | None = None,
) -> Backend:
    """Build the backend `kind` names.

    auto: NVML when nvmlInit succeeds, else host paths under `driver_root`. When the chosen source finds no
    GPU (or NVML is requested and does not load), fail_on_init_error decides: raise BackendInitError, or
    log and return an IdleBackend that advertises nothing. fake: the node spec `node_spec_ref` (a preset
    name, `preset:NAME` or a YAML path; None is the default preset); a bad spec always raises.
    """
    if kind not in BACKEND_KINDS:
        raise BackendInitError(kind, [f"unknown backend; choose one of {', '.join(BACKEND_KINDS)}"])
    if kind == "fake":
        try:
            return FakeBackend.from_ref(node_spec_ref, node_name)
        except NodeSpecError as exc:
            raise BackendInitError(kind, [str(exc)]) from exc
    # the real backends' modules load only when asked for (a fake node's plugin starts without them)
    from gpuslice.discovery.hostpath import HostPathBackend
    from gpuslice.discovery.nvml import NvmlBackend, NvmlDiscoveryError, NvmlUnavailable

    reasons: list[str] = []
    nvml_says_none = False
    if kind in ("auto", "nvml"):
        nvml = NvmlBackend(nvml_library, driver_root=driver_root, node_name=node_name)
        try:
            if nvml.discover().gpus:
                return nvml
            nvml_says_none = True  # NVML is authoritative: host paths would not find more
            reasons.append("NVML loaded but reports no GPUs")
        except (NvmlUnavailable, NvmlDiscoveryError) as exc:
            reasons.append(str(exc))
            if kind == "auto":
                log.info("auto backend: %s; trying host paths under %s", exc, driver_root)
        nvml.close()
    if kind == "hostpath" or (kind == "auto" and not nvml_says_none):
        hostpath = HostPathBackend(driver_root, node_name=node_name)
        if hostpath.discover().gpus:
            return hostpath
        reasons.append(f"no NVIDIA GPU found under {driver_root} (proc/driver/nvidia/gpus, sys/bus/pci/devices)")
    if fail_on_init_error:
        raise BackendInitError(kind, reasons)
    reason = "; ".join(reasons)
    log.warning("No devices found (%s). failOnInitError is false: advertising none. Waiting indefinitely.", reason)
    return IdleBackend(reason, node_name)
