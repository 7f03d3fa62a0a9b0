"""`make device-check`: discovery, MIG, topology, labels, Xid registration and one real Allocate on this machine."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuslice.discovery import Backend, FakeBackend
from gpuslice.discovery.nvml import NvmlBackend
from gpuslice.discovery.select import BackendInitError, make_backend
from gpuslice.discovery.xid import XidEvent
from gpuslice.gpu import Node
from gpuslice.logs import configure_logging

RESULTS: list[tuple[str, str, str]] = []  # (step, PASS/FAIL/SKIP, detail)
REHEARSAL_SPEC = "preset:h100x4"


def step(name: str, func: Callable[[], str]) -> None:
    """Run one check; a failure is recorded and printed, and the next step still runs."""
    print(f"\n== {name} ==", flush=True)
    try:
        detail = func()
        verdict = "SKIP" if detail.startswith("skipped") else "PASS"
    except Exception as exc:  # a check script reports every failure and carries on
        detail, verdict = f"{type(exc).__name__}: {exc}", "FAIL"
        print(f"FAILED: {detail}", flush=True)
    RESULTS.append((name, verdict, detail))


def show_node(node: Node, backend: Backend) -> str:
    print(f"backend: {backend.name}   node: {node.name}   machine: {node.machine_type}")
    print(f"driver: {node.driver_version}   CUDA driver: {node.cuda_driver_version}")
    for name in ("nvidia-ml-py", "grpcio"):
        try:
            print(f"{name}: {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            print(f"{name}: not installed")
    for gpu in node.gpus:
        print(
            f"GPU {gpu.index}: {gpu.uuid}  {gpu.product_name}  {gpu.memory_mib} MiB  CC {gpu.compute_capability} "
            f"({gpu.compute_capability.family})  bus {gpu.pci_bus_id}  NUMA {gpu.numa_node}  "
            f"/dev/nvidia{gpu.device_minor}  MIG {'enabled' if gpu.mig_enabled else 'disabled'}"
        )
    for warning in getattr(backend, "warnings", []):
        print(f"warning: {warning}")
    if not node.gpus:
        raise RuntimeError("no GPU discovered")
    return f"{len(node.gpus)} GPU(s) via {backend.name}"


def show_mig(node: Node) -> str:
    count = 0
    for gpu in node.gpus:
        for mig in gpu.mig_instances:
            count += 1
            print(
                f"GPU {gpu.index} MIG {mig.device_index}: {mig.uuid}  {mig.profile}  GI {mig.gi} CI {mig.ci}  "
                f"slices {mig.placement_start}+{mig.placement_size}  {mig.memory_mib} MiB  "
                f"caps nvidia-cap{mig.gi_cap_minor}, nvidia-cap{mig.ci_cap_minor}"
            )
    if not any(gpu.mig_enabled for gpu in node.gpus):
        print("no GPU has MIG enabled (this check never changes MIG mode or instances)")
    return f"{count} MIG device(s)"


def show_topology(backend: Backend, node: Node) -> str:
    if not isinstance(backend, NvmlBackend):
        return "skipped: pair topology needs the NVML backend"
    pairs = backend.topology()
    for (a, b), facts in sorted(pairs.items()):
        print(f"GPU {a} - GPU {b}: level {facts['level']}, NVLink {facts['nvlink']}, NVSwitch {facts['nvswitch']}")
    try:
        from gpuslice.topology import PairLink, PcieLevel, Topology
    except ImportError as exc:
        print(f"(gpuslice.topology not importable, no matrix: {exc})")
        return f"{len(pairs)} pair(s)"
    links = {p: PairLink(PcieLevel(f["level"]), f["nvlink"], f["nvswitch"]) for p, f in pairs.items()}
    model = Topology(tuple(g.index for g in node.gpus), links, tuple(g.uuid for g in node.gpus), source="nvml")
    print(model.matrix())
    return f"{len(pairs)} pair(s)"


def show_labels(node: Node) -> str:
    try:
        from gpuslice.config import Config
        from gpuslice.labels import compute_label_set
    except ImportError as exc:
        return f"skipped: gpuslice.labels offers no compute_label_set yet ({exc})"
    label_set = compute_label_set(node, Config(), None)
    for key, value in label_set.labels.items():
        print(f"{key}={value}")
    for warning in label_set.warnings:
        print(f"warning: {warning}")
    return f"{len(label_set.labels)} label(s)"


def watch_xids(backend: Backend, seconds: float) -> str:
    if not isinstance(backend, NvmlBackend):
        return "skipped: Xid events need the NVML backend"
    stop = threading.Event()
    seen: list[XidEvent] = []

    def consume() -> None:
        for event in backend.watch(stop, wait_ms=1000):
            print(f"event: {event.describe()}", flush=True)
            seen.append(event)

    thread = threading.Thread(target=consume, name="xid-watch")
    thread.start()
    time.sleep(seconds)
    stop.set()
    thread.join(timeout=10)
    if thread.is_alive():
        raise RuntimeError("the Xid watcher did not stop within 10 s of being asked")
    failures = [e for e in seen if e.xid == 0]
    if failures:
        raise RuntimeError(f"health event registration failed: {failures[0].describe()}")
    return f"registered for {seconds:g} s, {len(seen)} critical Xid(s) seen"


def allocate_one(node: Node, plugin_argv: list[str], timeout: float) -> str:
    """Serve `node` with the plugin, admit one pod asking for one GPU, and look for a UUID of `node` in the answer."""
    try:
        from gpuslice.kubelet import MockKubelet
    except ImportError as exc:
        return f"skipped: the mock kubelet is not available yet ({exc})"
    directory = tempfile.mkdtemp(dir="/tmp", prefix="gs-")  # unix socket paths must stay under 107 bytes
    kubelet = MockKubelet(directory).start()
    command = [*plugin_argv, "--kubelet-socket", str(Path(directory) / "kubelet.sock")]
    print("starting: " + " ".join(command), flush=True)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        resource = "nvidia.com/gpu"

        def ready(views: Any) -> bool:
            view = views.get(resource)
            return view is not None and view.registered and view.allocatable > 0

        if not kubelet.wait_for(ready, timeout=timeout):
            process.poll()
            raise RuntimeError(
                f"no healthy {resource} registered within {timeout:.0f} s (plugin exit code {process.returncode})"
            )
        view = kubelet.resource(resource)
        print(f"{resource} registered: {view.capacity if view else '?'} device(s)")
        allocation = kubelet.admit_one("device-check", resource, 1)
        print(f"allocated: {list(allocation.device_ids)}")
        print(f"Allocate answer:\n{allocation.response}")
        uuids = {g.uuid for g in node.gpus} | {m.uuid for g in node.gpus for m in g.mig_instances}
        named = sorted(u for u in uuids if u in str(allocation.response))
        if not named:
            raise RuntimeError("the Allocate answer names none of the discovered UUIDs")
        return f"Allocate answered with {', '.join(named)}"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
        kubelet.stop()
        shutil.rmtree(directory, ignore_errors=True)
        print("--- plugin log ---\n" + output.rstrip() + f"\n--- plugin exit code {process.returncode} ---")


def _canned_library(name: str) -> Any:
    from gpuslice.discovery.nvml.nodes import CANNED

    return CANNED[name]()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="auto", choices=["auto", "nvml", "hostpath"])
    parser.add_argument("--driver-root", default=os.environ.get("NVIDIA_DRIVER_ROOT", "/"))
    parser.add_argument("--watch-seconds", type=float, default=6.0, help="how long to listen for Xid events")
    parser.add_argument("--plugin-timeout", type=float, default=60.0)
    parser.add_argument("--skip-plugin", action="store_true")
    parser.add_argument("--canned", help="rehearse without a GPU: a fake-NVML node (dgx-h100, dgx1-v100, a100-mig)")
    args = parser.parse_args(argv)
    RESULTS.clear()
    configure_logging(level=logging.WARNING)
    logging.getLogger("gpuslice.discovery").setLevel(logging.ERROR)  # show_node prints the backend's warnings

    library = _canned_library(args.canned) if args.canned else None
    try:
        backend = make_backend(args.backend, None, args.driver_root, True, nvml_library=library)
    except BackendInitError as exc:
        print(f"device-check: no GPU backend could start: {exc}")
        return 1
    node = backend.discover()
    step("discovery", lambda: show_node(node, backend))
    step("MIG", lambda: show_mig(node))
    step("topology", lambda: show_topology(backend, node))
    step("labels", lambda: show_labels(node))
    step("Xid health events", lambda: watch_xids(backend, args.watch_seconds))
    if args.skip_plugin:
        RESULTS.append(("plugin + mock kubelet", "SKIP", "skipped: --skip-plugin"))
    else:
        # Rehearsals have no real NVML for the plugin process, so they serve the fake node spec instead.
        plugin = ["--backend", "fake", "--node-spec", REHEARSAL_SPEC] if args.canned else ["--backend", "nvml"]
        served = FakeBackend.from_ref(REHEARSAL_SPEC).discover() if args.canned else node
        argv_plugin = [sys.executable, "-m", "gpuslice", "plugin", *plugin]
        step("plugin + mock kubelet", lambda: allocate_one(served, argv_plugin, args.plugin_timeout))
    print("\n== summary ==")
    for name, verdict, detail in RESULTS:
        print(f"{verdict:4}  {name}: {detail}")
    return 1 if any(verdict == "FAIL" for _, verdict, _ in RESULTS) else 0


if __name__ == "__main__":
    sys.exit(main())
