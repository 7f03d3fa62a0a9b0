"""The sanitising rule, the family table as labels, and the Kubernetes label syntax checks."""

from __future__ import annotations

import pytest

from gpuslice.labels import compute_labels, sanitise, validate_labels
from gpuslice.labels.names import label_key_problem, label_value_problem, short_resource_name
from tests.labels.helpers import config, node


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
        ("A100-SXM4-40GB", "A100-SXM4-40GB"),
        ("  Tesla  V100-SXM2-16GB ", "Tesla-V100-SXM2-16GB"),  # runs of blanks become one '-'
        ("NVIDIA GeForce RTX 4090 (Laptop)", "NVIDIA-GeForce-RTX-4090-Laptop"),  # parentheses deleted
        ("A100/PCIe+x", "A100PCIex"),  # '/' and '+' deleted, not replaced
        ("Quadro_RTX.8000", "Quadro_RTX.8000"),  # '_' and '.' kept
        ("tab\tand\nnewline", "tabandnewline"),  # only the space separates words; tabs are deleted
        ("Ä100 ünïcode", "100-ncode"),  # only ASCII letters survive
        ("", ""),
    ],
)
def test_sanitise(raw: str, expected: str) -> None:
    assert sanitise(raw) == expected


def test_product_label_uses_the_sanitising_rule() -> None:
    gpu = {"model": "NVIDIA GeForce RTX 4090 (Laptop)", "memory_mib": 16376, "compute_capability": "8.9"}
    assert compute_labels(node(gpu), config(), None)["nvidia.com/gpu.product"] == "NVIDIA-GeForce-RTX-4090-Laptop"


@pytest.mark.parametrize(
    ("capability", "family"),
    [
        ("1.3", "tesla"),
        ("2.1", "fermi"),
        ("3.7", "kepler"),
        ("4.0", "undefined"),
        ("5.2", "maxwell"),
        ("6.1", "pascal"),
        ("7.0", "volta"),
        ("7.2", "volta"),
        ("7.5", "turing"),
        ("8.0", "ampere"),
        ("8.6", "ampere"),
        ("8.9", "ada-lovelace"),
        ("9.0", "hopper"),
        ("10.0", "blackwell"),
        ("11.0", "undefined"),
        ("12.0", "blackwell"),
        ("13.0", "rubin"),
        ("14.0", "undefined"),
    ],
)
def test_family_table(capability: str, family: str) -> None:
    gpu = {"model": "Some GPU", "memory_mib": 1024, "compute_capability": capability}
    labels = compute_labels(node(gpu), config(), None)
    major, minor = capability.split(".")
    assert labels["nvidia.com/gpu.family"] == family
    assert (labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"]) == (major, minor)


def test_compute_capability_major_zero_omits_family_and_compute() -> None:
    labels = compute_labels(node({"model": "Odd", "memory_mib": 1024, "compute_capability": "0.0"}), config(), None)
    assert not {"nvidia.com/gpu.family", "nvidia.com/gpu.compute.major", "nvidia.com/gpu.compute.minor"} & set(labels)


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("nvidia.com/gpu.product", True),
        ("gpuslice.io/mig-1g.10gb.me.isolation", True),
        ("gpuslice.io/gpu.product.NVIDIA-H100-80GB-HBM3", True),
        ("Nvidia.com/gpu", False),  # prefix must be lower case
        ("gpuslice.io/" + "x" * 64, False),
        ("gpuslice.io/gpu.product.-bad", True),
        ("gpuslice.io/gpu.product.bad-", False),
        ("gpuslice.io/", False),
    ],
)
def test_label_key_syntax(key: str, ok: bool) -> None:
    assert (label_key_problem(key) is None) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [("", True), ("NVIDIA-H100-80GB-HBM3-SHARED", True), ("550.127.08", True), ("a b", False), ("x" * 64, False)],
)
def test_label_value_syntax(value: str, ok: bool) -> None:
    assert (label_value_problem("k", value) is None) is ok


def test_long_product_name_is_reported_not_dropped() -> None:
    model = "NVIDIA " + "Very Long Product Name " * 3
    labels = compute_labels(node({"model": model, "memory_mib": 1024, "compute_capability": "9.0"}), config(), None)
    assert labels["nvidia.com/gpu.product"] == sanitise(model)  # NVIDIA's label is kept as NVIDIA writes it
    assert any("nvidia.com/gpu.product" in problem for problem in validate_labels(labels))
    assert not any(key.startswith("gpuslice.io/gpu.product.") for key in labels)  # ours is skipped


@pytest.mark.parametrize(
    ("resource", "short"),
    [
        ("nvidia.com/gpu", "gpu"),
        ("nvidia.com/gpu.shared", "gpu.shared"),
        ("nvidia.com/mig-1g.10gb.me", "mig-1g.10gb.me"),
    ],
)
def test_short_resource_name(resource: str, short: str) -> None:
    assert short_resource_name(resource) == short
