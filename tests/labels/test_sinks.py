"""Sinks: the features.d file (replaced atomically), standard output, and the NodeFeature object."""

from __future__ import annotations

import io
import os
import stat
import threading
from pathlib import Path

import pytest
import yaml

from gpuslice.labels import (
    FeatureFileSink,
    InMemoryNodeFeatureStore,
    NodeFeatureApiSink,
    NodeFeatureError,
    NodeFeatureYamlSink,
    StreamSink,
    apply_node_feature,
    format_features,
    node_feature_object,
    parse_features,
)

LABELS = {
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.count": "4",
    "gpuslice.io/gpu.isolation": "mps",
}


def test_features_format_is_sorted_key_value_lines() -> None:
    text = format_features(LABELS)
    assert text == (
        "gpuslice.io/gpu.isolation=mps\nnvidia.com/gpu.count=4\nnvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3\n"
    )
    assert parse_features(text) == LABELS
    assert parse_features(format_features({"nvidia.com/gpu.sharing-strategy": ""})) == {
        "nvidia.com/gpu.sharing-strategy": ""
    }


def test_file_is_replaced_by_rename_with_mode_0644(tmp_path: Path) -> None:
    path = tmp_path / "features.d" / "gfd"  # the directory is created when missing
    sink = FeatureFileSink(path)
    sink.write(LABELS)
    first = path.stat()
    sink.write({**LABELS, "nvidia.com/gpu.count": "8"})
    second = path.stat()
    assert second.st_ino != first.st_ino  # a new file was renamed over the old one, not rewritten in place
    assert stat.S_IMODE(second.st_mode) == 0o644
    assert parse_features(path.read_text())["nvidia.com/gpu.count"] == "8"
    assert os.listdir(path.parent) == ["gfd"]  # no temporary file left behind


def test_a_concurrent_reader_never_sees_a_partial_file(tmp_path: Path) -> None:
    path = tmp_path / "gfd"
    sink = FeatureFileSink(path)
    versions = [{f"gpuslice.io/key-{i}": str(n) * 200 for i in range(40)} for n in range(10)]
    expected = {format_features(labels) for labels in versions}
    sink.write(versions[0])
    seen: set[str] = set()
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.add(path.read_text())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for round_ in range(30):
            sink.write(versions[round_ % len(versions)])
    finally:
        done.set()
        reader.join()
    assert seen and seen <= expected


def test_withdraw_removes_the_file_and_tolerates_absence(tmp_path: Path) -> None:
    sink = FeatureFileSink(tmp_path / "gfd")
    sink.write(LABELS)
    sink.withdraw()
    assert not (tmp_path / "gfd").exists()
    sink.withdraw()


def test_failed_write_leaves_old_file_and_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "gfd"
    sink = FeatureFileSink(path)
    sink.write(LABELS)

    class Boom(dict[str, str]):
        def __getitem__(self, key: str) -> str:
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        sink.write(Boom(LABELS))
    assert parse_features(path.read_text()) == LABELS
    assert os.listdir(tmp_path) == ["gfd"]


def test_stream_sink_writes_one_block_per_pass() -> None:
    stream = io.StringIO()
    sink = StreamSink(stream)
    sink.write(LABELS)
    sink.write(LABELS)
    assert stream.getvalue() == format_features(LABELS) * 2


def test_node_feature_object_shape() -> None:
    obj = node_feature_object(LABELS, "node-a", "gpu-operator")
    assert obj == {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {
            "name": "nvidia-features-for-node-a",
            "namespace": "gpu-operator",
            "labels": {"nfd.node.kubernetes.io/node-name": "node-a"},
        },
        "spec": {"features": {"attributes": {}, "flags": {}, "instances": {}}, "labels": dict(sorted(LABELS.items()))},
    }


@pytest.mark.parametrize(("node", "namespace", "message"), [("", "ns", "node-name"), ("n", "", "namespace")])
def test_node_feature_needs_node_and_namespace(node: str, namespace: str, message: str) -> None:
    with pytest.raises(NodeFeatureError, match=f"required flag {message} not set"):
        node_feature_object(LABELS, node, namespace)


def test_node_feature_yaml_to_stream_and_file(tmp_path: Path) -> None:
    stream = io.StringIO()
    NodeFeatureYamlSink("node-a", "default", stream=stream).write(LABELS)
    documents = list(yaml.safe_load_all(stream.getvalue()))
    assert documents == [node_feature_object(LABELS, "node-a", "default")]
    path = tmp_path / "nf.yaml"
    NodeFeatureYamlSink("node-a", "default", path=path).write(LABELS)
    assert yaml.safe_load(path.read_text())["spec"]["labels"] == LABELS


def test_apply_creates_then_updates_only_on_change() -> None:
    store = InMemoryNodeFeatureStore()
    desired = node_feature_object(LABELS, "node-a", "default")
    assert apply_node_feature(store, desired) == "created"
    assert apply_node_feature(store, desired) == "unchanged"
    changed = node_feature_object({**LABELS, "nvidia.com/gpu.count": "8"}, "node-a", "default")
    assert apply_node_feature(store, changed) == "updated"
    stored = store.get("nvidia-features-for-node-a", "default")
    assert stored is not None
    assert stored["spec"]["labels"]["nvidia.com/gpu.count"] == "8"
    assert stored["metadata"]["resourceVersion"] == "2"
    assert store.writes == [("create", "nvidia-features-for-node-a"), ("replace", "nvidia-features-for-node-a")]


def test_apply_restores_a_tampered_object_and_keeps_its_other_metadata() -> None:
    store = InMemoryNodeFeatureStore()
    desired = node_feature_object(LABELS, "node-a", "default")
    apply_node_feature(store, desired)
    tampered = store.objects[("default", "nvidia-features-for-node-a")]
    tampered["metadata"]["labels"] = {}
    tampered["metadata"]["annotations"] = {"keep": "me"}
    tampered["spec"]["features"] = None  # the API may return null for empty features: still "unchanged" content
    assert apply_node_feature(store, desired) == "updated"
    stored = store.get("nvidia-features-for-node-a", "default")
    assert stored is not None
    assert stored["metadata"]["labels"] == {"nfd.node.kubernetes.io/node-name": "node-a"}
    assert stored["metadata"]["annotations"] == {"keep": "me"}


def test_api_sink_reports_outcome() -> None:
    store = InMemoryNodeFeatureStore()
    sink = NodeFeatureApiSink(store, "node-a", "default")
    outcomes = []
    for _ in range(2):
        sink.write(LABELS)
        outcomes.append(sink.last_outcome)
    assert outcomes == ["created", "unchanged"]
    sink.withdraw()  # NodeFeature output stays in place, as with GFD
    assert store.get("nvidia-features-for-node-a", "default") is not None
