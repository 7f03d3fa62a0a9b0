"""Driver-file discovery on fake driver roots: versioned libraries, links, binaries, firmware, sockets, gaps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuslice.discovery import driver_files
from gpuslice.discovery.driver_files import (
    EXPECTED_BINARIES,
    discover_driver_files,
    discover_feature_files,
)
from gpuslice.discovery.driver_files_fake import FAKE_DRIVER_VERSION, build_fake_driver_root

V = FAKE_DRIVER_VERSION
LIB = "/usr/lib/x86_64-linux-gnu"


def test_a_570_root_gives_every_versioned_library_binary_and_firmware_once(tmp_path: Path) -> None:
    files = discover_driver_files(str(build_fake_driver_root(tmp_path)), V)
    assert files.version == V and files.missing == () and files.notes == ()
    for stem in ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler", "libnvidia-nvvm", "libcudadebugger"):
        assert f"{LIB}/{stem}.so.{V}" in files.libraries
    assert f"{LIB}/vdpau/libvdpau_nvidia.so.{V}" in files.libraries
    assert f"{LIB}/libc.so.6" not in files.libraries, "only the driver's versioned libraries"
    assert f"{LIB}/libcuda.so.1" not in files.files, "links are made by the hook, not mounted"
    assert files.binaries == tuple(f"/usr/bin/{b}" for b in EXPECTED_BINARIES)
    assert files.firmware == (f"/lib/firmware/nvidia/{V}/gsp_ga10x.bin", f"/lib/firmware/nvidia/{V}/gsp_tu10x.bin")
    assert files.ipc == ("/var/run/nvidia-persistenced/socket",)
    assert len(files.files) == len(set(files.files))
    assert files.library_dirs == (LIB, f"{LIB}/vdpau")
    assert files.libcuda_dir == LIB


def test_soname_and_development_links(tmp_path: Path) -> None:
    links = {
        link: target for target, link in discover_driver_files(str(build_fake_driver_root(tmp_path))).library_links
    }
    assert links[f"{LIB}/libcuda.so.1"] == f"libcuda.so.{V}"
    assert links[f"{LIB}/libcuda.so"] == "libcuda.so.1"
    assert links[f"{LIB}/libnvidia-nvvm.so.4"] == f"libnvidia-nvvm.so.{V}"
    assert f"{LIB}/libnvidia-gpucomp.so.1" not in links, "its soname is the versioned name"


def test_soname_links_missing_on_the_host_come_from_the_known_sonames(tmp_path: Path) -> None:
    root = build_fake_driver_root(tmp_path)
    os.unlink(root / LIB.lstrip("/") / "libnvidia-ml.so.1")
    links = {link: target for target, link in discover_driver_files(str(root), V).library_links}
    assert links[f"{LIB}/libnvidia-ml.so.1"] == f"libnvidia-ml.so.{V}"


# (id, what build_fake_driver_root leaves out, what the warning must name)
PARTIAL = [
    ("no-nvml", ("libnvidia-ml.so",), f"libnvidia-ml.so.{V}"),
    ("no-smi", ("nvidia-smi",), "nvidia-smi"),
    ("no-firmware", ("firmware",), f"GSP firmware (/lib/firmware/nvidia/{V}/gsp*.bin)"),
    ("no-libcuda", ("libcuda.so",), "libcuda.so.<version> (the driver version is unknown"),
]


@pytest.mark.parametrize(("skip", "named"), [p[1:] for p in PARTIAL], ids=[p[0] for p in PARTIAL])
def test_a_partial_root_lists_what_was_not_found(tmp_path: Path, skip: tuple[str, ...], named: str) -> None:
    files = discover_driver_files(str(build_fake_driver_root(tmp_path, skip=skip)), V)
    warning = files.warning()
    assert warning is not None and named in warning and str(tmp_path) in warning


def test_a_missing_root_is_one_clear_warning(tmp_path: Path) -> None:
    files = discover_driver_files(str(tmp_path / "absent"))
    assert files.files == () and "is not a directory" in (files.warning() or "")


@pytest.mark.parametrize(
    ("expected", "version", "note"),
    [
        (V, V, None),
        (None, V, f"several driver versions under the root (535.183.01, {V}); using {V}"),
        ("550.127.08", V, f"the driver files are version {V}, the driver reports 550.127.08"),
        ("535.183.01", "535.183.01", None),
    ],
)
def test_driver_version_from_libcuda(tmp_path: Path, expected: str | None, version: str, note: str | None) -> None:
    files = discover_driver_files(str(build_fake_driver_root(tmp_path, old_versions=("535.183.01",))), expected)
    assert files.version == version
    assert files.notes == ((note,) if note else ())


def test_links_never_leave_the_root(tmp_path: Path) -> None:
    root = build_fake_driver_root(tmp_path / "root", skip=("ipc",))
    outside = tmp_path / "outside/nvidia-fabricmanager"
    outside.mkdir(parents=True)
    (outside / "socket").write_text("")
    (root / "var").mkdir(exist_ok=True)
    os.symlink(str(tmp_path / "outside"), root / "var/run")  # absolute: means <root>/<that path>, not the host's
    assert discover_driver_files(str(root), V).ipc == ()


def test_feature_devices_and_files(tmp_path: Path) -> None:
    root = str(build_fake_driver_root(tmp_path, feature_devices=True))
    assert discover_feature_files("gdrcopy", root, root).device_nodes == ("/dev/gdrdrv",)
    gds = discover_feature_files("gds", root, root)
    assert gds.device_nodes == ("/dev/nvidia-fs0",) and gds.files == ("/etc/cufile.json",)
    assert discover_feature_files("mofed", root, root).device_nodes == (
        "/dev/infiniband/rdma_cm",
        "/dev/infiniband/uverbs0",
    )


def test_a_link_loop_is_not_followed_forever(tmp_path: Path) -> None:
    root = build_fake_driver_root(tmp_path)
    os.symlink("loop-b", root / "usr/bin/loop-a")
    os.symlink("loop-a", root / "usr/bin/loop-b")
    os.unlink(root / "usr/bin/nvidia-smi")
    os.symlink("loop-a", root / "usr/bin/nvidia-smi")  # a link that never ends is not a binary
    files = discover_driver_files(str(root), V)
    assert "nvidia-smi" in (files.warning() or "")
    assert files.version == V


def test_a_directory_is_read_up_to_the_entry_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = build_fake_driver_root(tmp_path)
    monkeypatch.setattr(driver_files, "MAX_DIRECTORY_ENTRIES", 3)
    files = discover_driver_files(str(root), V)
    assert len([p for p in files.libraries if p.startswith(LIB + "/lib")]) <= 3
