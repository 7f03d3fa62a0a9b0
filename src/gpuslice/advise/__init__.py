"""Recommend a GPU sharing mechanism for a tenant and print the config that implements it (pure logic)."""

from gpuslice.advise.decide import (
    LATENCIES,
    OVERLAY,
    RULES,
    TENANCIES,
    AdviceError,
    MigPlan,
    MpsPlan,
    Recommendation,
    TenantNeeds,
    max_instances,
    plan_mig,
    recommend,
)
from gpuslice.advise.gpu_models import GpuFacts, UnknownGpuModel, resolve_gpu
from gpuslice.advise.isolation import ISOLATION, MECHANISMS, IsolationProfile, Mechanism
from gpuslice.advise.render import (
    as_json,
    config_mapping,
    config_yaml,
    mig_create_command,
    node_spec_mapping,
    node_spec_yaml,
    report_text,
)

__all__ = [
    "ISOLATION",
    "LATENCIES",
    "MECHANISMS",
    "OVERLAY",
    "RULES",
    "TENANCIES",
    "AdviceError",
    "GpuFacts",
    "IsolationProfile",
    "Mechanism",
    "MigPlan",
    "MpsPlan",
    "Recommendation",
    "TenantNeeds",
    "UnknownGpuModel",
    "as_json",
    "config_mapping",
    "config_yaml",
    "max_instances",
    "mig_create_command",
    "node_spec_mapping",
    "node_spec_yaml",
    "plan_mig",
    "recommend",
    "report_text",
    "resolve_gpu",
]
