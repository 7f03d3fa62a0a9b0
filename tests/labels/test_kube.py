"""The API adapter behind NodeFeatureStore: a stand-in for gpuslice.kube's client, then the real one over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuslice.kube import ApiCounters, KubeClient, KubeError, NotFound
from gpuslice.labels import NodeFeatureApiSink, NodeFeatureError, node_feature_object
from gpuslice.labels.kube import LightkubeNodeFeatureStore, in_cluster
from tests.support.api_server import TOKEN, Exchange, HostileApi, hostile_api


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


def test_the_real_client_creates_and_replaces_through_the_api() -> None:
    stored: dict[str, Any] = {}
    path = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/gpu/nodefeatures"

    def nfd(ex: Exchange) -> bool:
        name = "nvidia-features-for-n"
        if ex.method == "GET" and ex.path == f"{path}/{name}":
            return ex.json(200, stored[name]) if name in stored else ex.status(404, "not found")
        if (ex.method, ex.path) in (("POST", path), ("PUT", f"{path}/{name}")):
            assert ex.query["fieldManager"] == "gpuslice-labels"
            stored[name] = {
                **json.loads(ex.body),
                "metadata": {**json.loads(ex.body)["metadata"], "resourceVersion": "2"},
            }
            return ex.json(201 if ex.method == "POST" else 200, stored[name])
        return ex.status(400, f"unexpected {ex.method} {ex.path}")

    with hostile_api(HostileApi(behaviour=nfd)) as (api, url):
        client = KubeClient.for_server(url, "gpuslice-labels", token=TOKEN, counters=ApiCounters())
        sink = NodeFeatureApiSink(LightkubeNodeFeatureStore(client), "n", "gpu")
        sink.write({"nvidia.com/gpu.count": "4"})
        sink.write({"nvidia.com/gpu.count": "8"})
    assert [seen.split("?")[0] for seen in api.seen()] == [
        f"GET {path}/nvidia-features-for-n",
        f"POST {path}",
        f"GET {path}/nvidia-features-for-n",
        f"PUT {path}/nvidia-features-for-n",
    ]
    assert stored["nvidia-features-for-n"]["spec"]["labels"] == {"nvidia.com/gpu.count": "8"}
