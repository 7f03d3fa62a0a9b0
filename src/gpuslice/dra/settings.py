"""`DraSettings`: where the DRA plugin lives and how it behaves, for its kubelet plumbing and its driver."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from pathlib import Path

from gpuslice.dra.names import (
    DEFAULT_DRIVER,
    DEFAULT_KUBELET_ROOT,
    DRA_SOCKET_NAME,
    PLUGINS_DIR_NAME,
    REGISTRY_DIR_NAME,
    check_driver_name,
    plugin_dir,
    registration_socket,
)
from gpuslice.dra.publish import DEFAULT_RESYNC_S
from gpuslice.dra.service import CALL_BUDGET_S
from gpuslice.records import record

SOCKET_CHECK_S = 1.0


@record
class DraSettings:
    """Where the plugin lives and how it behaves; defaults are the production ones."""

    driver: str = DEFAULT_DRIVER
    registry_dir: Path = Path(DEFAULT_KUBELET_ROOT) / REGISTRY_DIR_NAME
    plugins_dir: Path = Path(DEFAULT_KUBELET_ROOT) / PLUGINS_DIR_NAME
    cdi_dir: Path = Path("/var/run/cdi")
    mps_root: Path | None = None
    mps_control_command: tuple[str, ...] = ("nvidia-cuda-mps-control",)
    resource_api_version: str = "auto"  # or v1 / v1beta2 / v1beta1
    resync_s: float = DEFAULT_RESYNC_S
    counter_layout: str = "auto"  # or combined / split; auto starts combined and splits if the server asks
    call_budget_s: float = CALL_BUDGET_S
    socket_check_s: float = SOCKET_CHECK_S
    environ: Mapping[str, str] = field(default_factory=dict)  # NVIDIA's health env vars (DP_DISABLE_HEALTHCHECKS, ...)
    metrics_port: int | None = None  # /metrics, /healthz, /readyz; None: off, 0: any free port
    metrics_address: str = ""  # "": every address

    def __post_init__(self) -> None:
        check_driver_name(self.driver)

    @property
    def registration_socket(self) -> Path:
        return registration_socket(self.registry_dir, self.driver)

    @property
    def plugin_dir(self) -> Path:
        return plugin_dir(self.plugins_dir, self.driver)

    @property
    def dra_socket(self) -> Path:
        return self.plugin_dir / DRA_SOCKET_NAME
