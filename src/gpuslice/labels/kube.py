"""The Kubernetes API side of the NodeFeature sink, through the one API client (gpuslice.kube)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuslice.kube import KubeClient, KubeError, NotFound
from gpuslice.kube.resources import generic_resource
from gpuslice.labels.nodefeature import NodeFeatureError

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
LABELS_FIELD_MANAGER = "gpuslice-labels"


def in_cluster(environ: Mapping[str, str] | None = None, token: Path = SERVICE_ACCOUNT_TOKEN) -> bool:
    """True inside a pod with a service account (what the in-cluster config needs)."""
    env = os.environ if environ is None else environ
    return bool(env.get("KUBERNETES_SERVICE_HOST")) and token.exists()


class LightkubeNodeFeatureStore:
    """NodeFeature objects through the API server (in-cluster config, or the kubeconfig outside a cluster).

    Without a configuration each request fails as a NodeFeatureError, which the labeller logs and retries
    at its next pass (every sleepInterval): never a crash at start.
    """

    def __init__(self, client: KubeClient | None = None) -> None:
        self._resource = generic_resource("nfd.k8s-sigs.io", "v1alpha1", "NodeFeature", "nodefeatures", namespaced=True)
        self._client = client if client is not None else KubeClient.from_environment(LABELS_FIELD_MANAGER)

    def get(self, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            found = self._client.get(
                self._resource, name, namespace=namespace, what=f"get NodeFeature {namespace}/{name}"
            )
        except NotFound:
            return None
        except KubeError as exc:
            raise NodeFeatureError(f"failed to get NodeFeature object {namespace}/{name}: {exc}") from exc
        result: dict[str, Any] = found.to_dict()
        return result

    def create(self, obj: dict[str, Any]) -> None:
        self._write("create", obj)

    def replace(self, obj: dict[str, Any]) -> None:
        self._write("replace", obj)

    def _write(self, verb: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        action = "create" if verb == "create" else "update"
        try:
            write = self._client.create if verb == "create" else self._client.replace
            write(self._resource.from_dict(obj), what=f"{action} NodeFeature {name}")
        except KubeError as exc:
            raise NodeFeatureError(f"failed to {action} NodeFeature object {name!r}: {exc}") from exc
