"""Dynamic MIG geometry: placement overlap rules (H100, A30), held/blocked slots, atomic reserve, the plan."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from gpuslice.config import ConfigError, parse_config_text
from gpuslice.discovery import parse_node_spec
from gpuslice.gpu import CATALOGUES, Node
from gpuslice.gpu.mig import A30_24GB, H100_80GB, H200_141GB
from gpuslice.sharing import Isolation, SharingError
from gpuslice.sharing.dynamic.geometry import (
    MAX_SLOT_ID_LENGTH,
    SLOT_ID,
    DynamicMigGeometry,
    GeometryConflict,
    SlotUnavailable,
    open_starts,
    slot_id,
)
from gpuslice.sharing.dynamic.plan import build_dynamic_plan, dynamic_resources

H100 = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0"}
A30 = {"model": "NVIDIA A30", "memory_mib": 24576, "compute_capability": "8.0"}
DYNAMIC = "flags: {migStrategy: dynamic}"

H100_NAMES = ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")

# held (profile, start) on one H100 -> open starts of every profile, in H100_NAMES order
H100_CASES: list[tuple[str, list[tuple[str, int]], list[list[int]]]] = [
    ("empty", [], [[0, 1, 2, 3, 4, 5, 6], [0, 1, 2, 3, 4, 5, 6], [0, 2, 4, 6], [0, 2, 4], [0, 4], [0], [0]]),
    # the reference's observable effect: one 3g.40gb drops the free 1g.10gb count from 7 to 3
    ("3g at 0", [("3g.40gb", 0)], [[4, 5, 6], [4, 5, 6], [4, 6], [4], [4], [], []]),
    ("3g at 4", [("3g.40gb", 4)], [[0, 1, 2, 3], [0, 1, 2, 3], [0, 2], [0, 2], [0], [0], []]),
    ("+me takes the media engines", [("1g.10gb+me", 2)], [[0, 1, 3, 4, 5, 6], [], [0, 4, 6], [0, 4], [4], [], []]),
    ("1g at 6", [("1g.10gb", 6)], [[0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5], [0, 2, 4], [0, 2, 4], [0], [0], []]),
    ("7g takes all", [("7g.80gb", 0)], [[], [], [], [], [], [], []]),
    ("4g+2g+1g leaves no 1g start", [("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)], [[]] * 7),
    ("four 1g.20gb fill it", [("1g.20gb", s) for s in (0, 2, 4, 6)], [[]] * 7),
    ("seven 1g.10gb: slice 7 alone is no placement", [("1g.10gb", s) for s in range(7)], [[]] * 7),
    ("2g at 2", [("2g.20gb", 2)], [[0, 1, 4, 5, 6], [0, 1, 4, 5, 6], [0, 4, 6], [0, 4], [4], [], []]),
]

A30_NAMES = ("1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb")
A30_CASES: list[tuple[str, list[tuple[str, int]], list[list[int]]]] = [
    ("empty", [], [[0, 1, 2, 3], [0, 1, 2, 3], [0, 2], [0, 2], [0]]),
    ("2g at 0", [("2g.12gb", 0)], [[2, 3], [2, 3], [2], [2], []]),
    ("1g+me blocks every +me", [("1g.6gb+me", 3)], [[0, 1, 2], [], [0], [], []]),
    ("2g+me blocks every +me", [("2g.12gb+me", 2)], [[0, 1], [], [0], [], []]),
    ("4g takes all", [("4g.24gb", 0)], [[], [], [], [], []]),
    ("two 1g leave one 2g", [("1g.6gb", 0), ("1g.6gb", 1)], [[2, 3], [2, 3], [2], [2], []]),
]


@pytest.mark.parametrize(("case", "held", "expected"), H100_CASES, ids=[c[0] for c in H100_CASES])
def test_h100_overlap_rules(case: str, held: list[tuple[str, int]], expected: list[list[int]]) -> None:
    assert {n: open_starts(H100_80GB, held, n) for n in H100_NAMES} == dict(zip(H100_NAMES, expected, strict=True))


@pytest.mark.parametrize(("case", "held", "expected"), A30_CASES, ids=[c[0] for c in A30_CASES])
def test_a30_overlap_rules(case: str, held: list[tuple[str, int]], expected: list[list[int]]) -> None:
    assert {n: open_starts(A30_24GB, held, n) for n in A30_NAMES} == dict(zip(A30_NAMES, expected, strict=True))


def node_of(*gpus: dict[str, Any]) -> Node:
    return parse_node_spec({"name": "dyn", "gpus": list(gpus)}).node


def geometry_of(node: Node) -> DynamicMigGeometry:
    return DynamicMigGeometry(dynamic_resources(node), clock=lambda: 1000.0)


def test_slot_ids_fit_v1beta1_and_name_the_gpu() -> None:
    gpu = "GPU-5b1c2c6e-8a51-4bd4-9a51-6770757c6963"
    longest = max(len(slot_id(gpu, p, s)) for c in CATALOGUES for p in c.profiles for s in p.starts)
    assert longest == 53 <= MAX_SLOT_ID_LENGTH
    device_id = slot_id(gpu, H200_141GB.profile("1g.18gb+me"), 6)
    assert device_id == "GPU-5b1c2c6e-8a51-4bd4-9a51-6770757c6963/1g.18gb.me@6"
    match = SLOT_ID.fullmatch(device_id)
    assert match is not None and match.groups() == ("GPU-5b1c2c6e-8a51-4bd4-9a51-6770757c6963", "1g.18gb.me", "6")
    assert "::" not in device_id  # never mistaken for a replica


def test_every_placement_of_every_profile_is_advertised() -> None:
    node = node_of({**H100, "count": 2, "mig": []}, {**A30, "mig": []})
    resources = {r.name: r for r in dynamic_resources(node)}
    assert len(resources["nvidia.com/mig-1g.10gb"].devices) == 14
    assert len(resources["nvidia.com/mig-1g.10gb.me"].devices) == 14
    assert len(resources["nvidia.com/mig-7g.80gb"].devices) == 2
    assert len(resources["nvidia.com/mig-2g.12gb.me"].devices) == 2
    assert resources["nvidia.com/mig-3g.40gb"].derivation == "2 GPUs x 2 placements of 3g.40gb = 4"
    for resource in resources.values():
        assert resource.kind == "mig" and resource.isolation is Isolation.MIG
        for device in resource.devices:
            assert device.mig is not None and device.mig.gi < 0 and device.mig.uuid == device.id


def test_allocating_blocks_overlaps_on_every_profile_and_release_restores() -> None:
    node = node_of({**H100, "count": 2, "mig": []})
    geometry = geometry_of(node)
    gpu0, gpu1 = (g.uuid for g in node.gpus)
    three = slot_id(gpu0, H100_80GB.profile("3g.40gb"), 0)
    geometry.reserve([three])
    assert geometry.free_count("nvidia.com/mig-1g.10gb", gpu0) == 3
    assert geometry.free_count("nvidia.com/mig-1g.10gb", gpu1) == 7
    blocked = geometry.unavailable("nvidia.com/mig-1g.10gb")
    assert blocked == {slot_id(gpu0, H100_80GB.profile("1g.10gb"), s) for s in range(4)}
    assert geometry.unavailable("nvidia.com/mig-3g.40gb") == frozenset()  # the held one stays Healthy for its pod
    assert geometry.unavailable("nvidia.com/mig-7g.80gb") == {slot_id(gpu0, H100_80GB.profile("7g.80gb"), 0)}
    assert geometry.why_unavailable(three) == "already allocated"
    assert "held by " + three in str(geometry.why_unavailable(slot_id(gpu0, H100_80GB.profile("4g.40gb"), 0)))
    released = geometry.release([three])
    assert [h.slot_id for h in released] == [three]
    assert geometry.free_count("nvidia.com/mig-1g.10gb", gpu0) == 7
    assert all(not geometry.unavailable(name) for name in geometry.resource_names)


def test_reserve_is_all_or_nothing() -> None:
    node = node_of({**H100, "mig": []})
    geometry = geometry_of(node)
    gpu = node.gpus[0].uuid
    first = slot_id(gpu, H100_80GB.profile("3g.40gb"), 0)
    clash = slot_id(gpu, H100_80GB.profile("2g.20gb"), 2)
    with pytest.raises(SlotUnavailable, match="memory slices 0-3 are held by"):
        geometry.reserve([first, clash])
    assert geometry.held_count == 0
    with pytest.raises(SlotUnavailable, match="requested twice"):
        geometry.reserve([first, first])
    with pytest.raises(SlotUnavailable, match="not a dynamic MIG placement"):
        geometry.reserve(["GPU-nope/1g.10gb@0"])
    me = [slot_id(gpu, H100_80GB.profile("1g.10gb+me"), s) for s in (0, 5)]
    with pytest.raises(SlotUnavailable, match="media engines"):
        geometry.reserve(me)


def test_listeners_and_generation_follow_changes() -> None:
    geometry = geometry_of(node_of({**H100, "mig": []}))
    calls: list[int] = []
    remove = geometry.add_listener(lambda: calls.append(geometry.generation))
    slot = slot_id(geometry.gpus[0].uuid, H100_80GB.profile("1g.10gb"), 3)
    geometry.reserve([slot])
    geometry.release([slot])
    geometry.release([slot])  # nothing left to release: no change, no call
    remove()
    geometry.reserve([slot])
    assert calls == [1, 2]


def test_restore_refuses_records_that_cannot_coexist() -> None:
    node = node_of({**H100, "mig": []})
    geometry = geometry_of(node)
    gpu = node.gpus[0].uuid
    a = geometry.reserve([slot_id(gpu, H100_80GB.profile("3g.40gb"), 0)])[0]
    holding = geometry.holdings()[0]
    geometry.release([a.id])
    other = geometry_of(node)
    b = other.reserve([slot_id(gpu, H100_80GB.profile("2g.20gb"), 2)])[0]
    clash = other.holdings()[0]
    with pytest.raises(GeometryConflict, match=b.id):
        geometry.restore([holding, clash])
    assert geometry.held_count == 0
    geometry.restore([holding])
    assert [h.slot_id for h in geometry.holdings()] == [a.id]


def test_preferred_packs_and_skips_conflicts() -> None:
    node = node_of({**H100, "count": 2, "mig": []})
    geometry = geometry_of(node)
    gpu0, gpu1 = (g.uuid for g in node.gpus)
    one = H100_80GB.profile("1g.10gb")
    geometry.reserve([slot_id(gpu1, one, 0)])
    available = [slot_id(g, one, s) for g in (gpu0, gpu1) for s in range(1, 7)]
    # GPU 1 is already in use: pack there, lowest start first
    assert geometry.preferred(available, [], 2) == (slot_id(gpu1, one, 1), slot_id(gpu1, one, 2))
    me = H100_80GB.profile("1g.10gb+me")
    picks = geometry.preferred([slot_id(gpu0, me, s) for s in range(7)], [], 2)
    assert picks == (slot_id(gpu0, me, 0),)  # a second +me on the same GPU is impossible


def test_concurrent_reserves_never_overlap() -> None:
    node = node_of({**H100, "count": 2, "mig": []})
    geometry = geometry_of(node)
    every = [d.id for r in dynamic_resources(node) for d in r.devices]
    won: list[str] = []
    lock = threading.Lock()

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(60):
            choice = rng.choice(every)
            try:
                geometry.reserve([choice])
            except SlotUnavailable:
                continue
            with lock:
                won.append(choice)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    slots = [geometry.slot(i) for i in won]
    assert len(set(won)) == len(won) == geometry.held_count
    for i, a in enumerate(slots):
        for b in slots[i + 1 :]:
            assert a is not None and b is not None
            assert a.gpu.uuid != b.gpu.uuid or not a.mask & b.mask, (a.id, b.id)


def test_dynamic_plan_keeps_whole_gpus_and_fixed_layouts() -> None:
    node = node_of({**H100}, {**H100, "mig": ["1g.10gb"] * 7}, {**H100, "mig": []})
    config = parse_config_text(DYNAMIC).config
    assert config.flags.mig_strategy == "dynamic"
    plan = build_dynamic_plan(node, config)
    assert plan.names[0] == "nvidia.com/gpu"
    one = plan.resource("nvidia.com/mig-1g.10gb")
    assert len(one.devices) == 14  # 7 fixed MIG devices + 7 placements of the dynamic GPU
    assert sum(1 for d in one.devices if SLOT_ID.fullmatch(d.id)) == 7
    assert len(plan.resource("nvidia.com/mig-7g.80gb").devices) == 1
    assert all(len(d.id) <= MAX_SLOT_ID_LENGTH for r in plan.resources for d in r.devices)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            "flags: {migStrategy: dynamic}\nsharing: {timeSlicing: {resources: [{name: mig-3g.40gb, replicas: 2}]}}",
            r"sharing.timeSlicing.resources\[0\].name: nvidia.com/mig-3g.40gb is a dynamic MIG resource",
        ),
        (
            "flags: {migStrategy: dynamic, mpsRoot: /run/mps}\nsharing: {mps: {resources: [{name: gpu, replicas: 2}]}}",
            "MPS is not supported together with dynamic MIG",
        ),
    ],
)
def test_dynamic_plan_refuses_sharing_placements(config: str, message: str) -> None:
    node = node_of({**H100}, {**H100, "mig": []})
    with pytest.raises(SharingError, match=message):
        build_dynamic_plan(node, parse_config_text(config).config)


def test_unknown_strategy_keeps_nvidia_text() -> None:
    with pytest.raises(ConfigError, match="unknown MIG strategy: dynamics"):
        parse_config_text("flags: {migStrategy: dynamics}")


def test_a_gpu_our_checkpoint_claims_stays_dynamic_with_live_instances() -> None:
    # After a restart on hardware the instances we created are still there; they must not become a fixed layout.
    node = node_of({**H100, "mig": ["3g.40gb"]})
    config = parse_config_text(DYNAMIC).config
    assert "nvidia.com/mig-1g.10gb" not in build_dynamic_plan(node, config).names
    plan = build_dynamic_plan(node, config, claimed={node.gpus[0].uuid})
    three = plan.resource("nvidia.com/mig-3g.40gb")
    assert [d.id for d in three.devices] == [
        slot_id(node.gpus[0].uuid, H100_80GB.profile("3g.40gb"), s) for s in (0, 4)
    ]
    assert len(plan.resource("nvidia.com/mig-1g.10gb").devices) == 7
