"""Lifecycle latency: re-registration after a kubelet restart, and health-event propagation to the kubelet."""

from __future__ import annotations

import dataclasses
import logging
import random
import shutil
import tempfile
import time
from pathlib import Path

from gpuslice.discovery import FakeBackend, load_node_spec
from gpuslice.kubelet import MockKubelet
from gpuslice.plugin.app import AppOptions, PluginApp

TRIALS = 50
WAIT_S = 10.0
RESOURCE = "nvidia.com/gpu"
CONFIG = """
version: v1
sharing:
  timeSlicing:
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _row(name: str, samples: list[float]) -> str:
    return (
        f"{name:<44} n={len(samples):<3} p50 {_percentile(samples, 0.5):7.1f} ms   "
        f"p99 {_percentile(samples, 0.99):7.1f} ms   max {max(samples):7.1f} ms"
    )


def main() -> None:
    logging.getLogger("gpuslice").setLevel(logging.ERROR)  # one Xid log line per trial would drown the figures
    rng = random.Random(4)
    workdir = Path(tempfile.mkdtemp(dir="/tmp", prefix="gs-bench-"))
    events = workdir / "events"
    spec = dataclasses.replace(load_node_spec("preset:h100x4"), health_events=events)
    config_file = workdir / "config.yaml"
    config_file.write_text(CONFIG + "gpuslice:\n  healthRecovery: true\n")
    kubelet = MockKubelet(workdir / "dp", checkpoint_enabled=False).start()
    options = AppOptions(
        backend="fake",
        config_file=str(config_file),
        kubelet_socket=str(kubelet.socket_path),
        pod_resources_socket=str(kubelet.pod_resources_socket),
        nvidia_answers=False,
    )
    runtime = PluginApp(options, backend=FakeBackend(spec))
    try:
        runtime.start()
        assert kubelet.wait_for(resource=RESOURCE, allocatable=16, timeout=WAIT_S)
        reregister: list[float] = []
        for trial in range(TRIALS):
            kubelet.restart()
            started = time.perf_counter()
            ok = kubelet.wait_for(resource=RESOURCE, min_registrations=trial + 2, allocatable=16, timeout=WAIT_S)
            assert ok, f"no re-registration after restart {trial + 1}"
            reregister.append((time.perf_counter() - started) * 1000)
        gpu = spec.node.gpus[0].uuid
        unhealthy: list[float] = []
        healthy: list[float] = []
        for _ in range(TRIALS):
            for line, allocatable, samples in ((f"{gpu} 79", 12, unhealthy), (f"{gpu} ok", 16, healthy)):
                time.sleep(rng.uniform(0, 0.025))  # write at a random phase of the follower's 20 ms poll
                started = time.perf_counter()
                with events.open("a") as handle:
                    handle.write(line + "\n")
                assert kubelet.wait_for(resource=RESOURCE, allocatable=allocatable, timeout=WAIT_S)
                samples.append((time.perf_counter() - started) * 1000)
        print("h100x4, time-slicing x4 (16 devices), mock kubelet, events file polled every 20 ms")
        print(_row("re-registration after kubelet restart", reregister))
        print(_row("Xid line -> kubelet sees 4 replicas Unhealthy", unhealthy))
        print(_row("recovery line -> kubelet sees them Healthy", healthy))
    finally:
        runtime.stop()
        kubelet.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
