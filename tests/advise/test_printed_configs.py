"""Every config `advise` can print is one `gpuslice plugin` accepts, and every MIG layout fits the GPU."""

from __future__ import annotations

import itertools
import json

import pytest
import yaml

from gpuslice.advise import (
    LATENCIES,
    TENANCIES,
    Recommendation,
    TenantNeeds,
    config_mapping,
    config_yaml,
    node_spec_mapping,
    recommend,
    resolve_gpu,
)
from gpuslice.config import parse_config_text
from gpuslice.discovery import parse_node_spec
from gpuslice.gpu import assign_placements

MODELS = [
    "NVIDIA H100 80GB HBM3",
    "NVIDIA H100 NVL",
    "NVIDIA H200",
    "NVIDIA A100-SXM4-40GB",
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA A30",
    "NVIDIA L4",
    "Tesla T4",
    "Tesla V100-SXM2-16GB",
]
MEMORY_GIB = [0.25, 3, 5, 9, 10, 12, 17.5, 20, 35, 40, 70, 100, 200]
PER_GPU = [1, 2, 3, 4, 7, 8, 16, 64]


def _every_recommendation(model: str) -> list[Recommendation]:
    gpu = resolve_gpu(model)
    grid = itertools.product(LATENCIES, TENANCIES, MEMORY_GIB, PER_GPU)
    return [recommend(TenantNeeds(*needs), gpu) for needs in grid]


@pytest.mark.parametrize("model", MODELS)
def test_every_printed_config_loads_and_says_what_was_advised(model: str) -> None:
    distinct: dict[str, Recommendation] = {}
    for rec in _every_recommendation(model):
        distinct.setdefault(json.dumps(config_mapping(rec), sort_keys=True), rec)
    assert "whole" in {rec.mechanism for rec in distinct.values()}
    for rec in distinct.values():
        loaded = parse_config_text(config_yaml(rec), "advice")
        assert loaded.warnings == ()
        config = loaded.config
        replicated = config.sharing.replicated
        if rec.mechanism == "mig":
            assert config.flags.mig_strategy == "mixed" and config.sharing.strategy == "none"
        elif rec.mechanism == "whole":
            assert config.flags.mig_strategy == "none" and config.sharing.strategy == "none"
        else:
            assert config.sharing.strategy == rec.mechanism and replicated is not None
            assert replicated.resources[0].replicas == rec.workloads_per_gpu >= 2
            assert replicated.rename_by_default is True and replicated.fail_requests_greater_than_one is True
        if rec.mechanism == "mps":
            assert config.flags.mps_root == "/run/nvidia/mps"


@pytest.mark.parametrize("model", MODELS)
def test_every_advice_keeps_its_promises(model: str) -> None:
    for rec in _every_recommendation(model):
        needs, gpu = rec.needs, rec.gpu
        assert 1 <= rec.workloads_per_gpu <= needs.per_gpu
        if needs.tenancy == "multi-tenant":
            assert rec.mechanism in ("whole", "mig"), "tenants that do not trust each other never share a context"
        if rec.mechanism in ("mps", "time-slicing"):
            assert rec.workloads_per_gpu * needs.memory_mib <= gpu.memory_mib
        if rec.mps is not None:
            assert rec.mps.replicas <= gpu.mps_max_clients
            assert rec.mps.pinned_memory_limit_mib >= needs.memory_mib
        if rec.mechanism == "whole":
            assert rec.gpus_per_workload * gpu.memory_mib >= needs.memory_mib


@pytest.mark.parametrize("model", [m for m in MODELS if resolve_gpu(m).mig_catalogue is not None])
def test_every_mig_layout_fits_and_builds_a_node(model: str) -> None:
    layouts = 0
    for rec in _every_recommendation(model):
        if rec.mig is None:
            continue
        layouts += 1
        catalogue = rec.mig.catalogue
        assert rec.mig.profile_memory_mib >= rec.needs.memory_mib
        assert tuple(assign_placements(catalogue, list(rec.mig.layout))) == rec.mig.starts
        spans = sorted(
            (start, catalogue.profile(name).memory_slices)
            for name, start in zip(rec.mig.layout, rec.mig.starts, strict=True)
        )
        assert all(a + size <= b for (a, size), (b, _) in itertools.pairwise(spans)), "instances overlap"
        mapping = node_spec_mapping(rec)
        assert mapping is not None
        node = parse_node_spec(yaml.safe_load(yaml.safe_dump(mapping)), "advice").node
        assert [m.profile for m in node.gpus[0].mig_instances] == list(rec.mig.layout)
    assert layouts > 0
