"""CDI: the spec file for the node's GPUs (and IMEX channels), written atomically, and the names Allocate uses."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from gpuslice.fsutil import atomic_write_text
from gpuslice.gpu import Gpu, MigInstance, Node

CDI_VENDOR = "k8s.device-plugin.nvidia.com"
GPU_KIND = f"{CDI_VENDOR}/gpu"
IMEX_KIND = f"{CDI_VENDOR}/imex-channel"
# 0.5.0 is the first version with hostPath on device nodes and device names that start with a digit ("0:1").
CDI_VERSION = "0.5.0"
DEFAULT_CDI_DIR = "/var/run/cdi"
GPU_SPEC_FILE = "k8s.device-plugin.nvidia.com-gpu.json"
IMEX_SPEC_FILE = "k8s.device-plugin.nvidia.com-imex-channel.json"
ALL_DEVICES = "all"
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")
IMEX_CHANNEL_DIR = "/dev/nvidia-caps-imex-channels"

IdStrategy = Literal["uuid", "index"]

_DEVICE_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?")
_KIND = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?"
)
_VERSION = re.compile(r"\d+\.\d+\.\d+")


class CdiError(ValueError):
    """A CDI spec that would not be valid, or could not be written; names the device or path."""


def qualified_name(kind: str, name: str) -> str:
    """`<vendor>/<class>=<name>`, the form CDI names take in annotations and in cdi_devices."""
    return f"{kind}={name}"


def gpu_device_name(gpu: Gpu, mig: MigInstance | None, strategy: IdStrategy) -> str:
    """A device's CDI name under a deviceIDStrategy: its UUID, or its index (`0`, `0:1`)."""
    if mig is not None:
        return mig.uuid if strategy == "uuid" else mig.device_index
    return gpu.uuid if strategy == "uuid" else str(gpu.index)


def _node(path: str, dev_root: str) -> dict[str, str]:
    # Host paths follow the dev root, as NVIDIA rewrites them from the container driver root.
    root = dev_root.rstrip("/")
    return {"path": path, "hostPath": root + path} if root else {"path": path}


def _device_paths(gpu: Gpu, mig: MigInstance | None) -> list[str]:
    paths = [gpu.device_path]
    if mig is not None:
        paths.append(f"/dev/nvidia-caps/nvidia-cap{mig.gi_cap_minor}")
        paths.append(f"/dev/nvidia-caps/nvidia-cap{mig.ci_cap_minor}")
    return paths


def gpu_spec(node: Node, strategy: IdStrategy = "uuid", dev_root: str = "/") -> dict[str, Any]:
    """The CDI spec of every GPU and MIG device on the node, plus `all`.

    Common edits carry the control nodes and NVIDIA_VISIBLE_DEVICES=void (so the legacy runtime hook
    does not inject devices a second time); each device carries its own device nodes.
    """
    devices: list[dict[str, Any]] = []
    every: list[str] = []
    for gpu in node.gpus:
        entries: list[tuple[Gpu, MigInstance | None]] = [(gpu, None)]
        entries += [(gpu, mig) for mig in gpu.mig_instances]
        for parent, mig in entries:
            paths = _device_paths(parent, mig)
            every += paths
            devices.append(
                {
                    "name": gpu_device_name(parent, mig, strategy),
                    "containerEdits": {"deviceNodes": [_node(p, dev_root) for p in paths]},
                }
            )
    if devices:
        devices.append(
            {
                "name": ALL_DEVICES,
                "containerEdits": {"deviceNodes": [_node(p, dev_root) for p in dict.fromkeys(every)]},
            }
        )
    spec = {
        "cdiVersion": CDI_VERSION,
        "kind": GPU_KIND,
        "containerEdits": {
            "env": ["NVIDIA_VISIBLE_DEVICES=void"],
            "deviceNodes": [_node(p, dev_root) for p in CONTROL_NODES],
        },
        "devices": devices,
    }
    check_spec(spec)
    return spec


def imex_spec(channels: Sequence[int], dev_root: str = "/") -> dict[str, Any]:
    """The CDI spec of the selected IMEX channels (device `<n>` -> /dev/nvidia-caps-imex-channels/channel<n>)."""
    spec = {
        "cdiVersion": CDI_VERSION,
        "kind": IMEX_KIND,
        "devices": [
            {"name": str(n), "containerEdits": {"deviceNodes": [_node(f"{IMEX_CHANNEL_DIR}/channel{n}", dev_root)]}}
            for n in channels
        ],
    }
    check_spec(spec)
    return spec


def spec_problems(spec: Mapping[str, Any]) -> list[str]:
    """What makes a spec invalid under the CDI rules we rely on (empty when valid)."""
    problems = []
    version = spec.get("cdiVersion")
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        problems.append(f"cdiVersion: expected a semantic version, got {version!r}")
    kind = spec.get("kind")
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        problems.append(f"kind: expected '<vendor>/<class>', got {kind!r}")
    devices = spec.get("devices")
    if not isinstance(devices, list) or not devices:
        problems.append("devices: at least one device is required")
        devices = []
    seen: set[str] = set()
    for position, device in enumerate(devices):
        name = device.get("name") if isinstance(device, Mapping) else None
        where = f"devices[{position}]"
        if not isinstance(name, str) or not _DEVICE_NAME.fullmatch(name):
            problems.append(f"{where}.name: {name!r} is not a valid CDI device name")
        elif name in seen:
            problems.append(f"{where}.name: {name!r} appears twice")
        else:
            seen.add(name)
        edits = device.get("containerEdits") if isinstance(device, Mapping) else None
        problems += _edit_problems(edits, f"{where}.containerEdits", required=True)
    problems += _edit_problems(spec.get("containerEdits"), "containerEdits", required=False)
    return problems


def _edit_problems(edits: Any, where: str, required: bool) -> list[str]:
    if edits is None:
        return [f"{where}: required"] if required else []
    if not isinstance(edits, Mapping):
        return [f"{where}: expected a mapping"]
    problems = []
    for position, node in enumerate(edits.get("deviceNodes", [])):
        path = node.get("path") if isinstance(node, Mapping) else None
        if not isinstance(path, str) or not path.startswith("/"):
            problems.append(f"{where}.deviceNodes[{position}].path: expected an absolute path, got {path!r}")
    for position, entry in enumerate(edits.get("env", [])):
        if not isinstance(entry, str) or "=" not in entry:
            problems.append(f"{where}.env[{position}]: expected 'NAME=value', got {entry!r}")
    return problems


def check_spec(spec: Mapping[str, Any]) -> None:
    problems = spec_problems(spec)
    if problems:
        raise CdiError("invalid CDI spec: " + "; ".join(problems))


def write_spec(directory: str | Path, filename: str, spec: Mapping[str, Any]) -> Path:
    """Write a spec as JSON atomically (temp file in the same directory, fsync, rename), mode 0644."""
    check_spec(spec)
    target_dir = Path(directory)
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CdiError(f"cannot write CDI spec into {target_dir}: {exc.strerror or exc}") from exc
    try:
        return atomic_write_text(target_dir / filename, json.dumps(spec, indent=2) + "\n", mode=0o644)
    except OSError as exc:
        raise CdiError(f"cannot write CDI spec {target_dir / filename}: {exc.strerror or exc}") from exc


def write_node_specs(
    directory: str | Path,
    node: Node,
    strategy: IdStrategy = "uuid",
    dev_root: str = "/",
    imex_channels: Iterable[int] = (),
) -> tuple[Path, ...]:
    """Regenerate the GPU spec (and the IMEX one when channels are selected), as NVIDIA does at every start."""
    written = []
    if node.gpus:
        written.append(write_spec(directory, GPU_SPEC_FILE, gpu_spec(node, strategy, dev_root)))
    channels = tuple(imex_channels)
    if channels:
        written.append(write_spec(directory, IMEX_SPEC_FILE, imex_spec(channels, dev_root)))
    return tuple(written)
