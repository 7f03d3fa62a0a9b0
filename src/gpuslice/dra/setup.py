"""The DRA plugin's view of a node: the node core's served config (gpuslice.node) -> DRA devices."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import fields
from typing import Any

from gpuslice.config import Config, ConfigError
from gpuslice.dra.devices import DeviceModelError, DraDevice, pool_devices
from gpuslice.node.served import ServedConfigError, ServedNode, backend_from_flags, build_served
from gpuslice.records import record


class DraSetupError(ValueError):
    """Bad input found before anything is served (exit code 2); the message names the key or file."""


@record
class DraSetup(ServedNode):
    """The served node and the devices the DRA plugin publishes from it, decided before the first socket exists."""

    devices: tuple[DraDevice, ...] = ()


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
        served = build_served(
            config_file,
            backend_from_flags(backend_kind, node_spec, node_name),
            overrides=overrides,
            claimed_gpus=claimed_gpus,
            check=_no_node_mps,
        )
        devices = pool_devices(served.node, served.plan)
    except ServedConfigError as exc:
        raise DraSetupError(str(exc)) from exc
    except DeviceModelError as exc:
        raise DraSetupError(f"config {served.source}: {exc}") from exc
    return DraSetup(**{f.name: getattr(served, f.name) for f in fields(served)}, devices=devices)


def _no_node_mps(config: Config, source: str) -> None:
    if config.sharing.strategy == "mps":
        raise ConfigError(
            f"config {source}: sharing.mps: under DRA, MPS is asked for per claim "
            "(opaque GpuConfig with sharing.strategy MPS); remove sharing.mps from the node's config"
        )
