"""A fake driver root on disk: the layout a driver install leaves (versioned libraries, links, binaries, firmware)."""

from __future__ import annotations

import os
from pathlib import Path

FAKE_DRIVER_VERSION = "570.124.06"
FAKE_LIBRARY_DIR = "usr/lib/x86_64-linux-gnu"
# (library stem, soname): what a 570 driver installs for compute and utility, plus OpenCL and video.
FAKE_LIBRARIES = (
    ("libcuda.so", "libcuda.so.1"),
    ("libnvidia-ml.so", "libnvidia-ml.so.1"),
    ("libnvidia-ptxjitcompiler.so", "libnvidia-ptxjitcompiler.so.1"),
    ("libnvidia-nvvm.so", "libnvidia-nvvm.so.4"),
    ("libcudadebugger.so", "libcudadebugger.so.1"),
    ("libnvidia-gpucomp.so", None),  # its soname is the versioned name itself
    ("libnvidia-cfg.so", "libnvidia-cfg.so.1"),
    ("libnvidia-allocator.so", "libnvidia-allocator.so.1"),
    ("libnvidia-opencl.so", "libnvidia-opencl.so.1"),
    ("libnvidia-opticalflow.so", "libnvidia-opticalflow.so.1"),
)
FAKE_BINARIES = (
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
)
FAKE_FIRMWARE = ("gsp_ga10x.bin", "gsp_tu10x.bin")


def build_fake_driver_root(
    root: str | Path,
    version: str = FAKE_DRIVER_VERSION,
    *,
    skip: tuple[str, ...] = (),
    old_versions: tuple[str, ...] = (),
    feature_devices: bool = False,
    run_link: str = "/run",
    hook_program: str | None = None,
) -> Path:
    """Lay out a driver install under `root` and return it. `skip` leaves out files by name (a partial root);
    `old_versions` adds a stale libcuda of another driver; `feature_devices` adds the gdrcopy, GDS and MOFED
    device nodes (as plain files: the fake never opens them); `run_link` is where `var/run` points (absolute,
    as on most hosts, or relative: `../run`); `hook_program` (e.g. `/usr/bin/nvidia-ctk`) adds that program,
    for a root that stands for the host's `/`."""
    base = Path(root)
    libdir = base / FAKE_LIBRARY_DIR
    libdir.mkdir(parents=True, exist_ok=True)
    for stem, soname in FAKE_LIBRARIES:
        name = f"{stem}.{version}"
        if name in skip or stem in skip:
            continue
        (libdir / name).write_bytes(b"\x7fELF fake " + name.encode() + b"\n")
        if soname is not None:
            _link(libdir / soname, name)
    _link(libdir / "libcuda.so", "libcuda.so.1")
    (libdir / "vdpau").mkdir(exist_ok=True)
    (libdir / "vdpau" / f"libvdpau_nvidia.so.{version}").write_bytes(b"\x7fELF fake vdpau\n")
    (libdir / "libc.so.6").write_bytes(b"\x7fELF not the driver's\n")  # a system library the spec must not take
    for old in old_versions:
        (libdir / f"libcuda.so.{old}").write_bytes(b"\x7fELF stale\n")
    bindir = base / "usr/bin"
    bindir.mkdir(parents=True, exist_ok=True)
    for binary in FAKE_BINARIES:
        if binary not in skip:
            (bindir / binary).write_text(f"fake {binary}\n")
            (bindir / binary).chmod(0o755)
    if "firmware" not in skip:
        firmware = base / "lib/firmware/nvidia" / version
        firmware.mkdir(parents=True, exist_ok=True)
        for blob in FAKE_FIRMWARE:
            (firmware / blob).write_bytes(b"fake firmware\n")
    if "ipc" not in skip:
        # /var/run is a link to /run on most hosts: the lookup must follow it inside the root, not out of it.
        (base / "run/nvidia-persistenced").mkdir(parents=True, exist_ok=True)
        (base / "run/nvidia-persistenced/socket").write_text("")
        (base / "var").mkdir(exist_ok=True)
        _link(base / "var/run", run_link)
    if feature_devices:
        (base / "dev/infiniband").mkdir(parents=True, exist_ok=True)
        for node in ("dev/gdrdrv", "dev/nvidia-fs0", "dev/infiniband/uverbs0", "dev/infiniband/rdma_cm"):
            (base / node).write_text("")
        (base / "etc").mkdir(exist_ok=True)
        (base / "etc/cufile.json").write_text("{}\n")
    if hook_program is not None:
        program = base / hook_program.lstrip("/")
        program.parent.mkdir(parents=True, exist_ok=True)
        program.write_text("#!/bin/sh\nexit 0\n")
        program.chmod(0o755)
    return base


def _link(path: Path, target: str) -> None:
    if path.is_symlink() or path.exists():
        path.unlink()
    os.symlink(target, path)
