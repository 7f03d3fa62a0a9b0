"""CDI: the GPU and IMEX-channel specs, written atomically, and the names Allocate uses (the checker: cdi_validate)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from gpuslice.allocation.cdi_validate import minimum_version, spec_problems
from gpuslice.fsutil.atomic import atomic_write_text
from gpuslice.gpu import Gpu, MigInstance, Node

CDI_VENDOR = "k8s.device-plugin.nvidia.com"
# The extra features a CDI spec of its own serves, and the env var that turns each on in the container.
FEATURE_ENVS = {"gdrcopy": "NVIDIA_GDRCOPY", "gds": "NVIDIA_GDS", "mofed": "NVIDIA_MOFED"}
GPU_KIND = f"{CDI_VENDOR}/gpu"
IMEX_KIND = f"{CDI_VENDOR}/imex-channel"
DEFAULT_CDI_DIR = "/var/run/cdi"
GPU_SPEC_FILE = "k8s.device-plugin.nvidia.com-gpu.json"
IMEX_SPEC_FILE = "k8s.device-plugin.nvidia.com-imex-channel.json"
ALL_DEVICES = "all"
VOID_VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES=void"
# The driver's control device nodes, the one list of them: NVIDIA passes each that exists to every GPU
# container. /dev/nvidia-modeset serves display mode setting, which CUDA does not need.
MODESET_NODE = "/dev/nvidia-modeset"
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", MODESET_NODE)
IMEX_CHANNEL_DIR = "/dev/nvidia-caps-imex-channels"

IdStrategy = Literal["uuid", "index"]


class CdiError(ValueError):
    """A CDI spec that would not be valid, or could not be written; names the device or path."""


def qualified_name(kind: str, name: str) -> str:
    """`<vendor>/<class>=<name>`, the form CDI names take in annotations and in cdi_devices."""
    return f"{kind}={name}"


def spec_device_name(gpu: Gpu, mig: MigInstance | None, strategy: IdStrategy) -> str:
    """A device's CDI name under a deviceIDStrategy: its UUID, or its index (`0`, `0:1`)."""
    if mig is not None:
        return mig.uuid if strategy == "uuid" else mig.device_index
    return gpu.uuid if strategy == "uuid" else str(gpu.index)


def device_node(path: str, dev_root: str) -> dict[str, str]:
    """A CDI device node; host paths follow the dev root, as NVIDIA rewrites them from the container driver root."""
    root = dev_root.rstrip("/")
    return {"path": path, "hostPath": root + path} if root else {"path": path}


def device_nodes(gpu: Gpu, mig: MigInstance | None, dev_root: str) -> list[dict[str, str]]:
    """The device nodes of one device: its GPU's, and for a MIG device its two capability nodes."""
    return [device_node(path, dev_root) for path in _device_paths(gpu, mig)]


def _device_paths(gpu: Gpu, mig: MigInstance | None) -> list[str]:
    return [gpu.device_path, *(mig.capability_paths if mig is not None else ())]


def present_control_nodes(node_exists: Callable[[str], bool]) -> tuple[str, ...]:
    """The control nodes this node has (no /dev/nvidia-modeset where the driver made none)."""
    return tuple(path for path in CONTROL_NODES if node_exists(path))


def common_edits(
    dev_root: str,
    control_nodes: Sequence[str] = CONTROL_NODES,
    common: Mapping[str, Any] | None = None,
    env: Sequence[str] = (),
) -> dict[str, Any]:
    """The containerEdits every device of a GPU spec shares: the control nodes, `common` (the driver's
    mounts and hooks, cdi_driver) and `env` after the driver's (build_spec puts void first)."""
    extra = dict(common or {})
    return {
        "env": [*extra.pop("env", []), *env],
        "deviceNodes": [device_node(p, dev_root) for p in control_nodes],
        **extra,
    }


def split_hooks(edits: Mapping[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """`edits` without their hooks, and the hooks.

    A runtime applies the common edits of every spec file a container names, once per file, and keeps
    one mount per container path, one device node per path and one value per env name, but runs every
    hook it is given. So where one container names several spec files (DRA: one per claim), the hooks
    go in one file they all name, and the rest may repeat harmlessly.
    """
    rest = {key: value for key, value in edits.items() if key != "hooks"}
    return rest, list(edits.get("hooks") or ())


def build_spec(
    kind: str, devices: Sequence[Mapping[str, Any]], common: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The one builder of every CDI spec (GPUs, IMEX channels, GPUDirect features, DRA claims).

    `devices` under `kind`, with `common` as the spec's containerEdits after NVIDIA_VISIBLE_DEVICES=void:
    the legacy runtime hook then injects no device a second time, nor every GPU for a CUDA image's
    `all`, whichever of our specs a container gets. The lowest cdiVersion that carries what the spec
    uses; checked (CdiError when invalid).
    """
    edits = dict(common or {})
    edits["env"] = [VOID_VISIBLE_DEVICES, *edits.get("env", ())]
    spec: dict[str, Any] = {"kind": kind, "containerEdits": edits, "devices": [dict(d) for d in devices]}
    spec = {"cdiVersion": minimum_version(spec), **spec}
    check_spec(spec)
    return spec


def gpu_spec(
    node: Node,
    strategy: IdStrategy = "uuid",
    dev_root: str = "/",
    common: Mapping[str, Any] | None = None,
    control_nodes: Sequence[str] = CONTROL_NODES,
) -> dict[str, Any]:
    """The CDI spec of every GPU and MIG device on the node, each by UUID and by index, plus `all`.

    Both names are written whatever the deviceIDStrategy (its form first), so a name that a user
    picked by hand (`--device k8s.device-plugin.nvidia.com/gpu=0`) resolves too. Common edits carry
    the control nodes and NVIDIA_VISIBLE_DEVICES=void (so the legacy runtime hook does not inject
    devices a second time), plus `common` (the driver's mounts and hooks, cdi_driver); each device
    carries its own device nodes.
    """
    devices: list[dict[str, Any]] = []
    every: list[str] = []
    for gpu in node.gpus:
        entries: list[tuple[Gpu, MigInstance | None]] = [(gpu, None)]
        entries += [(gpu, mig) for mig in gpu.mig_instances]
        other: IdStrategy = "index" if strategy == "uuid" else "uuid"
        for parent, mig in entries:
            every += _device_paths(parent, mig)
            nodes = device_nodes(parent, mig, dev_root)
            for name in (spec_device_name(parent, mig, strategy), spec_device_name(parent, mig, other)):
                devices.append({"name": name, "containerEdits": {"deviceNodes": nodes}})
    if devices:
        devices.append(
            {
                "name": ALL_DEVICES,
                "containerEdits": {"deviceNodes": [device_node(p, dev_root) for p in dict.fromkeys(every)]},
            }
        )
    return build_spec(GPU_KIND, devices, common_edits(dev_root, control_nodes, common))


def imex_spec(channels: Sequence[int], dev_root: str = "/") -> dict[str, Any]:
    """The CDI spec of the selected IMEX channels (device `<n>` -> /dev/nvidia-caps-imex-channels/channel<n>)."""
    devices = [
        {"name": str(n), "containerEdits": {"deviceNodes": [device_node(f"{IMEX_CHANNEL_DIR}/channel{n}", dev_root)]}}
        for n in channels
    ]
    return build_spec(IMEX_KIND, devices)


def check_spec(spec: Mapping[str, Any]) -> None:
    """Raise CdiError listing every problem of `spec` under the CDI specification (cdi_validate)."""
    problems = spec_problems(spec)
    if problems:
        raise CdiError("invalid CDI spec: " + "; ".join(problems))


def write_spec(directory: str | Path, filename: str, spec: Mapping[str, Any]) -> Path:
    """Write a spec as JSON atomically (temp file in the same directory, fsync, rename), mode 0644.

    `spec` is one build_spec made, and so checked; it is not checked again here (a second pass over a
    claim's spec was a tenth of a DRA prepare's own time)."""
    target_dir = Path(directory)
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CdiError(f"cannot write CDI spec into {target_dir}: {exc.strerror or exc}") from exc
    import json  # only where a spec is written: a start without a cdi-* strategy needs no JSON

    try:
        # one line, from json's C encoder (an indent takes the pure-Python one: ~10x the time of a claim's spec)
        return atomic_write_text(target_dir / filename, json.dumps(spec) + "\n", mode=0o644)
    except OSError as exc:
        raise CdiError(f"cannot write CDI spec {target_dir / filename}: {exc.strerror or exc}") from exc
