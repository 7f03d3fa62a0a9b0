"""NVIDIA's MPS daemon limits: pinned memory per replica, thread share, the client cap and its error text."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuslice.allocation.mps_edits import (
    MpsConfigError,
    daemon_settings,
    default_thread_percentage,
    max_clients,
    pinned_memory_limit_mib,
)
from gpuslice.gpu import ComputeCapability
from tests.mps.helpers import mps_resource, node_of


@pytest.mark.parametrize(
    ("memory_mib", "replicas", "expected"),
    [
        (81559, 10, 8155),  # NVIDIA's illustration: 85520809984 bytes / 10 -> 8155M
        (81559, 4, 20389),
        (40960, 3, 13653),
        (143771, 48, 2995),
        (81559, 1, 81559),
        (0, 2, None),  # GPUs reporting no memory are skipped
    ],
)
def test_pinned_memory_is_total_bytes_over_replicas_in_whole_mib(
    memory_mib: int, replicas: int, expected: int | None
) -> None:
    gpu = node_of("NVIDIA H100 80GB HBM3", max(memory_mib, 1), "9.0").gpus[0]
    gpu = replace(gpu, memory_mib=memory_mib)
    assert pinned_memory_limit_mib(gpu, replicas) == expected
    if memory_mib:
        assert expected == memory_mib * 1024 * 1024 // replicas // 1024 // 1024


@pytest.mark.parametrize(
    ("capability", "clients"),
    [("6.1", 16), ("7.0", 16), ("7.2", 16), ("7.5", 48), ("8.0", 48), ("8.9", 48), ("9.0", 48), ("10.0", 48)],
)
def test_client_cap_is_48_from_compute_capability_7_5_else_16(capability: str, clients: int) -> None:
    assert max_clients(ComputeCapability.parse(capability)) == clients


@pytest.mark.parametrize(("replicas", "percentage"), [(2, 50), (3, 33), (10, 10), (48, 2)])
def test_thread_percentage_is_100_over_replicas_per_gpu(replicas: int, percentage: int) -> None:
    assert default_thread_percentage(mps_resource(replicas)) == percentage


@pytest.mark.parametrize(
    ("model", "capability", "replicas", "error"),
    [
        ("NVIDIA A100-SXM4-40GB", "8.0", 48, None),
        ("NVIDIA A100-SXM4-40GB", "8.0", 49, "49 > 48"),
        ("Tesla V100-SXM2-16GB", "7.0", 16, None),
        ("Tesla V100-SXM2-16GB", "7.0", 17, "17 > 16"),
        ("Tesla T4", "7.5", 48, None),
    ],
)
def test_replicas_beyond_the_client_cap_are_refused_with_nvidias_text(
    model: str, capability: str, replicas: int, error: str | None
) -> None:
    resource = mps_resource(replicas, node=node_of(model, 16384, capability, count=2))
    if error is None:
        assert daemon_settings(resource).thread_percentage == 100 // replicas
        return
    with pytest.raises(MpsConfigError) as raised:
        daemon_settings(resource)
    assert str(raised.value) == f"invalid MPS configuration: invalid device maximum allowed replicas exceeded: {error}"


def test_daemon_commands_set_each_gpu_then_the_thread_share() -> None:
    settings = daemon_settings(mps_resource(10))
    assert settings.resource == "nvidia.com/gpu"
    assert len(settings.gpu_uuids) == 4
    assert settings.commands == (
        "set_default_device_pinned_mem_limit 0 8155M",
        "set_default_device_pinned_mem_limit 1 8155M",
        "set_default_device_pinned_mem_limit 2 8155M",
        "set_default_device_pinned_mem_limit 3 8155M",
        "set_default_active_thread_percentage 10",
    )
