"""MIG placement rules: the combinations table of the MIG user guide, on each 8-slice model."""

from __future__ import annotations

import pytest

from gpuslice.gpu import (
    CATALOGUES,
    InvalidMigLayout,
    assign_placements,
    catalogue_for,
    free_placements,
)
from gpuslice.gpu.mig import A30_24GB, A100_40GB

VALID = [
    ["7g.40gb"],
    ["4g.20gb", "3g.20gb"],
    ["4g.20gb", "2g.10gb", "1g.5gb"],
    ["4g.20gb", "1g.5gb", "1g.5gb", "1g.5gb"],
    ["4g.20gb", "1g.10gb", "1g.5gb"],
    ["3g.20gb", "3g.20gb"],
    ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"],
    ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"],  # order given does not matter: largest placed first
    ["3g.20gb", "2g.10gb", "2g.10gb"],
    ["2g.10gb", "2g.10gb", "2g.10gb", "1g.5gb"],
    ["2g.10gb"] + ["1g.5gb"] * 5,
    ["1g.5gb"] * 7,
    ["1g.10gb"] * 4,
]
INVALID = [
    ["4g.20gb", "4g.20gb"],
    ["3g.20gb", "3g.20gb", "1g.5gb"],
    ["4g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"],
    ["2g.10gb", "2g.10gb", "2g.10gb", "1g.5gb", "1g.5gb"],
    ["1g.10gb"] * 4 + ["1g.5gb"],
    ["7g.40gb", "1g.5gb"],
    ["1g.5gb+me", "1g.5gb+me"],
    ["1g.5gb"] * 8,
]


@pytest.mark.parametrize("layout", VALID, ids=lambda layout: "+".join(layout))
def test_valid_layouts_get_disjoint_placements(layout: list[str]) -> None:
    starts = assign_placements(A100_40GB, layout)
    used: set[int] = set()
    for name, start in zip(layout, starts, strict=True):
        profile = A100_40GB.profile(name)
        assert start in profile.starts
        slices = set(range(start, start + profile.memory_slices))
        assert not slices & used
        used |= slices


@pytest.mark.parametrize("layout", INVALID, ids=lambda layout: "+".join(layout))
def test_invalid_layouts_are_refused_with_a_reason(layout: list[str]) -> None:
    with pytest.raises(InvalidMigLayout, match=r"A100-40GB|at most"):
        assign_placements(A100_40GB, layout)


def test_unknown_profile_names_the_known_ones() -> None:
    with pytest.raises(InvalidMigLayout, match=r"'9g.99gb'.*known: 1g.5gb"):
        assign_placements(A100_40GB, ["9g.99gb"])


def test_a_3g_leaves_three_1g_placements_on_h100() -> None:
    h100 = catalogue_for("NVIDIA H100 80GB HBM3", 81559)
    assert h100 is not None
    one_g = h100.profile("1g.10gb")
    assert free_placements(h100, one_g, [(0, 4)]) == [4, 5, 6]


@pytest.mark.parametrize(
    ("product", "memory_mib", "key"),
    [
        ("NVIDIA A100-SXM4-40GB", 40960, "A100-40GB"),
        ("NVIDIA A100-SXM4-80GB", 81920, "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", 81920, "A100-80GB"),
        ("NVIDIA H100 80GB HBM3", 81559, "H100-80GB"),
        ("NVIDIA H100 NVL", 95830, "H100-94GB"),
        ("NVIDIA H200", 143771, "H200-141GB"),
        ("NVIDIA A30", 24576, "A30-24GB"),
    ],
)
def test_catalogue_lookup_by_product(product: str, memory_mib: int, key: str) -> None:
    catalogue = catalogue_for(product, memory_mib)
    assert catalogue is not None and catalogue.model_key == key


def test_non_mig_gpus_have_no_catalogue() -> None:
    assert catalogue_for("Tesla T4", 15360) is None


def test_a30_maximal_sets() -> None:
    assert assign_placements(A30_24GB, ["2g.12gb", "1g.6gb", "1g.6gb"]) == [0, 2, 3]
    with pytest.raises(InvalidMigLayout):
        assign_placements(A30_24GB, ["4g.24gb", "1g.6gb"])


def test_every_catalogue_names_its_7g_by_total_memory() -> None:
    for catalogue in CATALOGUES:
        full = max(catalogue.profiles, key=lambda p: p.memory_slices)
        assert full.memory_slices == catalogue.memory_slices
