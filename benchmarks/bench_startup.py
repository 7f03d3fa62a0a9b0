"""Start-up: `gpuslice --help`, and the real `gpuslice plugin` process from its start to the kubelet's first
`Register` call (and to allocatable devices), against the mock kubelet on the fake node, over 20 starts (and 10
with a config file, which loads the file schema).

Set GPUSLICE_BENCH_BASELINE_SRC to the `src` folder of another revision (`git archive REV src | tar -x -C DIR`)
to start it too, interleaved start by start with ours, and print the ratios (wall time and CPU time).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Start:
    """One plugin start: ms from just before the fork to the first Register call and to allocatable devices,
    and the CPU ms the process had used when Register arrived (None where /proc cannot tell)."""

    register_ms: float
    ready_ms: float
    cpu_ms: float | None


def _env(src: str | None = None) -> dict[str, str]:
    """bytecode_env() without the plugin's settings; `src` puts another revision's code first on the path."""
    env = {key: value for key, value in bytecode_env().items() if key not in PLUGIN_ENV}
    return {**env, "PYTHONPATH": src} if src else env


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


def _cpu_ms(pid: int) -> float | None:
    """CPU time of every thread of `pid` so far (Linux schedstat: nanoseconds on a CPU), or None."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        total = sum(int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0]) for task in tasks)
    except (OSError, ValueError, IndexError):
        return None
    return total / 1e6


def _start(kubelet: MockKubelet, number: int, env: dict[str, str], *extra: str) -> Start:
    """Start the plugin, wait for Register and allocatable GPUs, stop it with SIGTERM and see it gone."""
    args = ["plugin", "--backend", "fake", "--node-spec", NODE_SPEC, "--kubelet-socket", str(kubelet.socket_path)]
    seen = _attempts(kubelet.resources())
    started = time.perf_counter()
    process = subprocess.Popen([*COMMAND, *args, *extra], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if not kubelet.wait_for(lambda views: _attempts(views) > seen, timeout=WAIT_S):
            raise RuntimeError(f"start {number}: no Register call within {WAIT_S} s")
        register_ms = (time.perf_counter() - started) * 1000
        cpu_ms = _cpu_ms(process.pid)
        if not kubelet.wait_for(resource=RESOURCE, registered=True, allocatable=4, timeout=WAIT_S):
            raise RuntimeError(f"start {number}: the GPUs never became allocatable")
        ready_ms = (time.perf_counter() - started) * 1000
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=WAIT_S)
        if process.returncode != 0:
            raise RuntimeError(f"start {number}: the plugin exited {process.returncode}: {err.decode()[-500:]}")
        if not kubelet.wait_for(resource=RESOURCE, registered=False, timeout=WAIT_S):
            raise RuntimeError(f"start {number}: the kubelet never saw the plugin go")
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return Start(register_ms, ready_ms, cpu_ms)


def main() -> list[Figure]:
    logging.getLogger("gpuslice.kubelet").setLevel(logging.ERROR)  # each stop logs an ended stream: expected here
    baseline_src = os.environ.get("GPUSLICE_BENCH_BASELINE_SRC") or None
    workdir = Path(tempfile.mkdtemp(prefix="gs", dir="/tmp"))  # short: Unix socket paths stay under 107 bytes
    ours: list[Start] = []
    theirs: list[Start] = []
    try:
        _wall_ms(["plugin", "--help"], 1)  # fills the bytecode cache
        help_ms = _wall_ms(["--help"], HELP_RUNS)
        plugin_help_ms = _wall_ms(["plugin", "--help"], HELP_RUNS // 2)
        config_file = workdir / "config.yaml"
        config_file.write_text(CONFIG_FILE_TEXT)
        with MockKubelet(workdir, checkpoint_enabled=False) as kubelet:
            if baseline_src:
                _start(kubelet, 0, _env(baseline_src))  # fills the baseline's bytecode cache
            for number in range(1, STARTS + 1):  # interleaved, so load drift hits both alike
                ours.append(_start(kubelet, number, _env()))
                if baseline_src:
                    theirs.append(_start(kubelet, number, _env(baseline_src)))
            with_file = [
                _start(kubelet, number, _env(), "--config-file", str(config_file))
                for number in range(1, CONFIG_FILE_STARTS + 1)
            ]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"command: {' '.join(COMMAND)}; bytecode cached in {PYCACHE}; {os.cpu_count()} CPUs, load average {load:.2f}")
    print(f"{'':46}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    to_register = [start.register_ms for start in ours]
    to_ready = [start.ready_ms for start in ours]
    file_to_register = [start.register_ms for start in with_file]
    cpu_at_register = _known(start.cpu_ms for start in ours)
    baseline_to_register = [start.register_ms for start in theirs]
    baseline_cpu = _known(start.cpu_ms for start in theirs)
    rows = [
        ("gpuslice --help", help_ms),
        ("gpuslice plugin --help", plugin_help_ms),
        (f"plugin start -> first Register ({STARTS} starts)", to_register),
        ("plugin start -> GPUs allocatable", to_ready),
        (f"... with a config file ({CONFIG_FILE_STARTS} starts)", file_to_register),
        ("plugin CPU time at first Register", cpu_at_register),
        ("baseline: plugin start -> first Register", baseline_to_register),
        ("baseline: CPU time at first Register", baseline_cpu),
    ]
    for name, samples in rows:
        if len(samples) >= 2:
            print(f"{name:46}{percentile(samples, 0.5):>9.0f}{percentile(samples, 0.99):>9.0f}{max(samples):>9.0f}")
    register_p50 = percentile(to_register, 0.5)
    figures = [
        Figure("gpuslice --help, p50", percentile(help_ms, 0.5), "ms", HELP_GOAL_MS),
        Figure("gpuslice plugin --help, p50", percentile(plugin_help_ms, 0.5), "ms", note="informational"),
        Figure("plugin start -> first Register, p50", register_p50, "ms", REGISTER_GOAL_MS),
        Figure("plugin start -> first Register, p99", percentile(to_register, 0.99), "ms", note="informational"),
        Figure("plugin start -> GPUs allocatable, p50", percentile(to_ready, 0.5), "ms", note="informational"),
        Figure(
            "config-file start -> first Register, p50", percentile(file_to_register, 0.5), "ms", note="informational"
        ),
    ]
    if theirs:
        their_p50 = percentile(baseline_to_register, 0.5)
        figures.append(
            Figure("start -> Register, baseline / ours", their_p50 / register_p50, "x", note="p50s, interleaved")
        )
        if len(cpu_at_register) >= 2 and len(baseline_cpu) >= 2:
            ratio = percentile(baseline_cpu, 0.5) / percentile(cpu_at_register, 0.5)
            figures.append(Figure("CPU at Register, baseline / ours", ratio, "x", note="p50s, interleaved"))
    return figures


def _known(values: Iterable[float | None]) -> list[float]:
    """The measured values, or none at all where /proc could not tell one of them."""
    listed = list(values)
    return [] if None in listed else [value for value in listed if value is not None]


if __name__ == "__main__":
    main()
