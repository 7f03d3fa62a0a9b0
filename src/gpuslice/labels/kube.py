"""The Kubernetes API side of the NodeFeature sink (lightkube); thin on purpose, tests use the in-memory store."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuslice.labels.nodefeature import NodeFeatureError

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def in_cluster(environ: Mapping[str, str] | None = None, token: Path = SERVICE_ACCOUNT_TOKEN) -> bool:
    """True inside a pod with a service account (what lightkube's in-cluster config needs)."""
    env = os.environ if environ is None else environ
    return bool(env.get("KUBERNETES_SERVICE_HOST")) and token.exists()


class LightkubeNodeFeatureStore:
    """NodeFeature objects through the API server (in-cluster config, or the kubeconfig outside a cluster)."""

    def __init__(self, client: Any = None) -> None:
        # Imported here so that nothing else in gpuslice pays for (or needs) a Kubernetes client.
        from lightkube import Client
        from lightkube.generic_resource import create_namespaced_resource

        self._resource = create_namespaced_resource("nfd.k8s-sigs.io", "v1alpha1", "NodeFeature", "nodefeatures")
        try:
            self._client = client if client is not None else Client(field_manager="gpuslice-labels")
        except Exception as exc:  # lightkube raises several config error types; all mean "no usable cluster"
            raise NodeFeatureError(f"cannot reach the Kubernetes API: {exc}") from exc

    def get(self, name: str, namespace: str) -> dict[str, Any] | None:
        from lightkube import ApiError

        try:
            found = self._client.get(self._resource, name, namespace=namespace)
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise NodeFeatureError(f"failed to get NodeFeature object {namespace}/{name}: {exc}") from exc
        result: dict[str, Any] = found.to_dict()
        return result

    def create(self, obj: dict[str, Any]) -> None:
        self._write("create", obj)

    def replace(self, obj: dict[str, Any]) -> None:
        self._write("replace", obj)

    def _write(self, verb: str, obj: dict[str, Any]) -> None:
        from lightkube import ApiError

        name = obj["metadata"]["name"]
        try:
            getattr(self._client, verb)(self._resource.from_dict(obj))
        except ApiError as exc:
            action = "create" if verb == "create" else "update"
            raise NodeFeatureError(f"failed to {action} NodeFeature object {name!r}: {exc}") from exc
