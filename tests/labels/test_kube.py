"""The API adapter behind NodeFeatureStore, driven by a stand-in for gpuslice.kube's client (no cluster needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuslice.kube import KubeError, NotFound
from gpuslice.labels import NodeFeatureApiSink, NodeFeatureError, node_feature_object
from gpuslice.labels.kube import LightkubeNodeFeatureStore, in_cluster


class StandInClient:
    """Answers like gpuslice.kube.KubeClient for get/create/replace on one kind, keeping objects in a dict."""

    def __init__(self, fail_with: int | None = None) -> None:
        self.objects: dict[tuple[str, str], Any] = {}
        self.calls: list[str] = []
        self.fail_with = fail_with

    def _fail(self) -> None:
        if self.fail_with is not None:
            raise KubeError(f"status {self.fail_with}", self.fail_with)

    def get(self, resource: Any, name: str, *, namespace: str, what: str = "") -> Any:
        self.calls.append("get")
        self._fail()
        if (namespace, name) not in self.objects:
            raise NotFound(f'nodefeatures "{name}" not found', 404)
        return self.objects[(namespace, name)]

    def create(self, obj: Any, what: str = "") -> None:
        self.calls.append(f"create {type(obj).__name__}")
        self.objects[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj

    def replace(self, obj: Any, what: str = "") -> None:
        self.calls.append(f"replace {type(obj).__name__}")
        self._fail()
        self.objects[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj


def test_create_then_update_through_the_adapter() -> None:
    client = StandInClient()
    sink = NodeFeatureApiSink(LightkubeNodeFeatureStore(client), "node-a", "default")
    sink.write({"nvidia.com/gpu.count": "4"})
    sink.write({"nvidia.com/gpu.count": "4"})
    sink.write({"nvidia.com/gpu.count": "8"})
    assert client.calls == ["get", "create NodeFeature", "get", "get", "replace NodeFeature"]
    stored = client.objects[("default", "nvidia-features-for-node-a")]
    assert stored["apiVersion"] == "nfd.k8s-sigs.io/v1alpha1"
    assert stored["spec"]["labels"] == {"nvidia.com/gpu.count": "8"}


def test_api_errors_become_node_feature_errors() -> None:
    store = LightkubeNodeFeatureStore(StandInClient(fail_with=403))
    with pytest.raises(NodeFeatureError, match="failed to get NodeFeature object default/nvidia-features-for-n"):
        store.get("nvidia-features-for-n", "default")
    client = StandInClient(fail_with=409)
    with pytest.raises(NodeFeatureError, match="failed to update NodeFeature object 'nvidia-features-for-n'"):
        LightkubeNodeFeatureStore(client).replace(node_feature_object({}, "n", "default"))


def test_in_cluster_needs_the_service_host_and_a_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    assert not in_cluster({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, token)
    token.write_text("t")
    assert in_cluster({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, token)
    assert not in_cluster({}, token)
