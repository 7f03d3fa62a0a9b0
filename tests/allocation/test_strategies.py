"""NVIDIA's Allocate answer for every device list strategy, ID strategy, device specs, features and IMEX."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuslice.allocation import AllocateOptions, AllocationContext, ContainerEdits, DeviceNode, Mount
from gpuslice.allocation.allocate import validate_request
from gpuslice.allocation.strategies import (
    ImexChannelMissing,
    nvidia_answer,
    select_imex_channels,
)
from gpuslice.config import parse_config_text
from gpuslice.sharing import Resource
from tests.support.resources import MIXED_MIG, TIME_SLICED, resource_for

VOLUMES = "/var/run/nvidia-container-devices"
FIXED_UUID = "00000000-0000-4000-8000-000000000000"
NODE, WHOLE = resource_for("h100x4")
G0, G1 = NODE.gpus[0].uuid, NODE.gpus[1].uuid


def settings_for(config: str = "", **changes: Any) -> AllocateOptions:
    base = AllocateOptions.from_config(parse_config_text(config).config, new_uuid=lambda: FIXED_UUID)
    return replace(base, **changes)


def edits(resource: Resource, ids: list[str], settings: AllocateOptions) -> ContainerEdits:
    devices = validate_request(resource, ids)
    first = {d.physical_id: d for d in reversed(devices)}
    physical = tuple(first[p] for p in dict.fromkeys(d.physical_id for d in devices))
    return nvidia_answer(AllocationContext(resource, devices, physical, settings))


def plugin(strategies: str, extra: str = "") -> str:
    """NVIDIA's exact answers: passDeviceSpecs false, as NVIDIA's default is."""
    return f"flags: {{plugin: {{passDeviceSpecs: false, deviceListStrategy: {strategies}{extra}}}}}"


NVIDIA_DEFAULTS = "flags: {plugin: {passDeviceSpecs: false}}"


def test_nvidia_defaults_give_exactly_the_visible_devices() -> None:
    got = edits(WHOLE, [G1, G0], settings_for(NVIDIA_DEFAULTS))
    assert got == ContainerEdits(envs={"NVIDIA_VISIBLE_DEVICES": f"{G1},{G0}"})


@pytest.mark.parametrize(
    ("config", "nodes"),
    [
        ("", True),  # gpuslice's default: the answer works without NVIDIA's runtime hook too
        (NVIDIA_DEFAULTS, False),
        ("flags: {plugin: {passDeviceSpecs: true}}", True),
    ],
)
def test_device_specs_unless_the_config_turns_them_off(config: str, nodes: bool) -> None:
    got = edits(WHOLE, [G0], settings_for(config))
    assert [d.container_path for d in got.device_nodes] == (
        ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset", "/dev/nvidia0"]
        if nodes
        else []
    )
    assert got.envs == {"NVIDIA_VISIBLE_DEVICES": G0}


def test_replicas_are_stripped_and_deduplicated_first_seen() -> None:
    _, shared = resource_for("h100x4", TIME_SLICED)
    got = edits(shared, [f"{G1}::0", f"{G0}::3", f"{G1}::2"], settings_for(NVIDIA_DEFAULTS))
    assert got == ContainerEdits(envs={"NVIDIA_VISIBLE_DEVICES": f"{G1},{G0}"})


CASES: list[tuple[str, dict[str, str], list[Mount], dict[str, str], list[str]]] = [
    # (config, envs, mounts, annotations, cdi names)
    (plugin("envvar"), {"NVIDIA_VISIBLE_DEVICES": f"{G1},{G0}"}, [], {}, []),
    (plugin("envvar", ", deviceIDStrategy: index"), {"NVIDIA_VISIBLE_DEVICES": "1,0"}, [], {}, []),
    (
        plugin("volume-mounts"),
        {"NVIDIA_VISIBLE_DEVICES": VOLUMES},
        [Mount(f"{VOLUMES}/{G1}", "/dev/null"), Mount(f"{VOLUMES}/{G0}", "/dev/null")],
        {},
        [],
    ),
    (
        plugin("[envvar, volume-mounts]"),
        {"NVIDIA_VISIBLE_DEVICES": VOLUMES},  # volume-mounts overwrites envvar's value
        [Mount(f"{VOLUMES}/{G1}", "/dev/null"), Mount(f"{VOLUMES}/{G0}", "/dev/null")],
        {},
        [],
    ),
    (
        plugin("cdi-annotations"),
        {},
        [],
        {
            f"cdi.k8s.io/nvidia-device-plugin_{FIXED_UUID}": (
                f"k8s.device-plugin.nvidia.com/gpu={G1},k8s.device-plugin.nvidia.com/gpu={G0}"
            )
        },
        [],
    ),
    (
        plugin("cdi-cri"),
        {},
        [],
        {},
        [f"k8s.device-plugin.nvidia.com/gpu={G1}", f"k8s.device-plugin.nvidia.com/gpu={G0}"],
    ),
    (
        plugin("[cdi-cri, cdi-annotations]", ", deviceIDStrategy: index, cdiAnnotationPrefix: example.com/"),
        {},
        [],
        {
            f"example.com/nvidia-device-plugin_{FIXED_UUID}": (
                "k8s.device-plugin.nvidia.com/gpu=1,k8s.device-plugin.nvidia.com/gpu=0"
            )
        },
        ["k8s.device-plugin.nvidia.com/gpu=1", "k8s.device-plugin.nvidia.com/gpu=0"],
    ),
    (
        plugin("[cdi-cri, envvar]"),
        {"NVIDIA_VISIBLE_DEVICES": f"{G1},{G0}"},
        [],
        {},
        [f"k8s.device-plugin.nvidia.com/gpu={G1}", f"k8s.device-plugin.nvidia.com/gpu={G0}"],
    ),
]


@pytest.mark.parametrize(("config", "envs", "mounts", "annotations", "cdi"), CASES)
def test_device_list_strategies(
    config: str, envs: dict[str, str], mounts: list[Mount], annotations: dict[str, str], cdi: list[str]
) -> None:
    got = edits(WHOLE, [G1, G0], settings_for(config))
    assert dict(got.envs) == envs
    assert list(got.mounts) == mounts
    assert dict(got.annotations) == annotations
    assert list(got.cdi_devices) == cdi
    assert got.device_nodes == ()


def test_each_container_response_gets_a_fresh_annotation_key() -> None:
    settings = AllocateOptions.from_config(parse_config_text(plugin("cdi-annotations")).config)
    first = edits(WHOLE, [G0], settings).annotations
    second = edits(WHOLE, [G0], settings).annotations
    assert len(first) == len(second) == 1 and first.keys() != second.keys()
    assert next(iter(first)).startswith("cdi.k8s.io/nvidia-device-plugin_")


FEATURES = (
    "flags: {gdrcopyEnabled: true, gdsEnabled: true, mofedEnabled: true,"
    " plugin: {passDeviceSpecs: false, deviceListStrategy: %s}}"
)


def test_feature_flags_set_their_envs_even_in_pure_cdi_mode() -> None:
    got = edits(WHOLE, [G0], settings_for(FEATURES % "cdi-cri"))
    assert dict(got.envs) == {"NVIDIA_GDRCOPY": "enabled", "NVIDIA_GDS": "enabled", "NVIDIA_MOFED": "enabled"}
    assert list(got.cdi_devices) == [
        f"k8s.device-plugin.nvidia.com/gpu={G0}",
        "k8s.device-plugin.nvidia.com/gdrcopy=all",
        "k8s.device-plugin.nvidia.com/gds=all",
        "k8s.device-plugin.nvidia.com/mofed=all",
    ]
    assert edits(WHOLE, [G0], settings_for(FEATURES % "envvar")).envs["NVIDIA_VISIBLE_DEVICES"] == G0


def test_pass_device_specs_control_nodes_then_requested_devices_under_the_dev_root() -> None:
    config = "flags: {nvidiaDevRoot: /run/nvidia/driver, plugin: {passDeviceSpecs: true}}"
    got = edits(WHOLE, [G1, G0], settings_for(config))
    root = "/run/nvidia/driver"
    paths = [
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidia-modeset",
        "/dev/nvidia1",
        "/dev/nvidia0",
    ]
    assert got.device_nodes == tuple(DeviceNode(p, root + p, "rw") for p in paths)


def test_control_nodes_missing_from_the_plugin_container_are_skipped() -> None:
    settings = settings_for("flags: {plugin: {passDeviceSpecs: true}}", control_nodes=("/dev/nvidiactl",))
    got = edits(WHOLE, [G0], settings)
    assert [d.container_path for d in got.device_nodes] == ["/dev/nvidiactl", "/dev/nvidia0"]


def test_mig_device_specs_are_the_parent_and_two_capability_nodes() -> None:
    node, mig_resource = resource_for("h100x4-mig", MIXED_MIG)
    mig = node.gpus[2].mig_instances[4]
    got = edits(mig_resource, [mig.uuid], settings_for("flags: {plugin: {passDeviceSpecs: true}}", control_nodes=()))
    assert [d.container_path for d in got.device_nodes] == [
        "/dev/nvidia2",
        f"/dev/nvidia-caps/nvidia-cap{mig.gi_cap_minor}",
        f"/dev/nvidia-caps/nvidia-cap{mig.ci_cap_minor}",
    ]
    index = edits(mig_resource, [mig.uuid], settings_for(plugin("envvar", ", deviceIDStrategy: index")))
    assert index.envs["NVIDIA_VISIBLE_DEVICES"] == "2:4"


def test_imex_channels_reach_every_strategy() -> None:
    config = "flags: {plugin: {deviceListStrategy: [envvar, volume-mounts, cdi-cri], passDeviceSpecs: true}}"
    got = edits(WHOLE, [G0], settings_for(config, imex_channels=(0,), control_nodes=()))
    assert got.envs["NVIDIA_IMEX_CHANNELS"] == "0"
    assert Mount(f"{VOLUMES}/imex/0", "/dev/null") in got.mounts
    assert "k8s.device-plugin.nvidia.com/imex-channel=0" in got.cdi_devices
    assert got.device_nodes[-1] == DeviceNode(
        "/dev/nvidia-caps-imex-channels/channel0", "/dev/nvidia-caps-imex-channels/channel0", "rw"
    )


@pytest.mark.parametrize(
    ("existing", "required", "selected", "warned", "error"),
    [
        ({"/dev/nvidia-caps-imex-channels/channel0"}, True, (0,), False, None),
        ({"/drv/dev/nvidia-caps-imex-channels/channel0"}, True, (0,), False, None),  # under the dev root
        (set(), False, (), True, None),
        (set(), True, (), False, "requested IMEX channel channel0 does not exist"),
    ],
)
def test_imex_channels_must_exist_as_character_devices(
    existing: set[str], required: bool, selected: tuple[int, ...], warned: bool, error: str | None
) -> None:
    if error is not None:
        with pytest.raises(ImexChannelMissing, match=error):
            select_imex_channels([0], required, "/drv", existing.__contains__)
        return
    got, warnings = select_imex_channels([0], required, "/drv", existing.__contains__)
    assert got == selected
    assert bool(warnings) == warned
    assert all(w.startswith("Ignoring requested IMEX channel channel0") for w in warnings)
