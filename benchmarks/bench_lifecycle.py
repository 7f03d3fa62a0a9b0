"""Lifecycle latency: re-registration after a kubelet restart, and health-event propagation to the kubelet."""

from __future__ import annotations

import dataclasses
import logging
import random
import shutil
import tempfile
import time
from pathlib import Path

from gpuslice.config import parse_config_text
from gpuslice.discovery import FakeBackend, load_node_spec
from gpuslice.health import xid_policy_from_env
from gpuslice.kubelet import MockKubelet
from gpuslice.plugin.health_loop import build_health_loop
from gpuslice.plugin.lifecycle import PluginRuntime
from gpuslice.plugin.run import assemble_manager
from gpuslice.sharing import build_resources

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
    config = parse_config_text(CONFIG).config
    plan = build_resources(spec.node, config)
    kubelet = MockKubelet(workdir / "dp", checkpoint_enabled=False).start()
    manager = assemble_manager(plan, spec.node, config, kubelet.socket_path, spec.topology)
    loop = build_health_loop(FakeBackend(spec), spec.node, manager.health, xid_policy_from_env({}), True)
    runtime = PluginRuntime(manager, health_loop=loop)
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
