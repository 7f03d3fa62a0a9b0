"""The DRA end-to-end harness: a mock kubelet, a real `gpuslice dra` process, claims and device classes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from gpuslice.discovery import MigControl
from gpuslice.dra import DraSettings, InMemoryResourceApi, prepare_setup
from gpuslice.dra.app import DraApp
from gpuslice.dra.driver import HardwareControls
from gpuslice.kubelet.dra_mock import MockDraKubelet
from gpuslice.mps import MpsControl
from tests.support.mps_program import FakeProgram, write_fake_program
from tests.support.process import clean_env

ROOT = Path(__file__).resolve().parents[2]
DRIVER = "gpu.gpuslice.io"
NODE = "node-a"
GPU_CLASS = "gpu.gpuslice.io"
MIG_CLASS = "mig.gpuslice.io"
NVIDIA_CONFIG = "resource.nvidia.com/v1beta1"

# GPUs 0 and 1 whole, GPU 2 a fixed MIG layout, GPU 3 in MIG mode with no instances (dynamic placements).
NODE_SPEC = f"""\
name: {NODE}
gpus:
  - {{model: NVIDIA H100 80GB HBM3, count: 2, memory_mib: 81559, compute_capability: "9.0"}}
  - {{model: NVIDIA H100 80GB HBM3, count: 1, memory_mib: 81559, compute_capability: "9.0",
      mig: [1g.10gb, 1g.10gb, 3g.40gb]}}
  - {{model: NVIDIA H100 80GB HBM3, count: 1, memory_mib: 81559, compute_capability: "9.0", mig: []}}
"""


def device_classes() -> list[dict[str, Any]]:
    """The DeviceClasses we ship (deploy/overlays/dra/deviceclasses.yaml)."""
    text = (ROOT / "deploy" / "overlays" / "dra" / "deviceclasses.yaml").read_text()
    return [doc for doc in yaml.safe_load_all(text) if doc]


def claim(
    name: str,
    device_class: str = GPU_CLASS,
    selectors: Sequence[str] = (),
    parameters: dict[str, Any] | None = None,
    count: int = 1,
) -> dict[str, Any]:
    """A ResourceClaim with one request `gpu` (and an opaque config for our driver when given)."""
    exactly: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": expression}} for expression in selectors]
    devices: dict[str, Any] = {"requests": [{"name": "gpu", "exactly": exactly}]}
    if parameters is not None:
        devices["config"] = [{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": parameters}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": devices},
    }


def gpu_config(sharing: dict[str, Any] | None = None, kind: str = "GpuConfig") -> dict[str, Any]:
    config: dict[str, Any] = {"apiVersion": NVIDIA_CONFIG, "kind": kind}
    if sharing is not None:
        config["sharing"] = sharing
    return config


class Node:
    """One node's directories: the kubelet root, CDI specs, MPS, the node spec and config files."""

    def __init__(self, root: Path, health_events: bool = False) -> None:
        self.root = root
        self.cdi = root / "cdi"
        self.mps = root / "mps"
        self.spec = root / "node.yaml"
        self.config = root / "config.yaml"
        self.events = root / "events.txt"
        self.events.touch()
        self.spec.write_text(NODE_SPEC + (f"health_events: {self.events}\n" if health_events else ""))
        self.config.write_text(f"version: v1\nflags:\n  migStrategy: dynamic\n  mpsRoot: {self.mps}\n")
        self.mps_program: FakeProgram = write_fake_program(root / "mps-program")

    def checkpoint(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.root / "plugins" / DRIVER / "checkpoint.json").read_text())
        return data

    def spec_file(self, claim_uid: str) -> Path:
        return self.cdi / f"k8s.{DRIVER}-claim_{claim_uid}.json"


def start_plugin(node: Node, kubelet: MockDraKubelet, *extra: str) -> subprocess.Popen[str]:
    """`gpuslice dra` on the fake backend, talking to the mock kubelet's API and registry."""
    command = [
        sys.executable, "-m", "gpuslice", "dra",
        "--backend", "fake",
        "--node-spec", str(node.spec),
        "--config-file", str(node.config),
        "--plugins-registry", str(kubelet.registry_dir),
        "--plugins-dir", str(kubelet.plugins_dir),
        "--cdi-spec-dir", str(node.cdi),
        "--kube-api-server", kubelet.api_url,
        "--mps-control-command", str(node.mps_program.path),
        "--resync-interval", "0.2",
        *extra,
    ]  # fmt: skip
    return subprocess.Popen(command, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def in_process_app(
    root: Path, config: str, mig: MigControl | None = None, mps_control: MpsControl | None = None
) -> DraApp:
    """A DraApp on the fake backend over NODE_SPEC with `config`, its directories under `root`, an in-memory API."""
    spec = root / "node.yaml"
    spec.write_text(NODE_SPEC)
    config_file = root / "config.yaml"
    config_file.write_text(config)
    setup = prepare_setup("fake", str(spec), str(config_file))
    settings = DraSettings(plugins_dir=root / "plugins", registry_dir=root / "reg", cdi_dir=root / "cdi")
    controls: HardwareControls = {}
    if mig is not None:
        controls["mig"] = mig  # else the backend's own
    if mps_control is not None:
        controls["mps_control"] = mps_control
    return DraApp(setup, settings, InMemoryResourceApi(), **controls)
