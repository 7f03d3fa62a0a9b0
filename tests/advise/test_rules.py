"""The decision rules, one row per situation: mechanism, rule, count, and the numbers that come with it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gpuslice.advise import RULES, AdviceError, TenantNeeds, UnknownGpuModel, recommend, resolve_gpu

H100 = "NVIDIA H100 80GB HBM3"
A100_40 = "NVIDIA A100-SXM4-40GB"


@dataclass(frozen=True)
class Case:
    latency: str
    tenancy: str
    memory_gib: float
    per_gpu: int
    gpu: str
    mechanism: str
    rule: str
    workloads_per_gpu: int
    detail: str = ""  # MIG profile, or "<pinned MiB>/<thread %>" for MPS
    warns: bool = False


CASES = [
    # trusted batch work: time-slicing, as many replicas as fit in memory
    Case("batch", "trusted", 8, 4, H100, "time-slicing", "batch-time-slicing", 4),
    Case("batch", "trusted", 30, 4, H100, "time-slicing", "batch-time-slicing", 2, warns=True),
    # trusted and latency-sensitive: MIG when a profile fits at least twice, else MPS
    Case("sensitive", "trusted", 9, 7, H100, "mig", "latency-mig", 7, "1g.10gb"),
    Case("sensitive", "trusted", 12, 4, H100, "mig", "latency-mig", 4, "1g.20gb"),
    Case("sensitive", "trusted", 6, 3, "NVIDIA L4", "mps", "latency-mps", 3, "8192/33"),
    Case("sensitive", "trusted", 0.25, 64, "NVIDIA L4", "mps", "latency-mps", 48, "512/2", warns=True),
    Case("sensitive", "trusted", 0.5, 20, "Tesla V100-SXM2-16GB", "mps", "latency-mps", 16, "1024/6", warns=True),
    # several tenants: MIG or whole GPUs, never MPS or time-slicing
    Case("batch", "multi-tenant", 35, 2, H100, "mig", "multi-tenant-mig", 2, "3g.40gb"),
    Case("sensitive", "multi-tenant", 15, 8, H100, "mig", "multi-tenant-mig", 4, "1g.20gb", warns=True),
    Case("sensitive", "multi-tenant", 4, 7, A100_40, "mig", "multi-tenant-mig", 7, "1g.5gb"),
    Case("batch", "multi-tenant", 10, 2, "NVIDIA A30", "mig", "multi-tenant-mig", 2, "2g.12gb"),
    Case("batch", "multi-tenant", 17, 7, "NVIDIA H200", "mig", "multi-tenant-mig", 7, "1g.18gb"),
    Case("sensitive", "multi-tenant", 8, 4, "NVIDIA L4", "whole", "multi-tenant-whole", 1),
    # no sharing possible or wanted
    Case("batch", "trusted", 100, 1, H100, "whole", "too-big-for-one-gpu", 1),
    Case("sensitive", "trusted", 10, 1, H100, "whole", "one-per-gpu", 1),
    Case("sensitive", "multi-tenant", 45, 2, H100, "whole", "memory-fits-one", 1, warns=True),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.rule}-{c.gpu}-{c.memory_gib}x{c.per_gpu}")
def test_rule(case: Case) -> None:
    needs = TenantNeeds(case.latency, case.tenancy, case.memory_gib, case.per_gpu)  # type: ignore[arg-type]
    rec = recommend(needs, resolve_gpu(case.gpu))
    assert (rec.mechanism, rec.rule, rec.workloads_per_gpu) == (case.mechanism, case.rule, case.workloads_per_gpu)
    assert bool(rec.warnings) is case.warns, rec.warnings
    if rec.mig is not None:
        assert rec.mig.profile.name == case.detail
        assert rec.resource_name == f"nvidia.com/mig-{case.detail}"
    if rec.mps is not None:
        assert f"{rec.mps.pinned_memory_limit_mib}/{rec.mps.active_thread_percentage}" == case.detail


def test_every_rule_is_exercised() -> None:
    assert {case.rule for case in CASES} == set(RULES)


def test_a_workload_larger_than_a_gpu_gets_several() -> None:
    rec = recommend(TenantNeeds("batch", "trusted", 100, 1), resolve_gpu(H100))
    assert rec.gpus_per_workload == 2 and rec.resource_name == "nvidia.com/gpu"


def test_mig_memory_is_what_the_instance_really_has() -> None:
    # 1g.10gb on an H100 holds 81559 / 8 MiB = 9.96 GiB, so a workload of a full 10 GiB needs the next size up.
    rec = recommend(TenantNeeds("sensitive", "multi-tenant", 10, 4), resolve_gpu(H100))
    assert rec.mig is not None and rec.mig.profile.name == "1g.20gb"


def test_a_same_memory_profile_with_more_sms_is_mentioned() -> None:
    rec = recommend(TenantNeeds("sensitive", "trusted", 18, 3), resolve_gpu(H100))
    assert rec.mig is not None and rec.mig.profile.name == "1g.20gb"
    assert any("2g.20gb has the same memory and more SMs" in reason for reason in rec.reasons)


def test_shared_replicas_use_their_own_resource_name() -> None:
    for latency, per_gpu in (("batch", 4), ("sensitive", 3)):
        rec = recommend(TenantNeeds(latency, "trusted", 6, per_gpu), resolve_gpu("NVIDIA L4"))  # type: ignore[arg-type]
        assert rec.mechanism in ("time-slicing", "mps") and rec.resource_name == "nvidia.com/gpu.shared"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"memory_gib": 0}, "positive number of GiB"),
        ({"memory_gib": -3}, "positive number of GiB"),
        ({"memory_gib": float("nan")}, "positive number of GiB"),
        ({"per_gpu": 0}, "at least 1"),
        ({"latency": "fast"}, "latency must be one of sensitive, batch"),
        ({"tenancy": "public"}, "tenancy must be one of trusted, multi-tenant"),
    ],
)
def test_bad_needs_are_refused(kwargs: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {"latency": "batch", "tenancy": "trusted", "memory_gib": 8, "per_gpu": 2, **kwargs}
    with pytest.raises(AdviceError, match=message):
        TenantNeeds(**fields)  # type: ignore[arg-type]


def test_gpu_facts() -> None:
    h100 = resolve_gpu(H100)
    assert (h100.memory_mib, h100.memory_source, str(h100.compute_capability)) == (81559, "NVML figure", "9.0")
    assert h100.mig_catalogue is not None and h100.mig_catalogue.model_key == "H100-80GB"
    nvl = resolve_gpu("NVIDIA H100 NVL")
    assert nvl.memory_estimated and nvl.mig_catalogue is not None and nvl.mig_catalogue.model_key == "H100-94GB"
    assert resolve_gpu("NVIDIA L4").mig_catalogue is None
    assert resolve_gpu("Tesla V100-SXM2-16GB").mps_max_clients == 16
    assert resolve_gpu("Some GPU", memory_mib=1000).mps_max_clients == 16  # unknown capability: the safe limit
    # A capability given below 8.0 turns MIG off even for a MIG-capable name.
    assert resolve_gpu(H100, compute_capability="7.5").mig_catalogue is None


@pytest.mark.parametrize(
    ("name", "memory", "message"),
    [
        ("Mystery Accelerator", None, "give --gpu-memory-mib"),
        (H100, 0, "positive number of MiB"),
        ("  ", None, "empty"),
    ],
)
def test_unknown_gpus_are_refused(name: str, memory: int | None, message: str) -> None:
    with pytest.raises(UnknownGpuModel, match=message):
        resolve_gpu(name, memory)
