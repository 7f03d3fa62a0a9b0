"""CDI sources are real host paths: links in the driver root resolved inside it, and the host checked for each."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuslice.allocation.cdi import GPU_SPEC_FILE
from gpuslice.allocation.cdi_driver import MOUNT_OPTIONS, CdiDriverOptions
from gpuslice.allocation.cdi_specs import CdiSettings, build_specs
from gpuslice.allocation.cdi_validate import edits_host_problems, host_problems
from gpuslice.discovery import load_node_spec
from gpuslice.discovery.driver_files import discover_driver_files
from gpuslice.discovery.driver_files_fake import FAKE_DRIVER_VERSION, build_fake_driver_root
from gpuslice.gpu import Node
from tests.support.dirs import short_temp_dir

V = FAKE_DRIVER_VERSION
HOST_ROOT = "/run/nvidia/driver"  # a containerized driver's root on the host
SOCKET = "/var/run/nvidia-persistenced/socket"
REAL_SOCKET = "/run/nvidia-persistenced/socket"
HOOK = "/usr/bin/nvidia-ctk"
LINKS = pytest.mark.parametrize("run_link", ["/run", "../run"], ids=["absolute", "relative"])


@pytest.fixture
def workdir() -> Iterator[Path]:
    with short_temp_dir("gs-host-") as path:
        yield path


def _node() -> Node:
    return replace(load_node_spec("preset:h100x4").node, driver_version=V)


def _settings(root: Path, host_root: str = HOST_ROOT) -> CdiSettings:
    driver = CdiDriverOptions(driver_root=host_root, container_driver_root=str(root), hook_path=HOOK)
    return CdiSettings(dev_root=host_root, driver=driver)


def _mount(host_path: str, container_path: str = SOCKET) -> dict[str, Any]:
    return {"hostPath": host_path, "containerPath": container_path, "options": list(MOUNT_OPTIONS)}


@LINKS
def test_a_mount_source_through_a_link_is_where_the_file_really_is(workdir: Path, run_link: str) -> None:
    root = build_fake_driver_root(workdir / "root", run_link=run_link)
    files = discover_driver_files(str(root), V)
    assert SOCKET in files.ipc and files.source(SOCKET) == REAL_SOCKET
    spec_set = build_specs(_node(), _settings(root))
    assert spec_set.warnings == ()
    common = spec_set.specs[GPU_SPEC_FILE]["containerEdits"]
    sources = {mount["containerPath"]: mount["hostPath"] for mount in common["mounts"]}
    assert sources[SOCKET] == HOST_ROOT + REAL_SOCKET
    assert edits_host_problems(common, {HOST_ROOT: str(root)}, device_nodes=False) == []


def test_the_checker_sees_a_source_that_a_runtime_would_follow_out_of_the_root(workdir: Path) -> None:
    root = build_fake_driver_root(workdir / "root")  # var/run -> /run, absolute
    roots = {HOST_ROOT: str(root)}
    (problem,) = edits_host_problems({"mounts": [_mount(HOST_ROOT + SOCKET)]}, roots)
    assert problem == (
        f"containerEdits.mounts[0]: mount source {HOST_ROOT}{SOCKET}: the link {HOST_ROOT}/var/run -> /run leads to"
        f" {REAL_SOCKET} on the host, outside the roots looked at ({HOST_ROOT})"
    )
    # The same root as the host's `/` (the default driver root): /run is the host's own, and has the socket.
    assert edits_host_problems({"mounts": [_mount(SOCKET)]}, {"/": str(root)}) == []


def test_a_relative_link_stays_inside_the_root(workdir: Path) -> None:
    root = build_fake_driver_root(workdir / "root", run_link="../run")
    assert edits_host_problems({"mounts": [_mount(HOST_ROOT + SOCKET)]}, {HOST_ROOT: str(root)}) == []


# (id, edits, what the one problem says)
MISSING = [
    ("no-file", {"mounts": [_mount(HOST_ROOT + "/usr/lib/libnope.so.1", "/usr/lib/libnope.so.1")]}, "not found (no "),
    ("outside", {"mounts": [_mount("/opt/elsewhere/lib.so", "/lib.so")]}, "outside the roots looked at"),
    ("no-node", {"deviceNodes": [{"path": "/dev/nvidia9", "hostPath": HOST_ROOT + "/dev/nvidia9"}]}, "device node"),
    ("relative", {"mounts": [_mount("run/x", "/x")]}, "not an absolute host path"),
]


@pytest.mark.parametrize(("edits", "says"), [case[1:] for case in MISSING], ids=[case[0] for case in MISSING])
def test_every_missing_source_and_node_is_named(workdir: Path, edits: dict[str, Any], says: str) -> None:
    root = build_fake_driver_root(workdir / "root", feature_devices=True)
    (problem,) = edits_host_problems(edits, {HOST_ROOT: str(root)})
    assert says in problem


def _node_device(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "containerEdits": {"deviceNodes": [{"path": path, "hostPath": HOST_ROOT + path}]}}


def test_existing_device_nodes_pass_and_a_whole_spec_is_checked(workdir: Path) -> None:
    root = build_fake_driver_root(workdir / "root", feature_devices=True)
    spec = {
        "cdiVersion": "0.5.0",
        "kind": "example.com/x",
        "containerEdits": {"mounts": [_mount(HOST_ROOT + SOCKET)]},
        "devices": [_node_device("a", "/dev/gdrdrv"), _node_device("b", "/dev/nvidia7")],
    }
    problems = host_problems(spec, {HOST_ROOT: str(root)})
    assert [p.split(":")[0] for p in problems] == [
        "containerEdits.mounts[0]",
        "devices[1].containerEdits.deviceNodes[0]",
    ]


def test_a_link_loop_is_a_problem_not_a_hang(workdir: Path) -> None:
    (workdir / "root").mkdir()
    os.symlink("b", workdir / "root/a")
    os.symlink("a", workdir / "root/b")
    (problem,) = edits_host_problems({"mounts": [_mount("/a", "/a")]}, {"/": str(workdir / "root")})
    assert "too many levels of links" in problem


def test_a_missing_hook_program_is_named_when_the_host_root_is_visible(workdir: Path) -> None:
    bare = build_fake_driver_root(workdir / "bare")
    (warning,) = build_specs(_node(), _settings(bare, host_root="/")).warnings
    assert warning.startswith(f"hook program {HOOK}: not found (no {bare}{HOOK})") and "nvidia-ctk" in warning
    with_hook = build_fake_driver_root(workdir / "hooked", hook_program=HOOK)
    assert build_specs(_node(), _settings(with_hook, host_root="/")).warnings == ()
    # A driver root other than `/` does not show the host's /usr/bin: nothing to check, nothing said.
    assert build_specs(_node(), _settings(bare)).warnings == ()
