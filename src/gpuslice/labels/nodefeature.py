"""NFD's NodeFeature object for our labels, a store protocol for the API, and an in-memory fake store."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Literal, Protocol

NODE_FEATURE_API_VERSION = "nfd.k8s-sigs.io/v1alpha1"
NODE_FEATURE_KIND = "NodeFeature"
NODE_NAME_LABEL = "nfd.node.kubernetes.io/node-name"
NAME_PREFIX = "nvidia-features-for-"


class NodeFeatureError(RuntimeError):
    """The NodeFeature object could not be built or written; the message says which and why."""


def node_feature_name(node_name: str) -> str:
    return NAME_PREFIX + node_name


def node_feature_object(labels: Mapping[str, str], node_name: str, namespace: str) -> dict[str, Any]:
    """The object gpu-feature-discovery maintains: labels in spec.labels, empty spec.features."""
    if not node_name:
        raise NodeFeatureError("required flag node-name not set")
    if not namespace:
        raise NodeFeatureError("required flag namespace not set")
    return {
        "apiVersion": NODE_FEATURE_API_VERSION,
        "kind": NODE_FEATURE_KIND,
        "metadata": {
            "name": node_feature_name(node_name),
            "namespace": namespace,
            "labels": {NODE_NAME_LABEL: node_name},
        },
        "spec": {
            "features": {"attributes": {}, "flags": {}, "instances": {}},
            "labels": dict(sorted(labels.items())),
        },
    }


class NodeFeatureStore(Protocol):
    """Where NodeFeature objects live (the Kubernetes API, or a fake)."""

    def get(self, name: str, namespace: str) -> dict[str, Any] | None:
        """The stored object, or None when there is none."""
        ...

    def create(self, obj: dict[str, Any]) -> None: ...

    def replace(self, obj: dict[str, Any]) -> None: ...


Outcome = Literal["created", "updated", "unchanged"]


def apply_node_feature(store: NodeFeatureStore, desired: dict[str, Any]) -> Outcome:
    """Create the object, or update its labels and spec; skip the write when nothing changed (as GFD does)."""
    metadata = desired["metadata"]
    existing = store.get(metadata["name"], metadata["namespace"])
    if existing is None:
        store.create(desired)
        return "created"
    current_labels = (existing.get("metadata") or {}).get("labels") or {}
    if current_labels == metadata["labels"] and _spec_equal(existing.get("spec"), desired["spec"]):
        return "unchanged"
    updated = copy.deepcopy(existing)  # keeps resourceVersion, owner references and annotations
    updated.setdefault("metadata", {})["labels"] = dict(metadata["labels"])
    updated["spec"] = copy.deepcopy(desired["spec"])
    store.replace(updated)
    return "updated"


def _spec_equal(current: Any, desired: Mapping[str, Any]) -> bool:
    """Semantic equality: absent and empty feature maps are the same thing."""
    if not isinstance(current, Mapping):
        return False
    features = current.get("features") or {}
    same_features = all(not (features.get(part) or {}) for part in ("attributes", "flags", "instances"))
    return same_features and dict(current.get("labels") or {}) == dict(desired["labels"])


class InMemoryNodeFeatureStore:
    """A fake store with the API's semantics that matter here: create fails on a duplicate, versions increase."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []  # ("create" | "replace", name)

    def get(self, name: str, namespace: str) -> dict[str, Any] | None:
        found = self.objects.get((namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def create(self, obj: dict[str, Any]) -> None:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if key in self.objects:
            raise NodeFeatureError(f"nodefeatures {key[1]!r} already exists")
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = "1"
        self.objects[key] = stored
        self.writes.append(("create", key[1]))

    def replace(self, obj: dict[str, Any]) -> None:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        current = self.objects.get(key)
        if current is None:
            raise NodeFeatureError(f"nodefeatures {key[1]!r} not found")
        if obj["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise NodeFeatureError(f"nodefeatures {key[1]!r}: the object has been modified (resourceVersion)")
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(int(current["metadata"]["resourceVersion"]) + 1)
        self.objects[key] = stored
        self.writes.append(("replace", key[1]))
