"""Start-up: `gpuslice --help`, and the real `gpuslice plugin` process from its start to the kubelet's first
`Register` call (and to allocatable devices), against the mock kubelet on the fake node, over 20 starts (and 10
with a config file, which loads the file schema)."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from benchmarks.figures import PYCACHE, Figure, bytecode_env, percentile
from gpuslice.kubelet import MockKubelet
from gpuslice.kubelet.views import ResourceView

STARTS = 20
CONFIG_FILE_STARTS = 10
HELP_RUNS = 20
WAIT_S = 20.0
RESOURCE = "nvidia.com/gpu"
NODE_SPEC = "preset:h100x4"
HELP_GOAL_MS = 150.0
REGISTER_GOAL_MS = 250.0
# what a container runs: the console script beside this interpreter (python -m gpuslice where it is missing)
GPUSLICE = Path(sys.executable).with_name("gpuslice")
COMMAND = [str(GPUSLICE)] if GPUSLICE.exists() else [sys.executable, "-m", "gpuslice"]
PLUGIN_ENV = ("NODE_SPEC", "CONFIG_FILE", "KUBELET_SOCKET", "BACKEND")
# A config file that changes nothing the fake node advertises: what validating a file adds to a start.
CONFIG_FILE_TEXT = "version: v1\nflags:\n  migStrategy: none\n  failOnInitError: true\n"


def _env() -> dict[str, str]:
    """bytecode_env() without the plugin's settings."""
    return {key: value for key, value in bytecode_env().items() if key not in PLUGIN_ENV}


def _wall_ms(args: list[str], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([*COMMAND, *args], check=True, capture_output=True, env=_env())
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _attempts(views: Mapping[str, ResourceView]) -> int:
    view = views.get(RESOURCE)
    return view.registration_attempts if view is not None else 0


def _plugin_starts(kubelet: MockKubelet, starts: int, *extra: str) -> tuple[list[float], list[float]]:
    """Per start: ms from just before the fork to the first Register call, and to allocatable devices."""
    to_register: list[float] = []
    to_ready: list[float] = []
    args = ["plugin", "--backend", "fake", "--node-spec", NODE_SPEC, "--kubelet-socket", str(kubelet.socket_path)]
    args += extra
    for start in range(starts):
        seen = _attempts(kubelet.resources())
        started = time.perf_counter()
        process = subprocess.Popen([*COMMAND, *args], env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            if not kubelet.wait_for(lambda views, seen=seen: _attempts(views) > seen, timeout=WAIT_S):
                raise RuntimeError(f"start {start + 1}: no Register call within {WAIT_S} s")
            to_register.append((time.perf_counter() - started) * 1000)
            if not kubelet.wait_for(resource=RESOURCE, registered=True, allocatable=4, timeout=WAIT_S):
                raise RuntimeError(f"start {start + 1}: the GPUs never became allocatable")
            to_ready.append((time.perf_counter() - started) * 1000)
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=WAIT_S)
            if process.returncode != 0:
                raise RuntimeError(f"start {start + 1}: the plugin exited {process.returncode}: {err.decode()[-500:]}")
            if not kubelet.wait_for(resource=RESOURCE, registered=False, timeout=WAIT_S):
                raise RuntimeError(f"start {start + 1}: the kubelet never saw the plugin go")
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    return to_register, to_ready


def main() -> list[Figure]:
    logging.getLogger("gpuslice.kubelet").setLevel(logging.ERROR)  # each stop logs an ended stream: expected here
    workdir = Path(tempfile.mkdtemp(prefix="gs", dir="/tmp"))  # short: Unix socket paths stay under 107 bytes
    try:
        _wall_ms(["plugin", "--help"], 1)  # fills the bytecode cache
        help_ms = _wall_ms(["--help"], HELP_RUNS)
        plugin_help_ms = _wall_ms(["plugin", "--help"], HELP_RUNS // 2)
        config_file = workdir / "config.yaml"
        config_file.write_text(CONFIG_FILE_TEXT)
        with MockKubelet(workdir, checkpoint_enabled=False) as kubelet:
            to_register, to_ready = _plugin_starts(kubelet, STARTS)
            with_file, _ = _plugin_starts(kubelet, CONFIG_FILE_STARTS, "--config-file", str(config_file))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"command: {' '.join(COMMAND)}; bytecode cached in {PYCACHE}; {os.cpu_count()} CPUs, load average {load:.2f}")
    print(f"{'':44}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    rows = (
        ("gpuslice --help", help_ms),
        ("gpuslice plugin --help", plugin_help_ms),
        (f"plugin start -> first Register ({STARTS} starts)", to_register),
        ("plugin start -> GPUs allocatable", to_ready),
        (f"... with a config file ({CONFIG_FILE_STARTS} starts)", with_file),
    )
    for name, samples in rows:
        print(f"{name:44}{percentile(samples, 0.5):>9.0f}{percentile(samples, 0.99):>9.0f}{max(samples):>9.0f}")
    return [
        Figure("gpuslice --help, p50", percentile(help_ms, 0.5), "ms", HELP_GOAL_MS),
        Figure("gpuslice plugin --help, p50", percentile(plugin_help_ms, 0.5), "ms", note="informational"),
        Figure("plugin start -> first Register, p50", percentile(to_register, 0.5), "ms", REGISTER_GOAL_MS),
        Figure("plugin start -> first Register, p99", percentile(to_register, 0.99), "ms", note="informational"),
        Figure("plugin start -> GPUs allocatable, p50", percentile(to_ready, 0.5), "ms", note="informational"),
        Figure("config-file start -> first Register, p50", percentile(with_file, 0.5), "ms", note="informational"),
    ]


if __name__ == "__main__":
    main()
