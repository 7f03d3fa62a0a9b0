"""Health per physical device: a GPU takes every replica and MIG instance on it along."""

from __future__ import annotations

import re

import pytest

from gpuslice.config import parse_config_text
from gpuslice.discovery import load_node_spec
from gpuslice.sharing import HealthStore, UnknownHealthTarget, build_resources

TS_MIG = "flags: {migStrategy: mixed}\nsharing: {timeSlicing: {resources: [{name: mig-1g.10gb, replicas: 2}]}}"


def test_an_unhealthy_gpu_takes_all_its_replicas() -> None:
    node = load_node_spec("preset:h100x4").node
    config = parse_config_text("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}").config
    resource = build_resources(node, config).resources[0]
    store = HealthStore(node)
    store.mark_unhealthy(node.gpus[2].uuid, "Xid 79")
    assert store.unhealthy_ids(resource) == {f"{node.gpus[2].uuid}::{n}" for n in range(4)}
    assert store.reason(resource.by_id[f"{node.gpus[2].uuid}::1"]) == "Xid 79"


def test_an_unhealthy_gpu_takes_every_mig_instance_and_their_replicas() -> None:
    node = load_node_spec("preset:h100x4-mig").node
    resource = build_resources(node, parse_config_text(TS_MIG).config).resources[0]
    store = HealthStore(node)
    store.mark_unhealthy(node.gpus[0].uuid)
    unhealthy = store.unhealthy_ids(resource)
    assert len(unhealthy) == 7 * 2
    assert {resource.by_id[i].gpu.uuid for i in unhealthy} == {node.gpus[0].uuid}


def test_an_unhealthy_mig_instance_stays_local_and_recovers_on_its_own() -> None:
    node = load_node_spec("preset:h100x4-mig").node
    resource = build_resources(node, parse_config_text(TS_MIG).config).resources[0]
    mig = node.gpus[1].mig_instances[3]
    store = HealthStore(node)
    store.mark_unhealthy(f"{mig.uuid}::1")  # any advertised ID names its physical device
    assert store.unhealthy_ids(resource) == {f"{mig.uuid}::0", f"{mig.uuid}::1"}
    store.mark_unhealthy(node.gpus[1].uuid)
    store.mark_healthy(node.gpus[1].uuid)
    assert store.unhealthy_ids(resource) == {f"{mig.uuid}::0", f"{mig.uuid}::1"}, "the MIG mark is its own"
    store.mark_healthy(mig.uuid)
    assert store.unhealthy_ids(resource) == frozenset()


def test_changes_bump_the_generation_and_call_listeners_once() -> None:
    node = load_node_spec(None).node
    store = HealthStore(node)
    calls: list[int] = []
    remove = store.add_listener(lambda: calls.append(store.generation))
    first = store.mark_unhealthy(node.gpus[0].uuid)
    assert first is not None and first.generation == 1 and not first.healthy
    assert store.mark_unhealthy(node.gpus[0].uuid) is None, "no change, no event"
    store.mark_healthy(node.gpus[0].uuid)
    remove()
    store.mark_unhealthy(node.gpus[1].uuid)
    assert calls == [1, 2]
    assert store.snapshot() == {node.gpus[1].uuid: "marked unhealthy"}


@pytest.mark.parametrize("target", ["GPU-00000000-0000-0000-0000-000000000000", "nonsense", ""])
def test_unknown_devices_are_refused_by_name(target: str) -> None:
    store = HealthStore(load_node_spec(None).node)
    with pytest.raises(UnknownHealthTarget, match=re.escape(repr(target))):
        store.mark_unhealthy(target)
