"""The one set of Allocate settings: every setting once, with its one default, resolved from the config."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import field
from typing import Any, Literal

from gpuslice.allocation.answer import ContainerEdits
from gpuslice.allocation.cdi import CONTROL_NODES
from gpuslice.config import Config
from gpuslice.records import record
from gpuslice.sharing import AdvertisedDevice, Resource

CDI_STRATEGIES = frozenset({"cdi-annotations", "cdi-cri"})


def _new_uuid() -> str:
    return str(uuid.uuid4())


@record
class AllocationContext:
    """What every pipeline step sees: the resource, the validated devices and the options."""

    resource: Resource
    devices: tuple[AdvertisedDevice, ...]  # as requested, validated
    physical: tuple[AdvertisedDevice, ...]  # one per physical device, first-seen order
    options: AllocateOptions


EditStep = Callable[[AllocationContext], ContainerEdits]


@record
class AllocateOptions:
    """How Allocate answers are built. Each field is one setting with its one default, stated here.

    The answer is a pipeline of steps, each adding ContainerEdits, merged in order. Without `pipeline`
    it is gpuslice's own: NVIDIA_VISIBLE_DEVICES plus, with `pass_device_specs`, the device nodes.
    `pipeline` replaces it (the plugin passes NVIDIA's full answer: device list strategies, CDI, MPS,
    IMEX, feature envs); `extra_steps` run after whichever pipeline is in force.
    """

    # flags.plugin.deviceIDStrategy: devices are named by UUID (NVIDIA's default) or by index.
    device_id_strategy: Literal["uuid", "index"] = "uuid"
    # flags.plugin.passDeviceSpecs: true unless the config sets it. NVIDIA's default is false (its answer
    # relies on the NVIDIA container runtime hook to add the device nodes); gpuslice answers with the nodes
    # so a plain runtime works too, and `passDeviceSpecs: false` gives NVIDIA's exact answer.
    pass_device_specs: bool = True
    # flags.nvidiaDevRoot: host paths of device nodes are dev_root + the container path.
    dev_root: str = "/"
    # flags.plugin.deviceListStrategy, de-duplicated in order: envvar, volume-mounts, cdi-annotations, cdi-cri.
    strategies: tuple[str, ...] = ("envvar",)
    # flags.plugin.cdiAnnotationPrefix: the key prefix of the cdi-annotations strategy.
    cdi_annotation_prefix: str = "cdi.k8s.io/"
    # imex.channelIDs that passed the start-up check (their device node exists).
    imex_channels: tuple[int, ...] = ()
    # Of "gdrcopy", "gds", "mofed": flags.gdrcopyEnabled, gdsEnabled, mofedEnabled.
    features: frozenset[str] = frozenset()
    # flags.mpsRoot: where the MPS daemons' pipes and logs live; None when MPS is not configured.
    mps_root: str | None = None
    # gpuslice.perContainerMpsLimits and gpuslice.mpsVisibleDevices (gpuslice extensions, on by default).
    per_container_mps_limits: bool = True
    mps_visible_devices: bool = True
    # The control device nodes that exist inside the plugin's own container (NVIDIA checks them at start).
    control_nodes: tuple[str, ...] = CONTROL_NODES
    # The source of the cdi-annotations key's UUID (tests pin it).
    new_uuid: Callable[[], str] = field(default=_new_uuid, compare=False, repr=False)
    extra_steps: tuple[EditStep, ...] = ()
    pipeline: tuple[EditStep, ...] | None = None

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        imex_channels: Iterable[int] = (),
        control_nodes: Iterable[str] = CONTROL_NODES,
        **overrides: Any,
    ) -> AllocateOptions:
        """The settings of `config` (flags > env > file already applied); keyword overrides for any field."""
        flags = config.flags
        plugin = flags.plugin
        features = {name for name, on in (("gdrcopy", flags.gdrcopy_enabled), ("gds", flags.gds_enabled)) if on}
        if flags.mofed_enabled:
            features.add("mofed")
        settings: dict[str, Any] = {
            "device_id_strategy": plugin.device_id_strategy,
            "dev_root": flags.dev_root,
            "strategies": tuple(dict.fromkeys(plugin.device_list_strategy)),
            "cdi_annotation_prefix": plugin.cdi_annotation_prefix,
            "imex_channels": tuple(imex_channels),
            "features": frozenset(features),
            "mps_root": flags.mps_root,
            "per_container_mps_limits": config.gpuslice.per_container_mps_limits,
            "mps_visible_devices": config.gpuslice.mps_visible_devices,
            "control_nodes": tuple(control_nodes),
        }
        if plugin.pass_device_specs is not None:
            settings["pass_device_specs"] = plugin.pass_device_specs
        return cls(**(settings | overrides))

    @property
    def cdi_enabled(self) -> bool:
        return any(strategy in CDI_STRATEGIES for strategy in self.strategies)

    @property
    def cdi_only(self) -> bool:
        return all(strategy in CDI_STRATEGIES for strategy in self.strategies)


DEFAULT_OPTIONS = AllocateOptions()
