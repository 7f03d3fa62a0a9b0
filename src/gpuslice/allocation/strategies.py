"""NVIDIA's Allocate pipeline: CDI names, MPS, feature envs, envvar, volume-mounts, device specs, IMEX channels."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

from gpuslice.allocation.allocate import VISIBLE_DEVICES_ENV
from gpuslice.allocation.answer import ContainerEdits, DeviceNode, Mount, combine
from gpuslice.allocation.cdi import CDI_VENDOR, FEATURE_ENVS, GPU_KIND, IMEX_CHANNEL_DIR, IMEX_KIND, qualified_name
from gpuslice.allocation.errors import ImexChannelMissing
from gpuslice.allocation.mps_edits import client_edits
from gpuslice.allocation.options import AllocateOptions, AllocationContext

IMEX_CHANNELS_ENV = "NVIDIA_IMEX_CHANNELS"
VOLUME_MOUNT_ROOT = "/var/run/nvidia-container-devices"
ANNOTATION_NAME = "nvidia-device-plugin"


def device_ids(context: AllocationContext, strategy: Literal["uuid", "index"]) -> list[str]:
    """The requested devices reduced to physical IDs (UUIDs, or `0` / `0:1` indices), first-seen order."""
    return [device.index if strategy == "index" else device.physical_id for device in context.physical]


def nvidia_answer(context: AllocationContext) -> ContainerEdits:
    """The Allocate step that builds NVIDIA's whole answer for one container, in NVIDIA's order: CDI names,
    MPS, feature envs; then (unless only CDI strategies are on) envvar, volume-mounts, device specs."""
    settings = context.options
    ids = device_ids(context, settings.device_id_strategy)
    parts: list[ContainerEdits] = []  # merged once at the end, by ContainerEdits' rules, in this order
    if settings.cdi_enabled:
        parts.append(_cdi_edits(settings, ids))
    if settings.mps_root is not None:
        parts.append(
            client_edits(
                context.resource,
                context.devices,
                settings.mps_root,
                settings.per_container_mps_limits,
                settings.mps_visible_devices,
            )
        )
    if settings.features:
        parts.append(
            ContainerEdits(envs={env: "enabled" for name, env in FEATURE_ENVS.items() if name in settings.features})
        )
    if settings.cdi_only:
        return combine(parts)
    channels = [str(n) for n in settings.imex_channels]
    if "envvar" in settings.strategies:
        envs = {VISIBLE_DEVICES_ENV: ",".join(ids)}
        if channels:
            envs[IMEX_CHANNELS_ENV] = ",".join(channels)
        parts.append(ContainerEdits(envs=envs))
    if "volume-mounts" in settings.strategies:
        mounts = [Mount(f"{VOLUME_MOUNT_ROOT}/{i}", "/dev/null") for i in ids]
        mounts += [Mount(f"{VOLUME_MOUNT_ROOT}/imex/{n}", "/dev/null") for n in channels]
        parts.append(ContainerEdits(envs={VISIBLE_DEVICES_ENV: VOLUME_MOUNT_ROOT}, mounts=tuple(mounts)))
    if settings.pass_device_specs:
        parts.append(ContainerEdits(device_nodes=_device_specs(context, settings)))
    return combine(parts)


def _cdi_edits(settings: AllocateOptions, ids: list[str]) -> ContainerEdits:
    names = [qualified_name(GPU_KIND, i) for i in ids]
    names += [qualified_name(IMEX_KIND, str(n)) for n in settings.imex_channels]
    names += [qualified_name(f"{CDI_VENDOR}/{name}", "all") for name in FEATURE_ENVS if name in settings.features]
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


def _device_specs(context: AllocationContext, settings: AllocateOptions) -> tuple[DeviceNode, ...]:
    paths = list(settings.control_nodes)
    for device in context.physical:
        paths.append(device.gpu.device_path)
        if device.mig is not None:
            paths += device.mig.capability_paths
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
