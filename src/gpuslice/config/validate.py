"""Start-up validation and NVIDIA's effective sharing rules (what the plugin really honours)."""

from __future__ import annotations

import fnmatch
from dataclasses import replace
from typing import Literal

from gpuslice.config.load import ConfigError
from gpuslice.config.model import Config, DeviceRef, ReplicatedResources
from gpuslice.records import record

SHARED_SUFFIX = ".shared"

Strategy = Literal["none", "time-slicing", "mps"]


@record
class SharingRule:
    """One replicated resource as it will be advertised."""

    resource: str  # the resource being shared, e.g. nvidia.com/gpu
    advertised_name: str  # after renaming, e.g. nvidia.com/gpu.shared
    replicas: int
    devices: Literal["all"] | int | tuple[DeviceRef, ...] = "all"
    model: str | None = None  # extension: product-name glob

    def applies_to_model(self, product_name: str) -> bool:
        return self.model is None or fnmatch.fnmatchcase(product_name, self.model)


@record
class EffectiveSharing:
    """The sharing strategy in force and its rules, after NVIDIA's naming rules and our extensions."""

    strategy: Strategy
    rules: tuple[SharingRule, ...] = ()
    fail_requests_greater_than_one: bool = False
    warnings: tuple[str, ...] = ()

    def rules_for(self, resource: str) -> tuple[SharingRule, ...]:
        return tuple(rule for rule in self.rules if rule.resource == resource)


RESOURCES_IGNORED = "Customizing the 'resources' field is not yet supported in the config. Ignoring..."


def effective_sharing(config: Config) -> EffectiveSharing:
    """NVIDIA's 'disable resource naming' step, unless `gpuslice.honorDevices` asks us to honour them.

    Without the extension: `rename` is dropped (renameByDefault false) or forced to `<name>.shared`
    (true), `devices` is forced to `all`, each with NVIDIA's warning text, and a resource listed twice
    gets the union of its replica IDs (the largest `replicas`), as NVIDIA advertises it.
    """
    block: ReplicatedResources | None = config.sharing.replicated
    strategy: Strategy = config.sharing.strategy
    warnings: list[str] = []
    if config.resources is not None and (config.resources.gpus or config.resources.mig):
        warnings.append(RESOURCES_IGNORED)  # the built-in patterns always apply, as in NVIDIA's plugin
    if block is None:
        return EffectiveSharing("none", warnings=tuple(warnings))
    section = "mps" if strategy == "mps" else "timeSlicing"
    honour = config.gpuslice.honor_devices
    rules: list[SharingRule] = []
    for entry in block.resources:
        rename = entry.rename
        devices = entry.devices
        if not honour:
            if rename is not None:
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
        rule = SharingRule(
            resource=entry.name,
            advertised_name=rename or entry.name,
            replicas=entry.replicas,
            devices=devices,
            model=entry.model if honour else None,
        )
        if honour or not _merged_into_earlier(rules, rule, section, warnings):
            rules.append(rule)
    fail_gt_one = block.fail_requests_greater_than_one
    if fail_gt_one is None:
        fail_gt_one = strategy == "mps"  # NVIDIA v0.20: MPS enforces one replica per request by default
    return EffectiveSharing(strategy, tuple(rules), fail_gt_one, tuple(dict.fromkeys(warnings)))


def _merged_into_earlier(rules: list[SharingRule], rule: SharingRule, section: str, warnings: list[str]) -> bool:
    """Merge `rule` into an earlier rule for the same resource (True: merged); NVIDIA's IDs are a union."""
    for position, earlier in enumerate(rules):
        if earlier.resource == rule.resource:
            replicas = max(earlier.replicas, rule.replicas)
            rules[position] = replace(earlier, replicas=replicas)
            warnings.append(
                f"sharing.{section}.resources: {rule.resource} is listed more than once; advertising the union of "
                f"its replicas ({replicas} per device)"
            )
            return True
    return False


def validate_startup(config: Config) -> None:
    """NVIDIA's start-up checks, with its texts; raises ConfigError before anything registers."""

    def fail(message: str) -> None:
        raise ConfigError(f"unable to load config: unable to validate flags: {message}")

    if config.flags.device_discovery_strategy == "vfio":
        # gpu-feature-discovery accepts vfio; NVIDIA's plugin refuses it with this text.
        fail("invalid --device-discovery-strategy option vfio")
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
