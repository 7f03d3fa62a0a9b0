"""Containers started by a real runtime (podman, runc) from the specs the device plugin and DRA write.

`make runtime-check` installs the runtime and runs these; `make test` leaves them out (marker `runtime`).
The node is a fake host root read by the hostpath backend (tests.discovery.host_root) with the fake driver
files laid over it (discovery.driver_files_fake: `var/run -> /run` is an absolute link), and harmless device
nodes: each one the host root has is made a character device with /dev/null's numbers. It has no
nvidia-uvm-tools and no nvidia-modeset, so a spec that names them fails to start."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from gpuslice.allocation.cdi_resolve import ResolvedEdits, load_specs, resolve
from gpuslice.discovery.driver_files_fake import build_fake_driver_root
from gpuslice.kubelet import MockKubelet
from gpuslice.kubelet.dra_mock import MockDraKubelet
from tests.discovery.host_root import DEFAULT_GPUS, build_host_root
from tests.dra.support import DRIVER, NODE, claim, device_classes
from tests.runtime.podman import CDI_DIR, Podman, RuntimeUnavailable
from tests.support import process as support
from tests.support.dirs import short_temp_dir

pytestmark = pytest.mark.runtime

WAIT_S = 20.0
GPU = "nvidia.com/gpu"
HOST_DRIVER = "550.54.15"  # build_host_root's
ABSENT_NODES = ("/dev/nvidia-modeset", "/dev/nvidia-uvm-tools")  # the host root has neither
HOOK_SCRIPT = '#!/bin/sh\necho "$*" >> "{log}"\n'


@pytest.fixture(scope="module")
def podman() -> Iterator[Podman]:
    with short_temp_dir("gs-rt") as home:
        runtime = Podman(home)
        try:
            runtime.prepare()
        except RuntimeUnavailable as exc:
            pytest.skip(f"no container runtime on this machine: {exc}")
        yield runtime


def node_root(directory: Path) -> Path:
    """A host root with GPUs, the driver's files and harmless device nodes (the docstring above)."""
    root = build_host_root(directory)
    build_fake_driver_root(root, version=HOST_DRIVER)
    for path in sorted((root / "dev").rglob("*")):
        if path.is_file():
            path.unlink()
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return root


def hook_program(directory: Path) -> tuple[Path, Path]:
    """A stand-in for nvidia-cdi-hook that logs each call's arguments: (program, log)."""
    program, log = directory / "nvidia-cdi-hook", directory / "hooks.log"
    program.write_text(HOOK_SCRIPT.format(log=log))
    program.chmod(0o755)
    log.touch()
    return program, log


@contextmanager
def published(spec_dir: Path) -> Iterator[None]:
    """Our spec files copied where podman reads CDI specs, removed afterwards; another file is never replaced."""
    CDI_DIR.mkdir(parents=True, exist_ok=True)
    copied: list[Path] = []
    try:
        for source in sorted(spec_dir.glob("*.json")):
            target = CDI_DIR / source.name
            assert not target.exists(), f"{target} exists already: not ours to replace"
            shutil.copyfile(source, target)
            copied.append(target)
        yield
    finally:
        for target in copied:
            target.unlink(missing_ok=True)


def inspection_script(edits: ResolvedEdits) -> str:
    """A shell script printing one line per thing the container lacks or has too much of."""
    lines = [f'test -c {path} || echo "missing device {path}"' for path in edits.device_paths]
    lines += [f'test -e {path} || echo "missing mount {path}"' for path in edits.mount_paths]
    lines += [f'test -e {path} && echo "unexpected device {path}"' for path in ABSENT_NODES]
    lines.append('env | grep "^NVIDIA_VISIBLE_DEVICES=" || echo "no NVIDIA_VISIBLE_DEVICES"')
    return "\n".join(lines) + "\ntrue\n"


def hook_calls(log: Path) -> Counter[str]:
    """How often each hook ran, by its name: the first argument (the runtime passes args[1:] as $@)."""
    return Counter(line.split()[0] for line in log.read_text().splitlines() if line.split())


def assert_container_gets_exactly(podman: Podman, spec_dir: Path, names: Sequence[str], log: Path) -> None:
    edits = resolve(load_specs(spec_dir), names)
    log.write_text("")
    with published(spec_dir):
        result = podman.run_with_devices(names, inspection_script(edits))
    assert result.returncode == 0, f"the container did not start: {result.stderr.strip()}"
    problems = [line for line in result.stdout.splitlines() if not line.startswith("NVIDIA_VISIBLE_DEVICES=")]
    assert problems == [], result.stdout
    assert "NVIDIA_VISIBLE_DEVICES=void" in result.stdout.splitlines()
    assert edits.hook_names, "the specs carry hooks"
    assert hook_calls(log) == Counter(edits.hook_names), "each hook of the specs ran, and only once"
    assert all(count == 1 for count in hook_calls(log).values()), "no hook ran twice"


def test_a_device_plugin_container_gets_its_gpu_mounts_and_hooks(podman: Podman) -> None:
    with short_temp_dir("gs-rp") as work, MockKubelet(work, dial_timeout_s=2.0, checkpoint_enabled=False) as kubelet:
        root = node_root(work / "host")
        program, log = hook_program(work)
        cdi_dir = work / "cdi"
        process = support.plugin_process(
            ["--backend", "hostpath", "--kubelet-socket", str(kubelet.socket_path), "--cdi-spec-dir", str(cdi_dir),
             "--device-list-strategy", "cdi-cri", "--container-driver-root", str(root), "--driver-root", str(root),
             "--nvidia-cdi-hook-path", str(program)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            assert kubelet.wait_for(resource=GPU, allocatable=len(DEFAULT_GPUS), timeout=WAIT_S)
            allocation = kubelet.admit_one("pod", GPU)
            assert_container_gets_exactly(podman, cdi_dir, allocation.cdi_devices, log)
        finally:
            code, err = support.finish(process, signal.SIGTERM, timeout=WAIT_S)
        assert code == 0, err[-2000:]


def test_a_container_with_two_dra_claims_gets_both_gpus_and_each_hook_once(podman: Podman) -> None:
    with short_temp_dir("gs-rd") as work:
        root = node_root(work / "host")
        program, log = hook_program(work)
        cdi_dir = work / "cdi"
        kubelet = MockDraKubelet(work, NODE).start()
        for device_class in device_classes():
            kubelet.add_device_class(device_class)
        process = subprocess.Popen(
            [sys.executable, "-m", "gpuslice", "dra", "--backend", "hostpath", "--node-name", NODE,
             "--plugins-registry", str(kubelet.registry_dir), "--plugins-dir", str(kubelet.plugins_dir),
             "--cdi-spec-dir", str(cdi_dir), "--kube-api-server", kubelet.api_url, "--resync-interval", "0.2",
             "--container-driver-root", str(root), "--driver-root", str(root), "--nvidia-cdi-hook-path", str(program)],
            env=support.clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert kubelet.watcher.wait_registered(DRIVER, timeout=WAIT_S), kubelet.watcher.refused
            assert kubelet.wait_for_slices(DRIVER, min_devices=2)
            kubelet.create_claim(claim("first"))
            kubelet.create_claim(claim("second"))
            admission = kubelet.admit("pod", ["first", "second"])
            claim_ids = [name for name in admission.cdi_ids if "/claim=" in name]
            assert len(claim_ids) == 2, admission.cdi_ids
            assert_container_gets_exactly(podman, cdi_dir, admission.cdi_ids, log)
        finally:
            code, err = support.finish(process, signal.SIGTERM, timeout=WAIT_S)
            kubelet.stop()
        assert code == 0, err[-2000:]
