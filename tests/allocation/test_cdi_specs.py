"""Complete CDI specs from a fake driver root: each file once, NVIDIA's hooks, one file per kind, names resolve."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuslice.allocation import AllocateOptions, allocate_container, nvidia_answer
from gpuslice.allocation.cdi import GPU_SPEC_FILE, IMEX_SPEC_FILE, CdiError
from gpuslice.allocation.cdi_driver import CdiDriverOptions
from gpuslice.allocation.cdi_resolve import load_specs, resolve
from gpuslice.allocation.cdi_specs import CdiSettings, CdiSpecUpkeep, SpecSet, build_specs, feature_spec_file
from gpuslice.allocation.cdi_validate import minimum_version, spec_problems
from gpuslice.config import apply_overrides, parse_config_text
from gpuslice.discovery import load_node_spec
from gpuslice.discovery.driver_files_fake import FAKE_DRIVER_VERSION, build_fake_driver_root
from gpuslice.gpu import Node
from gpuslice.sharing import build_resources
from tests.support.dirs import short_temp_dir

V = FAKE_DRIVER_VERSION
LIB = "/usr/lib/x86_64-linux-gnu"
HOST_ROOT = "/run/nvidia/driver"  # where the driver lives on the host; the fake root stands for its mount here


@pytest.fixture
def workdir() -> Iterator[Path]:
    with short_temp_dir("gs-cdi-") as path:
        yield path


def h100(preset: str = "h100x4") -> Node:
    return replace(load_node_spec(f"preset:{preset}").node, driver_version=V)


def settings(root: Path, **changes: Any) -> CdiSettings:
    driver = CdiDriverOptions(driver_root=HOST_ROOT, container_driver_root=str(root))
    return replace(CdiSettings(dev_root=HOST_ROOT, driver=driver), **changes)


def gpu_spec_of(workdir: Path, **changes: Any) -> dict[str, Any]:
    root = build_fake_driver_root(workdir / "root", feature_devices=True)
    spec_set = build_specs(h100(), settings(root, **changes))
    assert spec_set.warnings == ()
    return dict(spec_set.specs[GPU_SPEC_FILE])


def test_the_spec_lists_each_driver_file_once_with_host_and_container_paths(workdir: Path) -> None:
    spec = gpu_spec_of(workdir)
    mounts = spec["containerEdits"]["mounts"]
    paths = [m["containerPath"] for m in mounts]
    assert len(paths) == len(set(paths))
    for expected in (
        f"{LIB}/libcuda.so.{V}",
        f"{LIB}/libnvidia-ml.so.{V}",
        f"{LIB}/libnvidia-ptxjitcompiler.so.{V}",
        f"{LIB}/libnvidia-nvvm.so.{V}",
        f"{LIB}/libcudadebugger.so.{V}",
        f"{LIB}/libnvidia-gpucomp.so.{V}",
        f"{LIB}/libnvidia-cfg.so.{V}",
        f"{LIB}/libnvidia-allocator.so.{V}",
        "/usr/bin/nvidia-smi",
        "/usr/bin/nvidia-cuda-mps-server",
        f"/lib/firmware/nvidia/{V}/gsp_ga10x.bin",
        "/var/run/nvidia-persistenced/socket",
    ):
        assert expected in paths
    socket = "/var/run/nvidia-persistenced/socket"
    for mount in mounts:
        # var/run -> /run in the root: the source is where the socket really is, the target where it is looked for
        real = "/run/nvidia-persistenced/socket" if mount["containerPath"] == socket else mount["containerPath"]
        assert mount["hostPath"] == HOST_ROOT + real
        assert mount["options"] == ["ro", "nosuid", "nodev", "rbind", "rprivate"]
    assert spec["cdiVersion"] == minimum_version(spec) == "0.5.0"  # host paths on device nodes
    assert spec_problems(spec) == []


def hooks_of(spec: dict[str, Any]) -> dict[str, list[str]]:
    """Hook subcommand -> its arguments, for nvidia-cdi-hook and for `nvidia-ctk hook` alike."""
    found = {}
    for hook in spec["containerEdits"].get("hooks", []):
        args = hook["args"][2:] if hook["args"][1] == "hook" else hook["args"][1:]
        found[args[0]] = args[1:]
    return found


def test_nvidias_hooks_create_the_links_and_refresh_the_linker_cache(workdir: Path) -> None:
    spec = gpu_spec_of(workdir, driver=CdiDriverOptions(HOST_ROOT, str(workdir / "root"), "/usr/bin/nvidia-cdi-hook"))
    hooks = hooks_of(spec)
    assert list(hooks) == [
        "create-symlinks",
        "enable-cuda-compat",
        "update-ldcache",
        "disable-device-node-modification",
    ]
    links = hooks["create-symlinks"]
    assert f"libcuda.so.{V}::{LIB}/libcuda.so.1" in links and f"libcuda.so.1::{LIB}/libcuda.so" in links
    assert f"libnvidia-ml.so.{V}::{LIB}/libnvidia-ml.so.1" in links
    assert hooks["enable-cuda-compat"] == [f"--host-driver-version={V}"]
    assert hooks["update-ldcache"] == ["--folder", LIB, "--folder", f"{LIB}/vdpau"]
    for hook in spec["containerEdits"]["hooks"]:
        assert hook["hookName"] == "createContainer" and hook["path"] == "/usr/bin/nvidia-cdi-hook"
    assert f"NVIDIA_CTK_LIBCUDA_DIR={LIB}" in spec["containerEdits"]["env"]


@pytest.mark.parametrize(
    ("disabled", "left"),
    [
        (frozenset({"all"}), []),
        (frozenset({"update-ldcache"}), ["create-symlinks", "enable-cuda-compat", "disable-device-node-modification"]),
        (frozenset({"create-symlinks", "enable-cuda-compat"}), ["update-ldcache", "disable-device-node-modification"]),
    ],
)
def test_hooks_can_be_disabled(workdir: Path, disabled: frozenset[str], left: list[str]) -> None:
    driver = CdiDriverOptions(HOST_ROOT, str(workdir / "root"), disabled_hooks=disabled)
    spec = gpu_spec_of(workdir, driver=driver)
    assert list(hooks_of(spec)) == left
    assert spec["containerEdits"]["mounts"], "the files are mounted with or without hooks"


def test_nvidia_ctk_carries_the_hooks_under_its_hook_command(workdir: Path) -> None:
    spec = gpu_spec_of(workdir)  # the default hook path is /usr/bin/nvidia-ctk
    assert spec["containerEdits"]["hooks"][0]["args"][:3] == ["nvidia-ctk", "hook", "create-symlinks"]


def test_unknown_hooks_and_feature_flags_warn(workdir: Path) -> None:
    root = build_fake_driver_root(workdir / "root")
    driver = CdiDriverOptions(HOST_ROOT, str(root), disabled_hooks=frozenset({"nope"}), feature_flags=frozenset({"x"}))
    warnings = build_specs(h100(), settings(root, driver=driver)).warnings
    assert warnings == (
        "--cdi-disable-hooks: unknown hook 'nope' ignored",
        "--cdi-feature-flags: unknown feature flag 'x' ignored",
    )


def test_the_ipc_discoverer_can_be_disabled(workdir: Path) -> None:
    root = build_fake_driver_root(workdir / "root")
    driver = CdiDriverOptions(HOST_ROOT, str(root), feature_flags=frozenset({"disable-ipc-discoverer"}))
    spec = build_specs(h100(), settings(root, driver=driver)).specs[GPU_SPEC_FILE]
    assert not [m for m in spec["containerEdits"]["mounts"] if "socket" in m["containerPath"]]


def test_a_missing_driver_root_warns_once_and_still_writes_a_valid_device_spec(workdir: Path) -> None:
    spec_set = build_specs(h100(), settings(workdir / "absent"))
    (warning,) = spec_set.warnings
    assert f"driver root {workdir / 'absent'}: not found: the driver root itself" in warning
    spec = spec_set.specs[GPU_SPEC_FILE]
    assert "mounts" not in spec["containerEdits"] and "hooks" not in spec["containerEdits"]
    assert spec_problems(spec) == []


def test_a_partial_root_lists_everything_missing_in_one_warning(workdir: Path) -> None:
    root = build_fake_driver_root(workdir / "root", skip=("nvidia-smi", "libnvidia-ml.so", "firmware"))
    (warning,) = build_specs(h100(), settings(root)).warnings
    assert f"libnvidia-ml.so.{V}, nvidia-smi, GSP firmware" in warning


def test_one_file_per_kind_for_imex_and_the_gpudirect_features(workdir: Path) -> None:
    root = build_fake_driver_root(workdir / "root", feature_devices=True)
    features = frozenset({"gdrcopy", "gds", "mofed"})
    spec_set = build_specs(h100(), settings(root, imex_channels=(0,), features=features, dev_root=HOST_ROOT))
    assert sorted(spec_set.specs) == sorted(
        [GPU_SPEC_FILE, IMEX_SPEC_FILE, *(feature_spec_file(f) for f in ("gdrcopy", "gds", "mofed"))]
    )
    kinds = {spec["kind"] for spec in spec_set.specs.values()}
    assert len(kinds) == 5
    gds = spec_set.specs[feature_spec_file("gds")]["devices"][0]["containerEdits"]
    assert gds["deviceNodes"] == [{"path": "/dev/nvidia-fs0", "hostPath": f"{HOST_ROOT}/dev/nvidia-fs0"}]
    assert gds["mounts"][0]["containerPath"] == "/etc/cufile.json"
    for spec in spec_set.specs.values():
        assert spec_problems(spec) == [] and spec["cdiVersion"] == minimum_version(spec)
        # every spec, not only the GPUs': a container given only a channel or a feature must not get every GPU
        assert spec["containerEdits"]["env"][0] == "NVIDIA_VISIBLE_DEVICES=void", spec["kind"]


def test_a_feature_without_its_device_warns_and_its_name_still_resolves(workdir: Path) -> None:
    root = build_fake_driver_root(workdir / "root")
    spec_set = build_specs(h100(), settings(root, features=frozenset({"gdrcopy"})))
    assert any("gdrcopyEnabled: no gdrcopy device node" in w for w in spec_set.warnings)
    CdiSpecUpkeep(workdir / "cdi").write(spec_set)
    edits = resolve(load_specs(workdir / "cdi"), ["k8s.device-plugin.nvidia.com/gdrcopy=all"])
    assert "NVIDIA_GDRCOPY=enabled" in edits.env


# (id, config, preset): every name a cdi-cri answer carries must resolve in the specs written for the node.
ANSWERS = [
    ("whole-gpus-by-uuid", "flags: {plugin: {deviceListStrategy: cdi-cri}}", "h100x4"),
    ("by-index", "flags: {plugin: {deviceListStrategy: cdi-cri, deviceIDStrategy: index}}", "h100x4"),
    ("mig-mixed", "flags: {migStrategy: mixed, plugin: {deviceListStrategy: cdi-cri}}", "h100x4-mig"),
    (
        "features-and-imex",
        "flags: {gdrcopyEnabled: true, gdsEnabled: true, mofedEnabled: true,"
        " plugin: {deviceListStrategy: [cdi-cri, cdi-annotations]}}\nimex: {channelIDs: [0]}",
        "h100x4",
    ),
    (
        "time-sliced",
        "flags: {plugin: {deviceListStrategy: cdi-cri}}\n"
        + "sharing: {timeSlicing: {resources: [{name: gpu, replicas: 2}]}}",
        "h100x4",
    ),
]


@pytest.mark.parametrize(("config", "preset"), [a[1:] for a in ANSWERS], ids=[a[0] for a in ANSWERS])
def test_every_name_in_an_allocate_answer_resolves(workdir: Path, config: str, preset: str) -> None:
    root = build_fake_driver_root(workdir / "root", feature_devices=True)
    node = h100(preset)
    roots = {"flags.nvidiaDriverRoot": HOST_ROOT, "flags.plugin.containerDriverRoot": str(root)}
    parsed = apply_overrides(parse_config_text(config).config, roots)
    options = AllocateOptions.from_config(parsed, imex_channels=parsed.imex.channel_ids, pipeline=(nvidia_answer,))
    CdiSpecUpkeep(workdir / "cdi").write(build_specs(node, CdiSettings.from_config(parsed, parsed.imex.channel_ids)))
    specs = load_specs(workdir / "cdi")
    for resource in build_resources(node, parsed).resources:
        for device in resource.devices[:3]:
            answer = allocate_container(resource, [device.id], options=options)
            names = list(answer.edits.cdi_devices)
            for annotation in answer.edits.annotations.values():
                assert annotation.split(",") == names
            edits = resolve(specs, names)  # raises CdiError on any dangling name
            assert device.gpu.device_path in edits.device_paths and "/dev/nvidiactl" in edits.device_paths
            assert f"{LIB}/libcuda.so.{V}" in edits.mount_paths
            assert {"create-symlinks", "update-ldcache"} <= set(edits.hook_names)
            if device.mig is not None:
                assert f"/dev/nvidia-caps/nvidia-cap{device.mig.gi_cap_minor}" in edits.device_paths


def test_a_dangling_name_is_an_error(workdir: Path) -> None:
    CdiSpecUpkeep(workdir / "cdi").write(build_specs(h100(), settings(workdir / "absent")))
    specs = load_specs(workdir / "cdi")
    with pytest.raises(CdiError, match=r"kind k8s\.device-plugin\.nvidia\.com/gpu has no device 'GPU-nope'"):
        resolve(specs, ["k8s.device-plugin.nvidia.com/gpu=GPU-nope"])
    with pytest.raises(CdiError, match=r"no spec of kind k8s\.device-plugin\.nvidia\.com/mofed"):
        resolve(specs, ["k8s.device-plugin.nvidia.com/mofed=all"])


def test_upkeep_replaces_atomically_drops_stale_kinds_and_removes_only_its_own(workdir: Path) -> None:
    cdi = workdir / "cdi"
    cdi.mkdir()
    (cdi / "other-vendor.json").write_text("{}")
    upkeep = CdiSpecUpkeep(cdi)
    root = workdir / "absent"
    upkeep.write(build_specs(h100(), settings(root, features=frozenset({"mofed"}), imex_channels=(0,))))
    assert (cdi / feature_spec_file("mofed")).exists() and (cdi / IMEX_SPEC_FILE).exists()
    upkeep.write(build_specs(h100(), settings(root)))  # a reload turned MOFED and IMEX off
    assert sorted(p.name for p in cdi.iterdir()) == sorted([GPU_SPEC_FILE, "other-vendor.json"])
    before = (cdi / GPU_SPEC_FILE).read_text()
    bad = SpecSet({GPU_SPEC_FILE: json.loads(before), "bad.json": {"kind": "x"}})
    with pytest.raises(CdiError):
        upkeep.write(bad)
    assert (cdi / GPU_SPEC_FILE).read_text() == before and not (cdi / "bad.json").exists(), "nothing half-written"
    upkeep.remove()
    assert [p.name for p in cdi.iterdir()] == ["other-vendor.json"]
