"""Building the DRA plugin's view of a node: config -> backend -> node -> sharing plan -> DRA devices."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from gpuslice.config import Config, ConfigError, apply_overrides, load_config, validate_startup
from gpuslice.discovery import Backend, BackendInitError, make_backend
from gpuslice.dra.devices import DeviceModelError, DraDevice, pool_devices
from gpuslice.gpu import Node
from gpuslice.sharing import SharingError, SharingPlan, build_resources


class DraSetupError(ValueError):
    """Bad input found before anything is served (exit code 2); the message names the key or file."""


@dataclass(frozen=True)
class DraSetup:
    """Everything the DRA plugin publishes, decided before the first socket exists."""

    config: Config
    node: Node
    plan: SharingPlan
    backend: Backend
    devices: tuple[DraDevice, ...]
    warnings: tuple[str, ...]


def prepare_setup(
    backend_kind: str,
    node_spec: str | None,
    config_file: str | None,
    node_name: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    claimed_gpus: Collection[str] = (),
) -> DraSetup:
    """The same config, backends and sharing rules as `gpuslice plugin`; DraSetupError on any bad input.

    Time-slicing replicas become one device per replica (isolation `none`); MPS is asked for per claim
    instead (a GpuConfig), because a DRA device is not split between claims by the node's config.
    `claimed_gpus`: GPUs our checkpoint has MIG devices on; under dynamic MIG they stay dynamic.
    """
    try:
        loaded = load_config(config_file)
        config = apply_overrides(loaded.config, overrides or {}, loaded.source)
        validate_startup(config)
    except ConfigError as exc:
        raise DraSetupError(str(exc)) from exc
    if config.sharing.strategy == "mps":
        raise DraSetupError(
            f"config {loaded.source}: sharing.mps: under DRA, MPS is asked for per claim "
            "(opaque GpuConfig with sharing.strategy MPS); remove sharing.mps from the node's config"
        )
    flags = config.flags
    try:
        backend = make_backend(backend_kind, node_spec, flags.nvidia_driver_root, flags.fail_on_init_error,
                               node_name=node_name)  # fmt: skip
    except BackendInitError as exc:
        raise DraSetupError(str(exc)) from exc
    node = backend.discover()
    try:
        plan = build_resources(node, config, claimed_gpus)
        devices = pool_devices(node, plan)
    except (SharingError, DeviceModelError) as exc:
        raise DraSetupError(f"config {loaded.source}: {exc}") from exc
    return DraSetup(config, node, plan, backend, devices, loaded.warnings + plan.warnings)
