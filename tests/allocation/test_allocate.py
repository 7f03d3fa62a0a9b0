"""Allocate as a pure function: env, device nodes, isolation, and a typed error naming each bad device."""

from __future__ import annotations

import pytest

from gpuslice.allocation import (
    MAX_DEVICE_ID_LENGTH,
    AllocateOptions,
    AllocationContext,
    AllocationError,
    ContainerEdits,
    DeviceNode,
    EmptyRequest,
    IdTooLong,
    Mount,
    RequestTooLarge,
    TooManyReplicas,
    UnhealthyDevice,
    UnknownDevice,
    allocate_container,
)
from gpuslice.allocation.allocate import allocate  # the function: the package's `allocate` is its module
from gpuslice.config import parse_config_text
from gpuslice.discovery import load_node_spec
from gpuslice.sharing import Isolation, build_resources
from tests.support.resources import MIXED_MIG, TIME_SLICED, resource_for

CONTROL = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]


def test_whole_gpu_answer() -> None:
    node, resource = resource_for("h100x4")
    got = allocate_container(resource, [node.gpus[3].uuid, node.gpus[1].uuid])
    assert dict(got.envs) == {"NVIDIA_VISIBLE_DEVICES": f"{node.gpus[3].uuid},{node.gpus[1].uuid}"}
    assert [d.container_path for d in got.device_nodes] == [*CONTROL, "/dev/nvidia3", "/dev/nvidia1"]
    assert all(d.host_path == d.container_path and d.permissions == "rw" for d in got.device_nodes)
    assert got.isolation is Isolation.EXCLUSIVE


def test_replicas_are_reduced_to_distinct_physical_ids_in_first_seen_order() -> None:
    node, resource = resource_for("h100x4", TIME_SLICED)
    a, b = node.gpus[2].uuid, node.gpus[0].uuid
    got = allocate_container(resource, [f"{a}::3", f"{b}::0", f"{a}::1"])
    assert got.envs["NVIDIA_VISIBLE_DEVICES"] == f"{a},{b}"
    assert got.physical_ids == (a, b)
    assert [d.container_path for d in got.device_nodes] == [*CONTROL, "/dev/nvidia2", "/dev/nvidia0"]
    assert got.isolation is Isolation.NONE


def test_mig_answer_has_the_parent_node_and_both_capability_nodes() -> None:
    node, resource = resource_for("h100x4-mig", MIXED_MIG)
    mig = node.gpus[1].mig_instances[5]
    got = allocate_container(resource, [mig.uuid])
    assert got.envs["NVIDIA_VISIBLE_DEVICES"] == mig.uuid
    assert [d.container_path for d in got.device_nodes] == [
        *CONTROL,
        "/dev/nvidia1",
        f"/dev/nvidia-caps/nvidia-cap{mig.gi_cap_minor}",
        f"/dev/nvidia-caps/nvidia-cap{mig.ci_cap_minor}",
    ]
    assert got.isolation is Isolation.MIG


def test_index_strategy_and_dev_root_come_from_the_config() -> None:
    config = parse_config_text(
        "flags: {migStrategy: mixed, nvidiaDevRoot: /run/nvidia/driver, plugin: {deviceIDStrategy: index}}"
    ).config
    node, resource = resource_for("h100x4-mig", MIXED_MIG)
    options = AllocateOptions.from_config(config)
    got = allocate_container(resource, [node.gpus[2].mig_instances[1].uuid], options=options)
    assert got.envs["NVIDIA_VISIBLE_DEVICES"] == "2:1"
    assert got.device_nodes[0] == DeviceNode("/dev/nvidiactl", "/run/nvidia/driver/dev/nvidiactl", "rw")


def test_one_answer_per_container_in_order() -> None:
    node, resource = resource_for("h100x4")
    answer = allocate(resource, [[node.gpus[0].uuid], [node.gpus[1].uuid]])
    assert [c.device_ids for c in answer.containers] == [(node.gpus[0].uuid,), (node.gpus[1].uuid,)]


def test_extra_steps_merge_after_the_defaults() -> None:
    def mps_like(context: AllocationContext) -> ContainerEdits:
        return ContainerEdits(
            envs={"CUDA_MPS_PIPE_DIRECTORY": f"/mps/{context.resource.name}/pipe", "NVIDIA_VISIBLE_DEVICES": "x"},
            mounts=(Mount("/dev/shm", "/run/mps/shm"), Mount("/dev/shm", "/elsewhere")),
            device_nodes=(DeviceNode("/dev/nvidiactl", "/other"),),
            cdi_devices=("k8s.device-plugin.nvidia.com/gpu=0", "k8s.device-plugin.nvidia.com/gpu=0"),
        )

    node, resource = resource_for("h100x4")
    got = allocate_container(resource, [node.gpus[0].uuid], options=AllocateOptions(extra_steps=(mps_like,)))
    assert got.envs == {"NVIDIA_VISIBLE_DEVICES": "x", "CUDA_MPS_PIPE_DIRECTORY": "/mps/nvidia.com/gpu/pipe"}
    assert got.mounts == (Mount("/dev/shm", "/run/mps/shm"),), "mounts keyed by container path, first wins"
    assert got.device_nodes[0].host_path == "/dev/nvidiactl", "device nodes keyed by container path, first wins"
    assert got.edits.cdi_devices == ("k8s.device-plugin.nvidia.com/gpu=0",)


def test_answers_serialise_for_json() -> None:
    node, resource = resource_for("h100x4", TIME_SLICED)
    data = allocate_container(resource, [f"{node.gpus[0].uuid}::2"]).to_dict()
    assert data["isolation"] == {"kind": "none", "strength": "none", "why": Isolation.NONE.why}
    assert data["device_nodes"][-1] == {
        "container_path": "/dev/nvidia0",
        "host_path": "/dev/nvidia0",
        "permissions": "rw",
    }


GPU0 = "{gpu0}"
BAD_REQUESTS = [
    # (config, device ids, unhealthy ids, error type, text that must appear)
    ("", ["GPU-nope"], [], UnknownDevice, "unknown device: GPU-nope"),
    ("", [GPU0 + "::0"], [], UnknownDevice, "unknown device: {gpu0}::0"),
    (TIME_SLICED, [GPU0], [], UnknownDevice, "unknown device: {gpu0}"),
    (TIME_SLICED, [GPU0 + "::4"], [], TooManyReplicas, "{gpu0}::4 ({gpu0} has 4 replicas, ::0 to ::3)"),
    (TIME_SLICED, [GPU0 + "::1"], [GPU0 + "::1"], UnhealthyDevice, "unhealthy device: {gpu0}::1"),
    ("", ["x" * 5000], [], IdTooLong, "xxxxxxxx... (5000 characters)"),
    (
        "sharing: {timeSlicing: {failRequestsGreaterThanOne: true, resources: [{name: gpu, replicas: 4}]}}",
        [GPU0 + "::0", GPU0 + "::1"],
        [],
        RequestTooLarge,
        "maximum request size for shared resources is 1; found 2 ({gpu0}::0, {gpu0}::1)",
    ),
]


@pytest.mark.parametrize(("config", "ids", "unhealthy", "error", "text"), BAD_REQUESTS)
def test_bad_requests_raise_a_typed_error_naming_the_device(
    config: str, ids: list[str], unhealthy: list[str], error: type[AllocationError], text: str
) -> None:
    node, resource = resource_for("h100x4", config)
    gpu0 = node.gpus[0].uuid
    with pytest.raises(error) as caught:
        allocate_container(resource, [i.format(gpu0=gpu0) for i in ids], {u.format(gpu0=gpu0) for u in unhealthy})
    assert str(caught.value).startswith(f'invalid allocation request for "{resource.name}": invalid request: ')
    assert text.format(gpu0=gpu0) in str(caught.value)
    assert len(str(caught.value)) < 400, "long IDs are never echoed in full"


def test_no_container_requests_is_an_empty_request() -> None:
    _, resource = resource_for("h100x4")
    with pytest.raises(EmptyRequest, match="no container requests"):
        allocate(resource, [])


def test_time_slicing_allows_several_replicas_by_default() -> None:
    node, resource = resource_for("h100x4", TIME_SLICED)
    got = allocate_container(resource, [f"{node.gpus[0].uuid}::0", f"{node.gpus[0].uuid}::3"])
    assert got.envs["NVIDIA_VISIBLE_DEVICES"] == node.gpus[0].uuid


def test_the_longest_real_id_is_well_within_the_limit() -> None:
    node, _ = resource_for("h100x4-mig", MIXED_MIG)
    legacy = f"MIG-{node.gpus[0].uuid}/14/7::47"
    assert len(legacy) < MAX_DEVICE_ID_LENGTH // 2


def test_a_pipeline_replaces_the_default_steps() -> None:
    node, resource = resource_for("h100x4")

    def cdi_only(context: AllocationContext) -> ContainerEdits:
        return ContainerEdits(
            cdi_devices=tuple(f"k8s.device-plugin.nvidia.com/gpu={d.physical_id}" for d in context.physical)
        )

    got = allocate_container(resource, [node.gpus[1].uuid], options=AllocateOptions(pipeline=(cdi_only,)))
    assert dict(got.envs) == {} and got.device_nodes == ()
    assert got.edits.cdi_devices == (f"k8s.device-plugin.nvidia.com/gpu={node.gpus[1].uuid}",)


def test_isolation_is_that_of_the_allocated_devices() -> None:
    config = parse_config_text(
        "gpuslice: {honorDevices: true}\nsharing: {timeSlicing: {resources: [{name: gpu, replicas: 2, devices: [0]}]}}"
    ).config
    node = load_node_spec("preset:h100x4").node
    resource = build_resources(node, config).resources[0]
    assert allocate_container(resource, [node.gpus[2].uuid]).isolation is Isolation.EXCLUSIVE
    assert allocate_container(resource, [f"{node.gpus[0].uuid}::1"]).isolation is Isolation.NONE
    mixed = allocate_container(resource, [node.gpus[2].uuid, f"{node.gpus[0].uuid}::0"])
    assert mixed.isolation is Isolation.NONE
    with pytest.raises(UnknownDevice) as caught:
        allocate_container(resource, [f"{node.gpus[2].uuid}::0"])
    assert not isinstance(caught.value, TooManyReplicas), "GPU 2 is not shared at all"
