"""Labels under `flags.migStrategy: dynamic`: placements and most-at-once per profile, GFD's labels as under mixed."""

from __future__ import annotations

from typing import Any

import pytest

from gpuslice.labels import compute_label_set, compute_labels, validate_labels
from gpuslice.labels.dynamic_profiles import dynamic_mig_labels
from tests.labels.helpers import A100_40, H100, L4, config, node, view

A30 = {"model": "NVIDIA A30", "memory_mib": 24576, "compute_capability": "8.0"}
DYNAMIC = "flags: {migStrategy: dynamic}"
MIXED = "flags: {migStrategy: mixed}"

# Per GPU (../shared/reference/mig-profiles.md §2): profile key -> (placements, most instances at once).
# A +me profile has as many placements as its plain twin, but one GPU holds a single +me instance.
H100_PER_GPU = {
    "mig-1g.10gb": (7, 7),
    "mig-1g.10gb.me": (7, 1),
    "mig-1g.20gb": (4, 4),
    "mig-2g.20gb": (3, 3),
    "mig-3g.40gb": (2, 2),
    "mig-4g.40gb": (1, 1),
    "mig-7g.80gb": (1, 1),
}
A30_PER_GPU = {
    "mig-1g.6gb": (4, 4),
    "mig-1g.6gb.me": (4, 1),
    "mig-2g.12gb": (2, 2),
    "mig-2g.12gb.me": (2, 1),
    "mig-4g.24gb": (1, 1),
}
A100_40_PER_GPU = {
    "mig-1g.5gb": (7, 7),
    "mig-1g.5gb.me": (7, 1),
    "mig-1g.10gb": (4, 4),
    "mig-2g.10gb": (3, 3),
    "mig-3g.20gb": (2, 2),
    "mig-4g.20gb": (1, 1),
    "mig-7g.40gb": (1, 1),
}


def expected(gpus: int, *per_gpu: tuple[dict[str, tuple[int, int]], int]) -> dict[str, str]:
    """The labels for `gpus` dynamic GPUs, from per-GPU tables each times its GPU count (summed by profile)."""
    totals: dict[str, tuple[int, int]] = {}
    for table, count in per_gpu:
        for key, (placements, most) in table.items():
            before = totals.get(key, (0, 0))
            totals[key] = (before[0] + placements * count, before[1] + most * count)
    labels = {"gpuslice.io/mig.dynamic-gpus": str(gpus)}
    for key, (placements, most) in totals.items():
        labels[f"gpuslice.io/{key}.placements"] = str(placements)
        labels[f"gpuslice.io/{key}.max-instances"] = str(most)
    return labels


CASES: list[tuple[str, list[dict[str, Any]], str, dict[str, str]]] = [
    ("two empty H100s", [{**H100, "count": 2, "mig": []}], DYNAMIC, expected(2, (H100_PER_GPU, 2))),
    ("one A30", [{**A30, "mig": []}], DYNAMIC, expected(1, (A30_PER_GPU, 1))),
    (
        "H100 and A100 share 1g.10gb by name",
        [{**H100, "mig": []}, {**A100_40, "count": 2, "mig": []}],
        DYNAMIC,
        expected(3, (H100_PER_GPU, 1), (A100_40_PER_GPU, 2)),
    ),
    (
        "a GPU with instances counts whole (they may be the plugin's own)",
        [{**H100, "mig": ["3g.40gb", "1g.10gb"]}],
        DYNAMIC,
        expected(1, (H100_PER_GPU, 1)),
    ),
    (
        "MIG-disabled and non-MIG GPUs are not counted",
        [{**H100, "mig": []}, {**H100, "count": 2}, {**L4, "count": 1}],
        DYNAMIC,
        expected(1, (H100_PER_GPU, 1)),
    ),
    ("no MIG-enabled GPU", [{**H100, "count": 2}], DYNAMIC, {"gpuslice.io/mig.dynamic-gpus": "0"}),
    ("mixed: none of these labels", [{**H100, "count": 2, "mig": []}], MIXED, {}),
    ("none: none of these labels", [{**H100, "count": 2}], "", {}),
]


@pytest.mark.parametrize(("title", "gpus", "config_text", "want"), CASES, ids=[case[0] for case in CASES])
def test_dynamic_labels(title: str, gpus: list[dict[str, Any]], config_text: str, want: dict[str, str]) -> None:
    assert dynamic_mig_labels(node(*gpus), config(config_text)) == want


def test_gpu_less_node_gets_none() -> None:
    assert dynamic_mig_labels(node(), config(DYNAMIC)) == {}


def test_a_dynamic_node_keeps_gfds_gpu_labels_and_adds_no_mig_profile_labels() -> None:
    labels = view(compute_labels(node({**H100, "count": 2, "mig": []}, {**H100, "count": 2}), config(DYNAMIC), None))
    mixed = view(compute_labels(node({**H100, "count": 2, "mig": []}, {**H100, "count": 2}), config(MIXED), None))
    gpu_labels = {k: v for k, v in labels.items() if k.startswith("nvidia.com/gpu.")}
    assert gpu_labels == {k: v for k, v in mixed.items() if k.startswith("nvidia.com/gpu.")}
    assert gpu_labels["nvidia.com/gpu.count"] == "4" and gpu_labels["nvidia.com/gpu.replicas"] == "1"
    assert labels["nvidia.com/mig.strategy"] == "dynamic" and labels["nvidia.com/mig.capable"] == "true"
    assert not [key for key in labels if key.startswith("nvidia.com/mig-")]
    assert labels["gpuslice.io/mig-3g.40gb.isolation"] == "mig"
    assert labels["gpuslice.io/mig-3g.40gb.placements"] == "4"
    assert labels["gpuslice.io/mig-1g.10gb.me.max-instances"] == "2"


@pytest.mark.parametrize("gpu", [H100, A30, A100_40])
def test_dynamic_label_sets_are_valid_kubernetes_labels(gpu: dict[str, Any]) -> None:
    result = compute_label_set(node({**gpu, "count": 8, "mig": []}), config(DYNAMIC), 1700000000)
    assert validate_labels(result.labels) == [] and result.warnings == ()


def test_instances_the_plugin_created_keep_every_profiles_isolation_label() -> None:
    # On NVML a GPU the plugin has carved shows instances; the labeller must still see it as dynamic.
    carved = view(compute_labels(node({**H100, "mig": ["3g.40gb"]}), config(DYNAMIC), None))
    empty = view(compute_labels(node({**H100, "mig": []}), config(DYNAMIC), None))
    isolation = {key: value for key, value in empty.items() if key.endswith(".isolation")}
    assert len(isolation) == len(H100_PER_GPU)
    assert {key: carved.get(key) for key in isolation} == isolation
