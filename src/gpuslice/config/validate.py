"""Start-up validation and NVIDIA's effective sharing rules (what the plugin really honours)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Literal

from gpuslice.config.load import ConfigError
from gpuslice.config.model import Config, DeviceRef, ReplicatedResources

SHARED_SUFFIX = ".shared"

Strategy = Literal["none", "time-slicing", "mps"]


@dataclass(frozen=True)
class SharingRule:
    """One replicated resource as it will be advertised."""

    resource: str  # the resource being shared, e.g. nvidia.com/gpu
    advertised_name: str  # after renaming, e.g. nvidia.com/gpu.shared
    replicas: int
    devices: Literal["all"] | int | tuple[DeviceRef, ...] = "all"
    model: str | None = None  # extension: product-name glob

    def applies_to_model(self, product_name: str) -> bool:
        return self.model is None or fnmatch.fnmatchcase(product_name, self.model)


@dataclass(frozen=True)
class EffectiveSharing:
    """The sharing strategy in force and its rules, after NVIDIA's naming rules and our extensions."""

    strategy: Strategy
    rules: tuple[SharingRule, ...] = ()
    fail_requests_greater_than_one: bool = False
    warnings: tuple[str, ...] = ()

    def rules_for(self, resource: str) -> tuple[SharingRule, ...]:
        return tuple(rule for rule in self.rules if rule.resource == resource)


def effective_sharing(config: Config) -> EffectiveSharing:
    """NVIDIA's 'disable resource naming' step, unless `gpuslice.honorDevices` asks us to honour them.

    Without the extension: `rename` is dropped (renameByDefault false) or forced to `<name>.shared`
    (true), and `devices` is forced to `all`, each with NVIDIA's warning text.
    """
    block: ReplicatedResources | None = config.sharing.replicated
    strategy: Strategy = config.sharing.strategy
    if block is None:
        return EffectiveSharing("none")
    section = "mps" if strategy == "mps" else "timeSlicing"
    honour = config.gpuslice.honor_devices
    warnings: list[str] = []
    rules = []
    for entry in block.resources:
        rename = entry.rename
        devices = entry.devices
        if not honour:
            if rename is not None and not block.rename_by_default:
                warnings.append(
                    f"Setting the 'rename' field in sharing.{section}.resources is not yet supported in the config. "
                    "Ignoring..."
                )
            if devices != "all":
                warnings.append(
                    f"Customizing the 'devices' field in sharing.{section}.resources is not yet supported in the "
                    "config. Ignoring..."
                )
            rename = None
            devices = "all"
        if block.rename_by_default and rename is None:
            rename = entry.name + SHARED_SUFFIX
        rules.append(
            SharingRule(
                resource=entry.name,
                advertised_name=rename or entry.name,
                replicas=entry.replicas,
                devices=devices,
                model=entry.model if honour else None,
            )
        )
    fail_gt_one = block.fail_requests_greater_than_one
    if fail_gt_one is None:
        fail_gt_one = strategy == "mps"  # NVIDIA v0.20: MPS enforces one replica per request by default
    return EffectiveSharing(strategy, tuple(rules), fail_gt_one, tuple(dict.fromkeys(warnings)))


def validate_startup(config: Config) -> None:
    """NVIDIA's start-up checks, with its texts; raises ConfigError before anything registers."""

    def fail(message: str) -> None:
        raise ConfigError(f"unable to load config: unable to validate flags: {message}")

    strategy = config.sharing.strategy
    if strategy == "mps" and config.flags.mig_strategy == "mixed":
        fail("using --mig-strategy=mixed is not supported with MPS")
    if strategy == "mps" and not config.flags.mps_root:
        fail("using MPS requires --mps-root to be specified")
    block = config.sharing.replicated
    if block is not None and not config.gpuslice.allow_single_replica:
        for entry in block.resources:
            if entry.replicas < 2:
                fail(
                    f"{entry.name}: number of replicas must be >= 2 "
                    "(set gpuslice.allowSingleReplica: true for single-client sharing)"
                )
