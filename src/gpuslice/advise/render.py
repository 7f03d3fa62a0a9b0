"""Turn a Recommendation into the files that implement it and the text a person reads."""

from __future__ import annotations

from typing import Any

import yaml

from gpuslice.advise.decide import Recommendation
from gpuslice.config import parse_config_text
from gpuslice.sharing import isolation_label_key

MPS_ROOT = "/run/nvidia/mps"


def config_mapping(rec: Recommendation) -> dict[str, Any]:
    """The NVIDIA v1 config that makes `gpuslice plugin` advertise what the recommendation says."""
    if rec.mechanism == "mig":
        return {"version": "v1", "flags": {"migStrategy": "mixed"}}
    if rec.mechanism == "time-slicing":
        assert rec.time_slicing_replicas is not None
        return {
            "version": "v1",
            "flags": {"migStrategy": "none"},
            "sharing": {"timeSlicing": _replicated(rec.time_slicing_replicas)},
        }
    if rec.mechanism == "mps":
        assert rec.mps is not None
        return {
            "version": "v1",
            "flags": {"migStrategy": "none", "mpsRoot": MPS_ROOT},
            "sharing": {"mps": _replicated(rec.mps.replicas)},
        }
    return {"version": "v1", "flags": {"migStrategy": "none"}}


def _replicated(replicas: int) -> dict[str, Any]:
    # renameByDefault: pods ask for nvidia.com/gpu.shared, so nobody gets a slice when asking for a GPU.
    # failRequestsGreaterThanOne: two replicas may be the same GPU, so a request for more than one is refused.
    return {
        "renameByDefault": True,
        "failRequestsGreaterThanOne": True,
        "resources": [{"name": "nvidia.com/gpu", "replicas": replicas}],
    }


def config_yaml(rec: Recommendation) -> str:
    """The config file text; checked with the project's own config loader before it is handed out."""
    header = (
        f"# gpuslice advise: {rec.mechanism} for a {rec.needs.tenancy}, {_latency(rec)} tenant on "
        f"{rec.gpu.product_name}\n# use as config.yaml of {rec.overlay}, or gpuslice plugin --config-file\n"
    )
    text = header + yaml.safe_dump(config_mapping(rec), sort_keys=False)
    parse_config_text(text, source="gpuslice advise")
    return text


def node_spec_mapping(rec: Recommendation) -> dict[str, Any] | None:
    """A fake-backend node spec whose GPUs carry the advised MIG layout (None unless MIG)."""
    if rec.mig is None or rec.gpu.compute_capability is None:
        return None
    return {
        "name": "advised-mig-node",
        "gpus": [
            {
                "model": rec.gpu.product_name,
                "count": 1,
                "memory_mib": rec.gpu.memory_mib,
                "compute_capability": str(rec.gpu.compute_capability),
                "mig": list(rec.mig.layout),
            }
        ],
    }


def node_spec_yaml(rec: Recommendation) -> str | None:
    mapping = node_spec_mapping(rec)
    if mapping is None:
        return None
    header = "# node spec with the advised MIG layout on each GPU (set count to your GPUs per node)\n"
    return header + yaml.safe_dump(mapping, sort_keys=False)


def mig_create_command(rec: Recommendation) -> str | None:
    """The nvidia-smi call that creates the layout on GPU 0, each instance at its computed placement."""
    if rec.mig is None:
        return None
    instances = ",".join(f"{name}:{start}" for name, start in zip(rec.mig.layout, rec.mig.starts, strict=True))
    return f"nvidia-smi mig -i 0 -cgi {instances} -C"


def as_json(rec: Recommendation) -> dict[str, Any]:
    """Everything the text says, for machines."""
    iso = rec.isolation
    data: dict[str, Any] = {
        "needs": {
            "latency": rec.needs.latency,
            "tenancy": rec.needs.tenancy,
            "memory_gib": rec.needs.memory_gib,
            "per_gpu": rec.needs.per_gpu,
        },
        "gpu": {
            "product_name": rec.gpu.product_name,
            "memory_mib": rec.gpu.memory_mib,
            "memory_source": rec.gpu.memory_source,
            "compute_capability": None if rec.gpu.compute_capability is None else str(rec.gpu.compute_capability),
            "mig_catalogue": None if rec.gpu.mig_catalogue is None else rec.gpu.mig_catalogue.model_key,
        },
        "mechanism": rec.mechanism,
        "rule": rec.rule,
        "resource_name": rec.resource_name,
        "workloads_per_gpu": rec.workloads_per_gpu,
        "gpus_per_workload": rec.gpus_per_workload,
        "gpus_per_node": rec.needs.gpus_per_node,
        "pods_per_workload": rec.pods_per_workload,
        "gpus_per_pod": rec.gpus_per_pod,
        "reasons": list(rec.reasons),
        "warnings": list(rec.warnings),
        "isolation": {
            "verdict": iso.verdict,
            "label": iso.label,
            "label_key": isolation_label(rec),
            "memory": iso.memory,
            "faults": iso.faults,
            "performance": iso.performance,
            "not_given": list(iso.not_given),
        },
        "overlay": rec.overlay,
        "config_yaml": config_yaml(rec),
        "node_spec_yaml": node_spec_yaml(rec),
        "mig": None,
        "mps": None,
    }
    if rec.mig is not None:
        data["mig"] = {
            "profile": rec.mig.profile.name,
            "profile_memory_mib": rec.mig.profile_memory_mib,
            "max_per_gpu": rec.mig.max_per_gpu,
            "layout": list(rec.mig.layout),
            "starts": list(rec.mig.starts),
            "create_command": mig_create_command(rec),
        }
    if rec.mps is not None:
        data["mps"] = {
            "replicas": rec.mps.replicas,
            "pinned_memory_limit_mib": rec.mps.pinned_memory_limit_mib,
            "active_thread_percentage": rec.mps.active_thread_percentage,
        }
    return data


def report_text(rec: Recommendation) -> str:
    """The advice as a person reads it, followed by the files that implement it."""
    needs, gpu, iso = rec.needs, rec.gpu, rec.isolation
    cc = "unknown" if gpu.compute_capability is None else str(gpu.compute_capability)
    source = gpu.memory_source + ("; --gpu-memory-mib gives NVML's exact figure" if gpu.memory_estimated else "")
    lines = [
        f"Tenant: {needs.tenancy}, {_latency(rec)}; {needs.memory_gib:g} GiB per workload, {needs.per_gpu} per GPU",
        f"GPU:    {gpu.product_name}, {gpu.memory_mib} MiB ({source}), compute capability {cc}",
        "",
        f"Recommendation: {_headline(rec)}",
        f"  pods request: {rec.resource_name}: {rec.gpus_per_pod}"
        + (f" ({rec.pods_per_workload} pods per workload)" if rec.pods_per_workload > 1 else ""),
        f"  rule: {rec.rule}",
    ]
    lines += [f"  - {reason}" for reason in rec.reasons]
    lines += [f"  ! {warning}" for warning in rec.warnings]
    lines += [
        "",
        f"Isolation: {iso.verdict} (node label {isolation_label(rec)}={iso.label})",
        f"  memory:      {iso.memory}",
        f"  faults:      {iso.faults}",
        f"  performance: {iso.performance}",
        "  not given:",
    ]
    lines += [f"    - {item}" for item in iso.not_given]
    lines += ["", f"Deploy: put the config below in {rec.overlay}/config.yaml, then kubectl apply -k {rec.overlay}"]
    command = mig_create_command(rec)
    if command is not None:
        lines.append(f"MIG layout on a real GPU (repeat per GPU index, or let NVIDIA's MIG manager do it): {command}")
    lines += ["", "--- config.yaml ---", config_yaml(rec).rstrip()]
    spec = node_spec_yaml(rec)
    if spec is not None:
        lines += ["", "--- node spec (gpuslice plugin --backend fake --node-spec FILE) ---", spec.rstrip()]
    return "\n".join(lines) + "\n"


def isolation_label(rec: Recommendation) -> str:
    """The label key the label writer sets to this resource's isolation (tenants select nodes on it)."""
    return isolation_label_key(rec.resource_name)


def _headline(rec: Recommendation) -> str:
    if rec.mig is not None:
        return f"MIG, {len(rec.mig.layout)} x {rec.mig.profile.name} per GPU"
    if rec.mps is not None:
        return (
            f"MPS, {rec.mps.replicas} clients per GPU, each capped at {rec.mps.pinned_memory_limit_mib} MiB "
            f"and {rec.mps.active_thread_percentage}% of the SMs"
        )
    if rec.time_slicing_replicas is not None:
        return f"time-slicing, {rec.time_slicing_replicas} replicas per GPU"
    if rec.gpus_per_workload > 1:
        return f"whole GPUs, {rec.gpus_per_workload} per workload"
    return "whole GPUs, one workload per GPU"


def _latency(rec: Recommendation) -> str:
    return "latency-sensitive" if rec.needs.latency == "sensitive" else "batch"
