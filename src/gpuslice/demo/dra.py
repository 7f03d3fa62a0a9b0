"""The walkthrough's DRA part: the same node through DRA, three claims (whole GPU, MIG, MPS) prepared and undone."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuslice.demo.dynamic_part import row
from gpuslice.discovery import load_node_spec
from gpuslice.discovery.driver_files_fake import build_fake_driver_root
from gpuslice.dra import DraApp, DraSettings, prepare_setup
from gpuslice.dra.cdi import base_cdi_id, base_spec_file_name
from gpuslice.dra.kube import LightkubeResourceApi
from gpuslice.kubelet.dra_mock import MockDraKubelet
from gpuslice.mps import FakeMpsControl

DRA_WAIT_S = 10.0
DRIVER = "gpu.gpuslice.io"
DRA_NODE_SPEC = """\
name: gpuslice-dra
gpus:
  - {model: NVIDIA H100 80GB HBM3, count: 2, memory_mib: 81559, compute_capability: "9.0"}
  - {model: NVIDIA H100 80GB HBM3, count: 1, memory_mib: 81559, compute_capability: "9.0", mig: []}
"""
DRA_CONFIG = "flags:\n  migStrategy: dynamic\n"
DRA_CONFIG_SUMMARY = "flags.migStrategy: dynamic (one node config for the device plugin and DRA)"
_KIND = "device.attributes['gpu.gpuslice.io']"
CLASSES = {"gpu": f"{_KIND}.type == 'gpu'", "mig": f"{_KIND}.type == 'mig'"}
MPS = {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50, "defaultPinnedDeviceMemoryLimit": "20Gi"}}
# (claim, what it asks for in words, class, extra selector, opaque sharing config)
CLAIMS: tuple[tuple[str, str, str, str | None, Mapping[str, Any] | None], ...] = (
    ("whole-gpu", "one whole GPU", "gpu", None, None),
    ("mig-1g", "one MIG 1g.10gb", "mig", f"{_KIND}.profile == '1g.10gb'", None),
    ("mps-shared", "one GPU shared with MPS (50% SMs, 20Gi pinned)", "gpu", None, MPS),
)


@dataclass(frozen=True)
class DraClaimStep:
    claim: str
    asks: str
    device: str
    cdi_id: str
    isolation: str


@dataclass
class DraPart:
    node: str
    config: str
    slices: str = ""
    claims: list[DraClaimStep] = field(default_factory=list)
    claim: str = ""
    holds: bool = False
    evidence: list[str] = field(default_factory=list)


def _claim(name: str, device_class: str, selector: str | None, sharing: Mapping[str, Any] | None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    devices: dict[str, Any] = {"requests": [{"name": "req", "exactly": exactly}]}
    if sharing is not None:
        parameters = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": dict(sharing)}
        devices["config"] = [{"opaque": {"driver": DRIVER, "parameters": parameters}}]
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": devices}}


def run_dra_part(directory: Path) -> DraPart:
    """Mock kubelet (registry, API, allocator) + the DRA plugin in this process, over real sockets and HTTP."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "node.yaml").write_text(DRA_NODE_SPEC)
    (directory / "config.yaml").write_text(DRA_CONFIG)
    # A fake driver install, so the claims' specs carry the driver's libraries and hooks as on a node.
    version = load_node_spec(str(directory / "node.yaml")).node.driver_version
    driver_root = build_fake_driver_root(directory / "driver-root", version=version)
    overrides = {"flags.nvidiaDriverRoot": str(driver_root), "flags.plugin.containerDriverRoot": str(driver_root)}
    setup = prepare_setup("fake", str(directory / "node.yaml"), str(directory / "config.yaml"), overrides=overrides)
    part = DraPart(node=f"{setup.node.name}: 2 x H100 whole, 1 x H100 in MIG mode (dynamic)", config=DRA_CONFIG_SUMMARY)
    with MockDraKubelet(directory, setup.node.name) as kubelet:
        for class_name, expression in CLASSES.items():
            selectors = [{"cel": {"expression": expression}}]
            kubelet.add_device_class({"metadata": {"name": class_name}, "spec": {"selectors": selectors}})
        settings = DraSettings(
            driver=DRIVER,
            registry_dir=kubelet.registry_dir,
            plugins_dir=kubelet.plugins_dir,
            cdi_dir=directory / "cdi",
            mps_root=directory / "mps",
        )
        app = DraApp(setup, settings, LightkubeResourceApi(kubelet.api_url), mps_control=FakeMpsControl())
        app.start()
        try:
            registered = kubelet.watcher.wait_registered(DRIVER, DRA_WAIT_S)
            kubelet.wait_for_slices(DRIVER, len(setup.devices), DRA_WAIT_S)
            if app.plugin.slices is not None:  # publishing runs on its own thread: let its first sync finish
                app.plugin.slices.wait_synced(DRA_WAIT_S)
            slices = kubelet.slices(DRIVER)
            devices = [d for s in slices for d in s["spec"]["devices"]]
            placements = sum(1 for d in devices if "consumesCounters" in d)
            part.slices = (
                f"{len(slices)} slices, {len(devices)} devices: {len(devices) - placements} GPUs and {placements} "
                "MIG placements sharing one counter set (memory slices, engines)"
            )
            for number, (name, asks, device_class, selector, sharing) in enumerate(CLAIMS):
                uid = kubelet.create_claim(_claim(name, device_class, selector, sharing))["metadata"]["uid"]
                admission = kubelet.admit(f"pod-{number}", [name])
                (device,) = admission.claims[name]
                isolation = app.driver.preparer.records()[uid].isolation
                claim_id = next(i for i in device.cdi_ids if i != base_cdi_id(DRIVER))
                part.claims.append(DraClaimStep(name, asks, device.device, claim_id, isolation))
            claim_specs = f"k8s.{DRIVER}-claim_*.json"
            specs = sorted(p.name for p in settings.cdi_dir.glob(claim_specs))
            base = json.loads((settings.cdi_dir / base_spec_file_name(DRIVER)).read_text())["containerEdits"]
            mps_edits = json.loads(next(settings.cdi_dir.glob(f"*{uid}.json")).read_text())["containerEdits"]
            mps_env = [entry for entry in mps_edits["env"] if entry.startswith("CUDA_MPS")]
            driver_mounts = sum(1 for mount in mps_edits.get("mounts", ()) if "ro" in mount.get("options", ()))
            for number in range(len(CLAIMS)):
                kubelet.delete_pod(f"pod-{number}")
            left = sorted(p.name for p in settings.cdi_dir.glob(claim_specs))
        finally:
            app.stop()
    part.claim = "DRA: each claim gets its own CDI spec and isolation verdict; unprepare removes exactly that"
    part.holds = (
        registered
        and len(specs) == len(CLAIMS)
        and not left
        and "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps" in mps_env
        and bool(base.get("hooks"))
        and "hooks" not in mps_edits
    )
    part.evidence = [
        f"registered as {DRIVER} (v1.DRAPlugin); {len(specs)} CDI specs while the pods ran, {len(left)} after",
        f"the MPS claim's spec sets {', '.join(mps_env)}, with {driver_mounts} read-only driver mounts",
        f"the driver's {len(base.get('hooks', ()))} hooks are in the one base spec every device also names "
        f"({base_cdi_id(DRIVER)}): once per container, however many claims",
    ]
    return part


def render_dra_lines(number: int, part: DraPart) -> list[str]:
    lines = [
        f"{number}. DRA: the same model through Dynamic Resource Allocation",
        row("node", part.node),
        row("config", part.config),
        row("slices", part.slices),
    ]
    for step in part.claims:
        lines += [
            row("claim", f"{step.claim}: {step.asks}"),
            row("allocated", step.device, 5),
            row("CDI ID", step.cdi_id.split("=", 1)[0] + "=<claim uid>-" + step.device, 5),
            row("isolation", step.isolation, 5),
        ]
    return lines
