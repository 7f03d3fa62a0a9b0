"""gpu-feature-discovery's label catalogue and our extensions, as whole label sets per node and config."""

from __future__ import annotations

from typing import Any

import pytest

from gpuslice.discovery import PRESETS
from gpuslice.labels import LabelError, compute_label_set, compute_labels, nvidia_only, validate_labels
from tests.labels.helpers import A100_40, H100, config, node, view

ARCH_H100 = {
    "nvidia.com/gpu.family": "hopper",
    "nvidia.com/gpu.compute.major": "9",
    "nvidia.com/gpu.compute.minor": "0",
}
H100_MODEL = {"gpuslice.io/gpu.model-count": "1", "gpuslice.io/gpu.product.NVIDIA-H100-80GB-HBM3": "4"}
NOT_SHARED = {"nvidia.com/mig.capable": "true", "nvidia.com/mps.capable": "false"}


def whole(product: str, count: int, replicas: int, strategy: str) -> dict[str, str]:
    return {
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/gpu.replicas": str(replicas),
        "nvidia.com/gpu.sharing-strategy": strategy,
        "nvidia.com/gpu.memory": "81559",
        **ARCH_H100,
    }


def mig_attributes(
    key: str, memory: int, sms: int, slices: int, engines: tuple[int, int, int, int, int]
) -> dict[str, str]:
    copy, decoder, encoder, jpeg, ofa = engines
    return {
        f"{key}.memory": str(memory),
        f"{key}.multiprocessors": str(sms),
        f"{key}.slices.gi": str(slices),
        f"{key}.slices.ci": str(slices),
        f"{key}.engines.copy": str(copy),
        f"{key}.engines.decoder": str(decoder),
        f"{key}.engines.encoder": str(encoder),
        f"{key}.engines.jpeg": str(jpeg),
        f"{key}.engines.ofa": str(ofa),
    }


def mig_resource(key: str, product: str, count: int, replicas: int, strategy: str) -> dict[str, str]:
    return {
        f"{key}.product": product,
        f"{key}.count": str(count),
        f"{key}.replicas": str(replicas),
        f"{key}.sharing-strategy": strategy,
    }


TIME_SLICING_4 = "sharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n"
RENAMED_4 = "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources: [{name: gpu, replicas: 4}]\n"
MPS_10 = "flags: {mpsRoot: /run/nvidia/mps}\nsharing:\n  mps:\n    resources: [{name: nvidia.com/gpu, replicas: 10}]\n"
SINGLE = "flags: {migStrategy: single}\n"
MIXED = "flags: {migStrategy: mixed}\n"
INVALID_SINGLE = {
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-INVALID",
    "nvidia.com/gpu.count": "0",
    "nvidia.com/gpu.replicas": "0",
    "nvidia.com/gpu.sharing-strategy": "",
    "nvidia.com/gpu.memory": "0",
    **ARCH_H100,
    **NOT_SHARED,
    "nvidia.com/mig.strategy": "single",
    "gpuslice.io/gpu.model-count": "1",
    "gpuslice.io/gpu.product.NVIDIA-H100-80GB-HBM3": "2",
}
ONE_G = (1, 0, 0, 0, 0)  # H100 1g.10gb engines: copy, decoder, encoder, jpeg, ofa
THREE_G = (3, 2, 0, 0, 0)

CASES: list[tuple[str, list[dict[str, Any]], str, dict[str, str]]] = [
    (
        "whole GPUs",
        [{**H100, "count": 4}],
        "",
        {
            **whole("NVIDIA-H100-80GB-HBM3", 4, 1, "none"),
            **NOT_SHARED,
            **H100_MODEL,
            "gpuslice.io/gpu.isolation": "exclusive",
        },
    ),
    (
        "time-slicing, not renamed: -SHARED",
        [{**H100, "count": 4}],
        TIME_SLICING_4,
        {
            **whole("NVIDIA-H100-80GB-HBM3-SHARED", 4, 4, "time-slicing"),
            **NOT_SHARED,
            **H100_MODEL,
            "gpuslice.io/gpu.isolation": "none",
        },
    ),
    (
        "time-slicing, renamed: no -SHARED, isolation under the new name",
        [{**H100, "count": 4}],
        RENAMED_4,
        {
            **whole("NVIDIA-H100-80GB-HBM3", 4, 4, "time-slicing"),
            **NOT_SHARED,
            **H100_MODEL,
            "gpuslice.io/gpu.shared.isolation": "none",
        },
    ),
    (
        "MPS: mps.capable and the daemon's per-client limits",
        [{**H100, "count": 4}],
        MPS_10,
        {
            **whole("NVIDIA-H100-80GB-HBM3-SHARED", 4, 10, "mps"),
            "nvidia.com/mig.capable": "true",
            "nvidia.com/mps.capable": "true",
            **H100_MODEL,
            "gpuslice.io/gpu.isolation": "mps",
            "gpuslice.io/gpu.mps.memory-limit": "8155",  # 81559 MiB / 10 (NVIDIA's illustration: 8155M)
            "gpuslice.io/gpu.mps.active-thread-percentage": "10",
        },
    ),
    (
        "MIG single, valid: gpu.* describe the MIG devices",
        [{**H100, "count": 4, "mig": ["1g.10gb"] * 7}],
        SINGLE,
        {
            **mig_resource("nvidia.com/gpu", "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", 28, 1, "none"),
            **mig_attributes("nvidia.com/gpu", 10194, 16, 1, ONE_G),
            **ARCH_H100,
            **NOT_SHARED,
            "nvidia.com/mig.strategy": "single",
            **H100_MODEL,
            "gpuslice.io/gpu.isolation": "mig",
        },
    ),
    (
        "MIG single, time-sliced MIG devices",
        [{**H100, "count": 4, "mig": ["3g.40gb", "3g.40gb"]}],
        SINGLE + TIME_SLICING_4,
        {
            **mig_resource("nvidia.com/gpu", "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb-SHARED", 8, 4, "time-slicing"),
            **mig_attributes("nvidia.com/gpu", 40779, 60, 3, THREE_G),
            **ARCH_H100,
            **NOT_SHARED,
            "nvidia.com/mig.strategy": "single",
            **H100_MODEL,
            "gpuslice.io/gpu.isolation": "none",
        },
    ),
    (
        "MIG single, invalid: a MIG-enabled GPU without MIG devices",
        [{**H100, "mig": ["1g.10gb"]}, {**H100, "mig": []}],
        SINGLE,
        INVALID_SINGLE,
    ),
    (
        "MIG single, invalid: MIG enabled beside MIG disabled",
        [{**H100, "mig": ["1g.10gb"]}, H100],
        SINGLE,
        INVALID_SINGLE,
    ),
    (
        "MIG single, invalid: more than one profile",
        [{**H100, "mig": ["3g.40gb", "1g.10gb"]}, {**H100, "mig": ["1g.10gb"]}],
        SINGLE,
        INVALID_SINGLE,
    ),
    (
        "MIG single, no GPU has MIG enabled: whole-GPU labels",
        [{**H100, "count": 4}],
        SINGLE,
        {
            **whole("NVIDIA-H100-80GB-HBM3", 4, 1, "none"),
            **NOT_SHARED,
            "nvidia.com/mig.strategy": "single",
            **H100_MODEL,
            "gpuslice.io/gpu.isolation": "exclusive",
        },
    ),
    (
        "MIG mixed: parents counted in gpu.*, one label set per profile (+me -> .me)",
        [
            H100,
            {**H100, "mig": ["3g.40gb", "3g.40gb"]},
            {**H100, "mig": ["1g.10gb+me", "1g.10gb"]},
            {**H100, "mig": []},
        ],
        MIXED,
        {
            **whole("NVIDIA-H100-80GB-HBM3", 4, 1, "none"),
            **NOT_SHARED,
            "nvidia.com/mig.strategy": "mixed",
            **mig_resource("nvidia.com/mig-1g.10gb", "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", 1, 1, "none"),
            **mig_attributes("nvidia.com/mig-1g.10gb", 10194, 16, 1, ONE_G),
            **mig_resource("nvidia.com/mig-1g.10gb.me", "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me", 1, 1, "none"),
            **mig_attributes("nvidia.com/mig-1g.10gb.me", 10194, 16, 1, (1, 1, 0, 1, 1)),
            **mig_resource("nvidia.com/mig-3g.40gb", "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", 2, 1, "none"),
            **mig_attributes("nvidia.com/mig-3g.40gb", 40779, 60, 3, THREE_G),
            **H100_MODEL,
            "gpuslice.io/gpu.isolation": "exclusive",
            "gpuslice.io/mig-1g.10gb.isolation": "mig",
            "gpuslice.io/mig-1g.10gb.me.isolation": "mig",
            "gpuslice.io/mig-3g.40gb.isolation": "mig",
        },
    ),
    (
        "MIG mixed, all GPUs MIG-enabled: parents labelled without sharing (replicas 0); shared profile",
        [{**H100, "count": 4, "mig": ["1g.10gb"] * 7}],
        MIXED
        + "sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 2}, {name: mig-1g.10gb, replicas: 3}]\n",
        {
            **whole("NVIDIA-H100-80GB-HBM3", 4, 0, "none"),
            **NOT_SHARED,
            "nvidia.com/mig.strategy": "mixed",
            **mig_resource("nvidia.com/mig-1g.10gb", "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED", 28, 3, "time-slicing"),
            **mig_attributes("nvidia.com/mig-1g.10gb", 10194, 16, 1, ONE_G),
            **H100_MODEL,
            "gpuslice.io/mig-1g.10gb.isolation": "none",
        },
    ),
    (
        "MIG strategy none with MIG enabled: whole GPUs, replicas 0 as NVIDIA labels them",
        [{**H100, "count": 4, "mig": ["1g.10gb"] * 7}],
        "",
        {
            **whole("NVIDIA-H100-80GB-HBM3", 4, 0, "none"),
            **NOT_SHARED,
            **H100_MODEL,
            "gpuslice.io/gpu.isolation": "exclusive",
        },
    ),
]


@pytest.mark.parametrize(("title", "gpus", "config_text", "expected"), CASES, ids=[case[0] for case in CASES])
def test_label_sets(title: str, gpus: list[dict[str, Any]], config_text: str, expected: dict[str, str]) -> None:
    labels = compute_labels(node(*gpus), config(config_text), 1700000000)
    assert view(labels) == expected
    assert labels["nvidia.com/gfd.timestamp"] == "1700000000"
    assert validate_labels(labels) == []


def test_invalid_single_layout_warns_with_nvidia_reason() -> None:
    result = compute_label_set(node({**H100, "mig": ["1g.10gb"]}, H100), config(SINGLE), None)
    assert any("mig-strategy=single: devices with MIG enabled and disabled" in w for w in result.warnings)
    assert any("no gpuslice.io isolation labels" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("counts", "chosen"),
    [((2, 3), "NVIDIA-H100-80GB-HBM3"), ((3, 2), "NVIDIA-A100-SXM4-40GB"), ((2, 2), "NVIDIA-A100-SXM4-40GB")],
    ids=["most GPUs wins", "most GPUs wins (other order)", "tie: smallest name"],
)
def test_multi_model_node_is_labelled_deterministically(counts: tuple[int, int], chosen: str) -> None:
    a100, h100 = counts
    for order in (
        [{**A100_40, "count": a100}, {**H100, "count": h100}],
        [{**H100, "count": h100}, {**A100_40, "count": a100}],
    ):
        result = compute_label_set(node(*order), config(), None)
        labels = result.labels
        assert labels["nvidia.com/gpu.product"] == chosen
        assert labels["nvidia.com/gpu.count"] == str(h100 if "H100" in chosen else a100)
        assert labels["nvidia.com/gpu.memory"] == ("81559" if "H100" in chosen else "40960")
        assert labels["nvidia.com/gpu.family"] == ("hopper" if "H100" in chosen else "ampere")
        assert labels["gpuslice.io/gpu.model-count"] == "2"
        assert labels["gpuslice.io/gpu.product.NVIDIA-A100-SXM4-40GB"] == str(a100)
        assert labels["gpuslice.io/gpu.product.NVIDIA-H100-80GB-HBM3"] == str(h100)
        assert any(
            w.startswith("Multiple device types detected") and chosen.replace("-", " ")[:11] in w
            for w in result.warnings
        )


def test_multi_model_mps_limit_is_the_smallest_gpu_share() -> None:
    labels = compute_labels(node({**A100_40, "count": 1}, {**H100, "count": 1}), config(MPS_10), None)
    assert labels["gpuslice.io/gpu.mps.memory-limit"] == "4096"  # 40960 // 10, not 81559 // 10


def test_mixed_profile_on_two_models_takes_the_model_with_more_devices() -> None:
    gpus = [{**A100_40, "mig": ["3g.20gb", "3g.20gb"]}, {**A100_40, "mig": ["3g.20gb"]}, {**H100, "mig": ["3g.40gb"]}]
    labels = compute_labels(node(*gpus), config(MIXED), None)
    assert labels["nvidia.com/mig-3g.20gb.product"] == "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"
    assert labels["nvidia.com/mig-3g.20gb.count"] == "3"
    assert labels["nvidia.com/mig-3g.20gb.memory"] == "20480"
    assert labels["nvidia.com/mig-3g.20gb.multiprocessors"] == "42"
    assert labels["nvidia.com/mig-3g.40gb.product"] == "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"


def test_mps_on_a_mig_enabled_gpu_is_a_labelling_error() -> None:
    with pytest.raises(LabelError, match="MPS sharing is not supported for mig devices"):
        compute_labels(node({**H100, "mig": ["1g.10gb"]}), config(MPS_10), None)


def test_gpu_less_node_gets_the_timestamp_only() -> None:
    assert compute_labels(node(), config(), 42) == {"nvidia.com/gfd.timestamp": "42"}
    assert compute_labels(node(), config(), None) == {}


def test_no_timestamp_flag_and_none_timestamp_omit_it() -> None:
    n = node(H100)
    assert "nvidia.com/gfd.timestamp" not in compute_labels(n, config("flags: {gfd: {noTimestamp: true}}"), 42)
    assert "nvidia.com/gfd.timestamp" not in compute_labels(n, config(), None)


@pytest.mark.parametrize(
    ("driver", "cuda", "expected"),
    [
        ("550.107.02", "12.4", ("550", "107", "02", "12", "4")),
        ("535.54", "12.2", ("535", "54", "", "12", "2")),
    ],
)
def test_version_labels_new_and_deprecated_names(driver: str, cuda: str, expected: tuple[str, ...]) -> None:
    major, minor, revision, cuda_major, cuda_minor = expected
    labels = compute_labels(node(H100, driver_version=driver, cuda_version=cuda), config(), None)
    assert {key: value for key, value in labels.items() if key.startswith("nvidia.com/cuda.")} == {
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": revision,
        "nvidia.com/cuda.runtime.major": cuda_major,
        "nvidia.com/cuda.runtime.minor": cuda_minor,
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": revision,
        "nvidia.com/cuda.driver-version.full": driver,
        "nvidia.com/cuda.runtime-version.major": cuda_major,
        "nvidia.com/cuda.runtime-version.minor": cuda_minor,
        "nvidia.com/cuda.runtime-version.full": f"{cuda_major}.{cuda_minor}",
    }


@pytest.mark.parametrize(("driver", "cuda"), [("550", "12.4"), ("1.2.3.4", "12.4"), ("550.1", "twelve")])
def test_malformed_versions_are_labelling_errors(driver: str, cuda: str) -> None:
    with pytest.raises(LabelError, match="does not match format"):
        compute_labels(node(H100, driver_version=driver, cuda_version=cuda), config(), None)


@pytest.mark.parametrize(
    ("machine", "expected"),
    [("DGX H100", "DGX-H100"), ("PowerEdge XE9680 (rev 2)", "PowerEdge-XE9680-rev-2"), ("", "unknown")],
)
def test_machine_label_is_sanitised(machine: str, expected: str) -> None:
    labels = compute_labels(node(H100), config(), None, machine_type=machine)
    assert labels["nvidia.com/gpu.machine"] == expected
    assert labels["nvidia.com/gpu.mode"] == "compute"


def test_node_machine_type_is_used_without_an_override() -> None:
    assert compute_labels(node(H100, machine_type="DGX H100"), config(), None)["nvidia.com/gpu.machine"] == "DGX-H100"


@pytest.mark.parametrize(("gpu", "capable"), [(H100, "true"), (A100_40, "true")])
def test_mig_capable(gpu: dict[str, Any], capable: str) -> None:
    assert compute_labels(node(gpu), config(), None)["nvidia.com/mig.capable"] == capable


def test_not_mig_capable_models() -> None:
    l4 = {"model": "NVIDIA L4", "memory_mib": 23034, "compute_capability": "8.9"}
    v100 = {"model": "Tesla V100-SXM2-16GB", "memory_mib": 16384, "compute_capability": "7.0"}
    assert compute_labels(node(l4, v100), config(), None)["nvidia.com/mig.capable"] == "false"


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("text", ["", SINGLE, MIXED, TIME_SLICING_4, RENAMED_4])
def test_every_preset_and_strategy_gives_valid_kubernetes_labels(preset: str, text: str) -> None:
    from gpuslice.discovery import load_node_spec

    labels = compute_labels(load_node_spec(preset).node, config(text), 1)
    assert validate_labels(labels) == []
    assert set(nvidia_only(labels)) <= set(labels)
    assert all(key.startswith(("nvidia.com/", "gpuslice.io/")) for key in labels)
