"""NVIDIA's Allocate pipeline: CDI names, MPS, feature envs, envvar, volume-mounts, device specs, IMEX channels."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from gpuslice.allocation.answer import ContainerEdits, DeviceNode, Mount
from gpuslice.allocation.cdi import CDI_VENDOR, CONTROL_NODES, GPU_KIND, IMEX_CHANNEL_DIR, IMEX_KIND, qualified_name
from gpuslice.allocation.mps_edits import client_edits
from gpuslice.config import Config

if TYPE_CHECKING:  # the pipeline is called with allocate.py's context; importing it here would be circular
    from gpuslice.allocation.allocate import AllocationContext

DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
CDI_STRATEGIES = frozenset({"cdi-annotations", "cdi-cri"})
VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
IMEX_CHANNELS_ENV = "NVIDIA_IMEX_CHANNELS"
VOLUME_MOUNT_ROOT = "/var/run/nvidia-container-devices"
ANNOTATION_NAME = "nvidia-device-plugin"
FEATURE_ENVS = (("gdrcopy", "NVIDIA_GDRCOPY"), ("gds", "NVIDIA_GDS"), ("mofed", "NVIDIA_MOFED"))


class ImexChannelMissing(ValueError):
    """A required IMEX channel whose device node does not exist (NVIDIA's text)."""


def _new_uuid() -> str:
    return str(uuid.uuid4())


@dataclass(frozen=True)
class DeviceListSettings:
    """The config keys that shape an Allocate answer, resolved once (flags > env > file already applied)."""

    strategies: tuple[str, ...] = ("envvar",)
    device_id_strategy: Literal["uuid", "index"] = "uuid"
    pass_device_specs: bool = False
    dev_root: str = "/"
    cdi_annotation_prefix: str = "cdi.k8s.io/"
    imex_channels: tuple[int, ...] = ()  # the channels that passed the start-up check
    features: frozenset[str] = frozenset()  # of "gdrcopy", "gds", "mofed"
    mps_root: str | None = None
    per_container_mps_limits: bool = True
    mps_visible_devices: bool = True
    control_nodes: tuple[str, ...] = CONTROL_NODES  # those that exist inside the plugin's container
    new_uuid: Callable[[], str] = field(default=_new_uuid, compare=False, repr=False)

    @classmethod
    def from_config(
        cls,
        config: Config,
        imex_channels: Iterable[int] = (),
        control_nodes: Iterable[str] = CONTROL_NODES,
        new_uuid: Callable[[], str] = _new_uuid,
    ) -> DeviceListSettings:
        flags = config.flags
        features = {name for name, on in (("gdrcopy", flags.gdrcopy_enabled), ("gds", flags.gds_enabled)) if on}
        if flags.mofed_enabled:
            features.add("mofed")
        return cls(
            strategies=tuple(dict.fromkeys(flags.plugin.device_list_strategy)),
            device_id_strategy=flags.plugin.device_id_strategy,
            pass_device_specs=pass_device_specs(config),
            dev_root=flags.dev_root,
            cdi_annotation_prefix=flags.plugin.cdi_annotation_prefix,
            imex_channels=tuple(imex_channels),
            features=frozenset(features),
            mps_root=flags.mps_root,
            per_container_mps_limits=config.gpuslice.per_container_mps_limits,
            mps_visible_devices=config.gpuslice.mps_visible_devices,
            control_nodes=tuple(control_nodes),
            new_uuid=new_uuid,
        )

    @property
    def cdi_enabled(self) -> bool:
        return any(strategy in CDI_STRATEGIES for strategy in self.strategies)

    @property
    def cdi_only(self) -> bool:
        return all(strategy in CDI_STRATEGIES for strategy in self.strategies)


def pass_device_specs(config: Config) -> bool:
    """`flags.plugin.passDeviceSpecs` when the config (or a flag or env var) sets it, else true.

    NVIDIA's default is false: its answer then relies on the NVIDIA container runtime hook to add the
    device nodes. gpuslice answers with the nodes unless told not to, so a plain runtime works too;
    `passDeviceSpecs: false` gives NVIDIA's exact answer.
    """
    plugin = config.flags.plugin
    return plugin.pass_device_specs if "pass_device_specs" in plugin.model_fields_set else True


def device_ids(context: AllocationContext, strategy: Literal["uuid", "index"]) -> list[str]:
    """The requested devices reduced to physical IDs (UUIDs, or `0` / `0:1` indices), first-seen order."""
    return [device.index if strategy == "index" else device.physical_id for device in context.physical]


def nvidia_answer(settings: DeviceListSettings) -> Callable[[AllocationContext], ContainerEdits]:
    """An Allocate step that builds NVIDIA's whole answer for one container (§6 of the reference, in order)."""

    def step(context: AllocationContext) -> ContainerEdits:
        ids = device_ids(context, settings.device_id_strategy)
        edits = ContainerEdits()
        if settings.cdi_enabled:
            edits = edits.merged(_cdi_edits(settings, ids))
        if settings.mps_root is not None:
            edits = edits.merged(
                client_edits(
                    context.resource,
                    context.devices,
                    settings.mps_root,
                    settings.per_container_mps_limits,
                    settings.mps_visible_devices,
                )
            )
        features = {env: "enabled" for name, env in FEATURE_ENVS if name in settings.features}
        edits = edits.merged(ContainerEdits(envs=features))
        if settings.cdi_only:
            return edits
        channels = [str(n) for n in settings.imex_channels]
        if "envvar" in settings.strategies:
            envs = {VISIBLE_DEVICES_ENV: ",".join(ids)}
            if channels:
                envs[IMEX_CHANNELS_ENV] = ",".join(channels)
            edits = edits.merged(ContainerEdits(envs=envs))
        if "volume-mounts" in settings.strategies:
            mounts = [Mount(f"{VOLUME_MOUNT_ROOT}/{i}", "/dev/null") for i in ids]
            mounts += [Mount(f"{VOLUME_MOUNT_ROOT}/imex/{n}", "/dev/null") for n in channels]
            edits = edits.merged(ContainerEdits(envs={VISIBLE_DEVICES_ENV: VOLUME_MOUNT_ROOT}, mounts=tuple(mounts)))
        if settings.pass_device_specs:
            edits = edits.merged(ContainerEdits(device_nodes=_device_specs(context, settings)))
        return edits

    return step


def _cdi_edits(settings: DeviceListSettings, ids: list[str]) -> ContainerEdits:
    names = [qualified_name(GPU_KIND, i) for i in ids]
    names += [qualified_name(IMEX_KIND, str(n)) for n in settings.imex_channels]
    names += [qualified_name(f"{CDI_VENDOR}/{name}", "all") for name, _ in FEATURE_ENVS if name in settings.features]
    if not names:
        return ContainerEdits()
    annotations: dict[str, str] = {}
    cdi_devices: tuple[str, ...] = ()
    if "cdi-annotations" in settings.strategies:
        key = f"{settings.cdi_annotation_prefix}{ANNOTATION_NAME}_{settings.new_uuid()}"
        annotations[key] = ",".join(names)
    if "cdi-cri" in settings.strategies:
        cdi_devices = tuple(names)
    return ContainerEdits(annotations=annotations, cdi_devices=cdi_devices)


def _device_specs(context: AllocationContext, settings: DeviceListSettings) -> tuple[DeviceNode, ...]:
    paths = list(settings.control_nodes)
    for device in context.physical:
        paths.append(device.gpu.device_path)
        if device.mig is not None:
            paths.append(f"/dev/nvidia-caps/nvidia-cap{device.mig.gi_cap_minor}")
            paths.append(f"/dev/nvidia-caps/nvidia-cap{device.mig.ci_cap_minor}")
    paths += [f"{IMEX_CHANNEL_DIR}/channel{n}" for n in settings.imex_channels]
    root = settings.dev_root.rstrip("/")
    return tuple(DeviceNode(path, root + path, "rw") for path in dict.fromkeys(paths))


def select_imex_channels(
    channel_ids: Iterable[int], required: bool, dev_root: str, is_char_device: Callable[[str], bool]
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The configured IMEX channels whose node exists (under the dev root, or directly), and warnings.

    A missing channel is an error when `imex.required` is true, otherwise it is dropped with a warning.
    """
    selected = []
    warnings = []
    root = dev_root.rstrip("/")
    for channel in channel_ids:
        path = f"{IMEX_CHANNEL_DIR}/channel{channel}"
        if is_char_device(root + path) or is_char_device(path):
            selected.append(channel)
        elif required:
            raise ImexChannelMissing(f"requested IMEX channel channel{channel} does not exist")
        else:
            warnings.append(f"Ignoring requested IMEX channel channel{channel}: {path} is not a character device")
    return tuple(selected), tuple(warnings)
