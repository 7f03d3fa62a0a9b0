"""Start-up: `gpuslice --help`, and the real `gpuslice plugin` process from its start to the kubelet's first
`Register` call (and to allocatable devices), against the mock kubelet on the fake node: without a config file,
with one of the usual size (what a DaemonSet mounts), and `gpuslice dra` to its registration with the mock
kubelet's plugin watcher, each interleaved start by start with the floor (benchmarks/bare_plugin.py: a bare
grpcio plugin that serves and registers, nothing else) and quoted against it.

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
from gpuslice.kubelet.dra_mock import MockDraKubelet
from gpuslice.kubelet.views import ResourceView

STARTS = 20
DRA_STARTS = 10
HELP_RUNS = 20
WAIT_S = 20.0
RESOURCE = "nvidia.com/gpu"
NODE_SPEC = "preset:h100x4"
HELP_GOAL_MS = 150.0
REGISTER_GOAL_MS = 250.0
CONFIG_FILE_GOAL_X = 1.5  # config-file start -> Register, p50 / the floor's p50 (issue 28)
DRA_GOAL_X = 2.0  # `gpuslice dra` exec -> registered, p50 / the floor's p50
# what a container runs: the console script beside this interpreter (python -m gpuslice where it is missing)
GPUSLICE = Path(sys.executable).with_name("gpuslice")
COMMAND = [str(GPUSLICE)] if GPUSLICE.exists() else [sys.executable, "-m", "gpuslice"]
FLOOR = [sys.executable, str(Path(__file__).with_name("bare_plugin.py"))]
PLUGIN_ENV = ("NODE_SPEC", "CONFIG_FILE", "KUBELET_SOCKET", "BACKEND", "NODE_NAME", "KUBECONFIG")
# A config file of the usual size (NVIDIA's examples: the flags a chart sets, one sharing block) that keeps the
# fake node's four GPUs as four nvidia.com/gpu devices: what reading and checking a file adds to a start.
CONFIG_FILE_TEXT = """\
version: v1
flags:
  migStrategy: none
  failOnInitError: true
  nvidiaDriverRoot: /
  plugin:
    passDeviceSpecs: false
    deviceListStrategy: [envvar]
    deviceIDStrategy: uuid
  gfd:
    oneshot: false
    noTimestamp: false
    sleepInterval: 60s
sharing:
  timeSlicing:
    renameByDefault: false
    failRequestsGreaterThanOne: false
    resources:
      - name: nvidia.com/gpu
        replicas: 2
"""
CONFIG_FILE_DEVICES = 8  # four GPUs, two replicas each
DRA_DRIVER = "gpu.gpuslice.io"
DRA_NODE = "bench-node"
DRA_RECONCILE_S = 0.002  # the real kubelet's plugin watcher is woken by inotify: poll the registry about as fast


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


def _start(
    kubelet: MockKubelet,
    number: int,
    env: dict[str, str],
    *extra: str,
    command: list[str] | None = None,
    devices: int = 4,
) -> Start:
    """Start the plugin (or `command`), wait for Register and allocatable GPUs, stop it with SIGTERM, see it gone."""
    if command is None:
        args = ["plugin", "--backend", "fake", "--node-spec", NODE_SPEC, "--kubelet-socket", str(kubelet.socket_path)]
        command = [*COMMAND, *args, *extra]
    seen = _attempts(kubelet.resources())
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if not kubelet.wait_for(lambda views: _attempts(views) > seen, timeout=WAIT_S):
            raise RuntimeError(f"start {number}: no Register call within {WAIT_S} s")
        register_ms = (time.perf_counter() - started) * 1000
        cpu_ms = _cpu_ms(process.pid)
        if not kubelet.wait_for(resource=RESOURCE, registered=True, allocatable=devices, timeout=WAIT_S):
            raise RuntimeError(f"start {number}: the GPUs never became allocatable")
        ready_ms = (time.perf_counter() - started) * 1000
        _stop(process, number)
        if not kubelet.wait_for(resource=RESOURCE, registered=False, timeout=WAIT_S):
            raise RuntimeError(f"start {number}: the kubelet never saw the plugin go")
    finally:
        _reap(process)
    return Start(register_ms, ready_ms, cpu_ms)


def _floor(kubelet: MockKubelet, number: int) -> Start:
    return _start(kubelet, number, _env(), command=[*FLOOR, str(kubelet.socket_path)])


def _dra_start(kubelet: MockDraKubelet, number: int, config_file: Path) -> float:
    """`gpuslice dra` with the config file: ms from just before the fork to its registration with the watcher."""
    args = ["dra", "--backend", "fake", "--node-spec", NODE_SPEC, "--node-name", DRA_NODE, "--driver-name", DRA_DRIVER]
    args += ["--config-file", str(config_file), "--kube-api-server", kubelet.api_url]
    args += ["--plugins-registry", str(kubelet.registry_dir), "--plugins-dir", str(kubelet.plugins_dir)]
    args += ["--cdi-spec-dir", str(kubelet.root / "cdi")]
    watcher = kubelet.watcher
    seen = watcher.registrations
    started = time.perf_counter()
    process = subprocess.Popen([*COMMAND, *args], env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if not watcher.wait_registered(DRA_DRIVER, timeout=WAIT_S, min_registrations=seen + 1):
            raise RuntimeError(f"DRA start {number}: not registered within {WAIT_S} s: {watcher.refused[-1:]}")
        registered_ms = (time.perf_counter() - started) * 1000
        _stop(process, number)
        with watcher.changed:
            if not watcher.changed.wait_for(lambda: DRA_DRIVER not in watcher.plugins, WAIT_S):
                raise RuntimeError(f"DRA start {number}: the watcher never saw the plugin go")
    finally:
        _reap(process)
    return registered_ms


def _stop(process: subprocess.Popen[bytes], number: int) -> None:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=WAIT_S)
    if process.returncode != 0:
        raise RuntimeError(f"start {number}: exited {process.returncode}: {err.decode()[-500:]}")


def _reap(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.communicate()


def main() -> list[Figure]:
    logging.getLogger("gpuslice.kubelet").setLevel(logging.ERROR)  # each stop logs an ended stream: expected here
    baseline_src = os.environ.get("GPUSLICE_BENCH_BASELINE_SRC") or None
    workdir = Path(tempfile.mkdtemp(prefix="gs", dir="/tmp"))  # short: Unix socket paths stay under 107 bytes
    ours: list[Start] = []
    theirs: list[Start] = []
    with_file: list[Start] = []
    floor: list[Start] = []
    dra_ms: list[float] = []
    try:
        _wall_ms(["plugin", "--help"], 1)  # fills the bytecode cache
        help_ms = _wall_ms(["--help"], HELP_RUNS)
        plugin_help_ms = _wall_ms(["plugin", "--help"], HELP_RUNS // 2)
        config_file = workdir / "config.yaml"
        config_file.write_text(CONFIG_FILE_TEXT)
        file_args = ("--config-file", str(config_file))
        dra_root = workdir / "dra"
        with (
            MockKubelet(workdir, checkpoint_enabled=False) as kubelet,
            MockDraKubelet(dra_root, DRA_NODE, reconcile_s=DRA_RECONCILE_S) as dra_kubelet,
        ):
            # one start of each fills the bytecode caches
            _floor(kubelet, 0)
            _start(kubelet, 0, _env(), *file_args, devices=CONFIG_FILE_DEVICES)
            _dra_start(dra_kubelet, 0, config_file)
            if baseline_src:
                _start(kubelet, 0, _env(baseline_src))
            for number in range(1, STARTS + 1):  # interleaved, so load drift hits every kind alike
                floor.append(_floor(kubelet, number))
                with_file.append(_start(kubelet, number, _env(), *file_args, devices=CONFIG_FILE_DEVICES))
                ours.append(_start(kubelet, number, _env()))
                if number <= DRA_STARTS:
                    dra_ms.append(_dra_start(dra_kubelet, number, config_file))
                if baseline_src:
                    theirs.append(_start(kubelet, number, _env(baseline_src)))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"command: {' '.join(COMMAND)}; bytecode cached in {PYCACHE}; {os.cpu_count()} CPUs, load average {load:.2f}")
    print(f"floor: {' '.join(FLOOR)} (grpcio and the generated messages only), interleaved start by start")
    print(f"{'':50}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    to_register = [start.register_ms for start in ours]
    to_ready = [start.ready_ms for start in ours]
    file_to_register = [start.register_ms for start in with_file]
    floor_to_register = [start.register_ms for start in floor]
    cpu_at_register = _known(start.cpu_ms for start in ours)
    file_cpu = _known(start.cpu_ms for start in with_file)
    floor_cpu = _known(start.cpu_ms for start in floor)
    baseline_to_register = [start.register_ms for start in theirs]
    baseline_cpu = _known(start.cpu_ms for start in theirs)
    rows = [
        ("gpuslice --help", help_ms),
        ("gpuslice plugin --help", plugin_help_ms),
        (f"floor: bare grpcio plugin -> Register ({STARTS})", floor_to_register),
        ("floor: CPU time at Register", floor_cpu),
        (f"plugin + config file -> first Register ({STARTS})", file_to_register),
        ("plugin + config file: CPU time at Register", file_cpu),
        (f"plugin, no config file -> first Register ({STARTS})", to_register),
        ("plugin, no config file -> GPUs allocatable", to_ready),
        ("plugin, no config file: CPU time at Register", cpu_at_register),
        (f"gpuslice dra + config file -> registered ({DRA_STARTS})", dra_ms),
        ("baseline: plugin start -> first Register", baseline_to_register),
        ("baseline: CPU time at first Register", baseline_cpu),
    ]
    for name, samples in rows:
        if len(samples) >= 2:
            print(f"{name:50}{percentile(samples, 0.5):>9.0f}{percentile(samples, 0.99):>9.0f}{max(samples):>9.0f}")
    register_p50 = percentile(to_register, 0.5)
    floor_p50 = percentile(floor_to_register, 0.5)
    floor_note = f"floor p50 {floor_p50:.0f} ms, same run"
    figures = [
        Figure("gpuslice --help, p50", percentile(help_ms, 0.5), "ms", HELP_GOAL_MS),
        Figure("gpuslice plugin --help, p50", percentile(plugin_help_ms, 0.5), "ms", note="informational"),
        Figure("plugin start -> first Register, p50", register_p50, "ms", REGISTER_GOAL_MS),
        Figure("plugin start -> first Register, p99", percentile(to_register, 0.99), "ms", note="informational"),
        Figure("plugin start -> GPUs allocatable, p50", percentile(to_ready, 0.5), "ms", note="informational"),
        Figure(
            "config-file start -> first Register, p50", percentile(file_to_register, 0.5), "ms", note="informational"
        ),
        Figure(
            "config-file start -> Register / floor",
            percentile(file_to_register, 0.5) / floor_p50,
            "x",
            CONFIG_FILE_GOAL_X,
            note=floor_note,
        ),
        Figure("dra exec -> registered, p50", percentile(dra_ms, 0.5), "ms", note="informational"),
        Figure("dra exec -> registered / floor", percentile(dra_ms, 0.5) / floor_p50, "x", DRA_GOAL_X, note=floor_note),
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
