"""Pods, jobs, nodes and the one-line cluster spec."""

from __future__ import annotations

from typing import Any

import pytest

from gpuslice.sim.core.clusters import parse_cluster
from gpuslice.sim.core.model import JobSpec, PodSpec, SimModelError

POD_AMOUNTS = [
    # gpu as written -> (gpu_count, gpu_milli)
    (0, (0, 0)),
    (0.25, (1, 250)),
    (0.5, (1, 500)),
    (1, (1, 1000)),
    (8, (8, 1000)),
]


@pytest.mark.parametrize(("gpu", "expected"), POD_AMOUNTS)
def test_pod_amounts(gpu: float, expected: tuple[int, int]) -> None:
    pod = PodSpec.of(gpu)
    assert (pod.gpu_count, pod.gpu_milli) == expected
    assert pod.gpus == gpu


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"gpu_count": 2, "gpu_milli": 500}, "only a single GPU can be shared"),
        ({"gpu_count": 1, "gpu_milli": 1500}, "gpu_milli must be in"),
        ({"gpu_count": 0, "gpu_milli": 300}, "gpu_milli without gpu_count"),
        ({"gpu_count": -1, "gpu_milli": 1000}, "must not be negative"),
    ],
)
def test_bad_pods_are_refused(kwargs: dict[str, Any], reason: str) -> None:
    with pytest.raises(SimModelError, match=reason):
        PodSpec(**kwargs)


def test_fractions_above_one_gpu_are_refused() -> None:
    with pytest.raises(SimModelError, match="whole numbers"):
        PodSpec.of(1.5)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [({"duration": 0}, "duration must be positive"), ({"submit": -1}, "submit time"), ({"pods": ()}, "no pods")],
)
def test_bad_jobs_are_refused(kwargs: dict[str, object], reason: str) -> None:
    fields: dict[str, object] = {"job_id": "j", "submit": 0.0, "duration": 5.0, "pods": (PodSpec.of(1),)}
    fields.update(kwargs)
    with pytest.raises(SimModelError, match=reason):
        JobSpec(**fields)  # type: ignore[arg-type]


def test_cluster_spec_builds_nodes_from_discovery_presets() -> None:
    spec = parse_cluster("3xdgx-h100+2xh100x4;island=2;cpu=64000")
    assert [len(node.gpus) for node in spec.nodes] == [8, 8, 8, 4, 4]
    assert spec.total_gpus == 32
    assert [node.island for node in spec.nodes] == ["island-000"] * 2 + ["island-001"] * 2 + ["island-002"]
    assert spec.islands == ("island-000", "island-001", "island-002")
    assert all(node.cpu_milli == 64000 for node in spec.nodes)
    assert spec.nodes[0].product_name == "NVIDIA H100 80GB HBM3"
    assert spec.nodes[0].gpus[0].memory_mib == 81559
    # GPU identities come from the node-spec parser and are unique per node.
    assert len({gpu.uuid for node in spec.nodes for gpu in node.gpus}) == 32


def test_cluster_spec_defaults_scale_cpu_and_memory_with_gpus() -> None:
    node = parse_cluster("1xa100x8").nodes[0]
    assert node.cpu_milli == 8 * 14_000
    assert node.memory_mib == 8 * 256 * 1024


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("4xnope", "unknown preset 'nope'"),
        ("dgx-h100", "must look like <count>x<preset>"),
        ("0xdgx-h100", "node count must be positive"),
        ("2xdgx-h100;island=0", "island must be a positive integer"),
        ("2xdgx-h100;color=red", "option 'color=red'"),
    ],
)
def test_bad_cluster_specs_name_the_problem(text: str, reason: str) -> None:
    with pytest.raises(SimModelError, match=reason):
        parse_cluster(text)
