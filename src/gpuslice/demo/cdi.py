"""The walkthrough's CDI part: a cdi-cri allocation on a fake driver root, each name resolved in the written spec."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpuslice.allocation.cdi import CONTROL_NODES
from gpuslice.allocation.cdi_resolve import ResolvedEdits, load_specs, resolve
from gpuslice.discovery import load_node_spec
from gpuslice.discovery.driver_files_fake import build_fake_driver_root
from gpuslice.kubelet import MockKubelet
from gpuslice.plugin.app import AppOptions, PluginApp

CDI_CRI_CONFIG = "flags:\n  plugin:\n    deviceListStrategy: cdi-cri\n"
HOST_DRIVER_ROOT = "/run/nvidia/driver"  # the host path the spec names; the fake root stands for its mount
CDI_POD = "cdi-1"
_LABEL = 14
_SHOWN_MOUNTS = 3


@dataclass
class CdiPart:
    node: str
    config: str
    driver_root: str
    spec_files: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    device_nodes: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    removed: bool = False  # the plugin removed its spec files when it stopped
    claim: str = ""
    holds: bool = False
    evidence: list[str] = field(default_factory=list)


def run_cdi_part(directory: Path) -> CdiPart:
    """Mock kubelet + the plugin with `deviceListStrategy: cdi-cri`; the spec comes from a fake driver root."""
    node = load_node_spec("preset:h100x4").node
    root = build_fake_driver_root(directory / "driver-root", version=node.driver_version)
    config_file = directory / "config.yaml"
    config_file.write_text(CDI_CRI_CONFIG)
    cdi_dir = directory / "cdi"
    part = CdiPart(
        node=f"{node.name} (preset h100x4), NVML driver {node.driver_version}",
        config="flags.plugin.deviceListStrategy: cdi-cri",
        driver_root=f"a fake {node.driver_version} driver root in the temp dir, named {HOST_DRIVER_ROOT} on the host",
    )
    with MockKubelet(directory / "kubelet", checkpoint_enabled=False) as kubelet:
        options = AppOptions(
            backend="fake",
            node_spec="preset:h100x4",
            config_file=str(config_file),
            kubelet_socket=str(kubelet.socket_path),
            cdi_spec_dir=str(cdi_dir),
            # --driver-root and --container-driver-root, as the CLI would pass them
            overrides={"flags.nvidiaDriverRoot": HOST_DRIVER_ROOT, "flags.plugin.containerDriverRoot": str(root)},
        )
        with PluginApp(options) as app:
            resource = app.plan.resources[0].name
            kubelet.wait_for(resource=resource, allocatable=len(node.gpus))
            allocation = kubelet.admit_one(CDI_POD, resource)
            part.spec_files = sorted(path.name for path in cdi_dir.iterdir())
            part.names = allocation.cdi_devices
            edits = resolve(load_specs(cdi_dir), part.names)
        part.removed = not any(cdi_dir.iterdir())
    part.device_nodes = list(edits.device_paths)
    part.mounts = list(edits.mount_paths)
    part.hooks = list(edits.hook_names)
    _prove(part, edits, allocation.device_ids[0])
    return part


def _prove(part: CdiPart, edits: ResolvedEdits, device_id: str) -> None:
    libcuda = [m for m in part.mounts if Path(m).name.startswith("libcuda.so.")]
    part.claim = "every CDI name in the answer resolves to device nodes, the driver's libraries and the hooks"
    part.holds = (
        part.names == [f"k8s.device-plugin.nvidia.com/gpu={device_id}"]
        and CONTROL_NODES[0] in part.device_nodes  # /dev/nvidiactl
        and any(p.startswith("/dev/nvidia") and p[len("/dev/nvidia") :].isdigit() for p in part.device_nodes)
        and bool(libcuda)
        and {"create-symlinks", "update-ldcache"} <= set(part.hooks)
        and all(str(m["hostPath"]).startswith(HOST_DRIVER_ROOT + "/") for m in edits.mounts)
        and part.removed
    )
    part.evidence = [
        f"{part.names[0].split('=')[0]}={device_id[:12]}...: {len(part.device_nodes)} device nodes, "
        f"{len(part.mounts)} read-only mounts, hooks {', '.join(part.hooks)}",
        f"host paths under {HOST_DRIVER_ROOT}: {edits.mounts[0]['hostPath'] if edits.mounts else 'none'}",
        f"the plugin removed its spec files when it stopped: {'yes' if part.removed else 'NO'}",
    ]


def render_cdi_lines(number: int, part: CdiPart) -> list[str]:
    """The section's text lines, in the walkthrough's two-column layout."""
    rest = f"... {len(part.mounts) - _SHOWN_MOUNTS} more (libraries, binaries, firmware, sockets)"
    mounts = [*part.mounts[:_SHOWN_MOUNTS], rest]
    return [
        f"{number}. CDI: a spec a CUDA container can run with",
        _row("node", part.node),
        _row("config", part.config),
        _row("driver root", part.driver_root),
        _row("spec files", ", ".join(part.spec_files)),
        _row("allocation", f"pod {CDI_POD} asks for nvidia.com/gpu: 1; the answer carries CDI names only"),
        *(_row("cdi name" if i == 0 else "", name, 5) for i, name in enumerate(part.names)),
        _row("resolves to", _counts(part)),
        *(_row("device nodes" if i == 0 else "", node, 5) for i, node in enumerate(part.device_nodes)),
        *(_row("mounts" if i == 0 else "", mount, 5) for i, mount in enumerate(mounts)),
        *(_row("hooks" if i == 0 else "", hook, 5) for i, hook in enumerate(part.hooks)),
    ]


def _row(label: str, value: str, indent: int = 3) -> str:
    return f"{' ' * indent}{label:<{_LABEL}}{value}"


def _counts(part: CdiPart) -> str:
    return f"{len(part.device_nodes)} device nodes, {len(part.mounts)} mounts, {len(part.hooks)} hooks"
