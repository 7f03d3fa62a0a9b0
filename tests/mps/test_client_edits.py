"""What an MPS client container gets: NVIDIA's pipe directory and mounts, plus gpuslice's per-container caps."""

from __future__ import annotations

from gpuslice.allocation import ContainerEdits, Mount
from gpuslice.allocation.mps_edits import client_edits
from gpuslice.config import parse_config_text
from gpuslice.discovery import load_node_spec
from gpuslice.sharing import AdvertisedDevice, Resource, build_resources
from tests.mps.helpers import mps_resource
from tests.support.resources import TIME_SLICED, resource_for

ROOT = "/run/nvidia/mps"


def pick(resource: Resource, *ids: str) -> list[AdvertisedDevice]:
    return [resource.by_id[i] for i in ids]


def test_one_replica_gets_the_pipe_the_mounts_and_its_share() -> None:
    resource = mps_resource(10)
    gpu = resource.physical_ids[2]
    got = client_edits(resource, pick(resource, f"{gpu}::7"), ROOT)
    assert dict(got.envs) == {
        "CUDA_MPS_PIPE_DIRECTORY": "/mps/nvidia.com/gpu/pipe",
        "CUDA_VISIBLE_DEVICES": gpu,
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=8155M",  # ordinal inside the container, NVIDIA's per-replica figure
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "10",
    }
    assert got.mounts == (
        Mount("/mps/nvidia.com/gpu/pipe", "/run/nvidia/mps/nvidia.com/gpu/pipe"),
        Mount("/dev/shm", "/run/nvidia/mps/shm"),
    )


def test_replicas_on_two_gpus_are_capped_per_gpu_in_container_order() -> None:
    resource = mps_resource(4)
    a, b = resource.physical_ids[3], resource.physical_ids[0]
    got = client_edits(resource, pick(resource, f"{a}::0", f"{b}::1", f"{a}::2"), ROOT)
    assert got.envs["CUDA_VISIBLE_DEVICES"] == f"{a},{b}"
    assert got.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=40778M,1=20389M"  # two shares of a, one of b
    assert got.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"  # the smaller share


def test_extensions_off_give_exactly_nvidias_answer() -> None:
    resource = mps_resource(2)
    got = client_edits(resource, pick(resource, f"{resource.physical_ids[0]}::1"), ROOT + "/", False, False)
    assert dict(got.envs) == {"CUDA_MPS_PIPE_DIRECTORY": "/mps/nvidia.com/gpu/pipe"}
    assert [m.host_path for m in got.mounts] == ["/run/nvidia/mps/nvidia.com/gpu/pipe", "/run/nvidia/mps/shm"]


def test_renamed_resources_use_their_advertised_name() -> None:
    config = "flags: {mpsRoot: /m}\nsharing: {mps: {renameByDefault: true, resources: [{name: gpu, replicas: 2}]}}"
    (shared,) = build_resources(load_node_spec("preset:h100x4").node, parse_config_text(config).config).resources
    got = client_edits(shared, [shared.devices[0]], "/m")
    assert shared.name == "nvidia.com/gpu.shared"
    assert got.envs["CUDA_MPS_PIPE_DIRECTORY"] == "/mps/nvidia.com/gpu.shared/pipe"
    assert got.mounts[0].host_path == "/m/nvidia.com/gpu.shared/pipe"


def test_time_slicing_and_whole_gpus_get_nothing() -> None:
    _, sliced = resource_for("h100x4", TIME_SLICED)
    _, whole = resource_for("h100x4")
    assert client_edits(sliced, [sliced.devices[0]], ROOT) == ContainerEdits()
    assert client_edits(whole, [whole.devices[0]], ROOT) == ContainerEdits()
