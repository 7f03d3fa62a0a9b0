"""Nodes, pods and DRA objects as the API server serves them (each validates for Kubernetes)."""

from __future__ import annotations

from typing import Any

H100 = "NVIDIA-H100-80GB-HBM3"


def gpu_node(name: str, gpus: int = 8, labels: dict[str, str] | None = None, **allocatable: str) -> dict[str, Any]:
    resources = {"cpu": "112", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": str(gpus), **allocatable}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.product": H100,
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/gpu.memory": "81559",
                "nvidia.com/gpu.replicas": "1",
                "nvidia.com/gpu.sharing-strategy": "none",
                **(labels or {}),
            },
        },
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def cpu_node(name: str) -> dict[str, Any]:
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def pod(
    name: str,
    node: str | None,
    gpus: int = 0,
    cpu: str = "1",
    memory: str = "8Gi",
    phase: str = "Running",
    created: str = "2026-01-01T00:00:00Z",
    namespace: str = "team-a",
    extra: dict[str, str] | None = None,
    uid: str = "",
) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": cpu, "memory": memory, **(extra or {})}
    limits: dict[str, str] = {}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)  # extended resources: the limit is the request
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "registry.example.com/train:1", "resources": {"requests": requests}}]
    }
    if limits:
        spec["containers"][0]["resources"]["limits"] = limits
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created, "uid": uid or f"uid-{name}"},
        "spec": spec,
        "status": {"phase": phase},
    }


def two_node_cluster() -> dict[str, list[dict[str, Any]]]:
    """Two 8-GPU H100 nodes and six pods; the answers are worked out in test_snapshot.py."""
    return {
        "nodes": [gpu_node("gpu-a"), gpu_node("gpu-b")],
        "pods": [
            pod("p1", "gpu-a", gpus=3, created="2026-01-01T00:00:01Z"),
            pod("p2", "gpu-b", gpus=3, created="2026-01-01T00:00:02Z"),
            pod("p3", "gpu-a", gpus=2, created="2026-01-01T00:00:03Z"),
            pod("p4", "gpu-b", gpus=1, created="2026-01-01T00:00:04Z"),
            pod("p5", "gpu-a", cpu="4", created="2026-01-01T00:00:05Z"),
            pod("p6", None, gpus=6, phase="Pending", created="2026-01-01T00:00:06Z"),
            pod("done", "gpu-b", gpus=8, phase="Succeeded", created="2026-01-01T00:00:00Z"),
        ],
    }


def dra_slice(node: str, gpus: int, driver: str = "gpu.gpuslice.io") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}-0"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {
                        "type": {"string": "gpu"},
                        "uuid": {"string": f"GPU-{node}-{i}"},
                        "productName": {"string": "NVIDIA H100 80GB HBM3"},
                    },
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for i in range(gpus)
            ],
        },
    }


def dra_claim(
    name: str, node: str, devices: list[str], pod_name: str, driver: str = "gpu.gpuslice.io"
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.gpuslice.io"}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpus", "driver": driver, "pool": node, "device": device} for device in devices
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": pod_name, "uid": f"uid-{pod_name}"}],
        },
    }
