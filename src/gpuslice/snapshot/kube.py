"""The ClusterReader over the one API client: read-only paged lists of nodes, pods and the DRA objects where served."""

from __future__ import annotations

import time
from typing import Any

from gpuslice.kube import DeadlineExceeded, KubeClient, KubeError, Limits, NoConfig, TooManyPages
from gpuslice.kube.client import MiB
from gpuslice.kube.deadline import until
from gpuslice.kube.resources import typed_resource
from gpuslice.snapshot.source import DEFAULT_PAGE_SIZE, MAX_OBJECTS, DeadlinePassed, Kind, SnapshotError, check_count

# DRA's API versions, newest first: a cluster serves one or more of them (v1 from Kubernetes 1.34).
DRA_VERSIONS = ("resource_v1", "resource_v1beta2", "resource_v1beta1")
NOT_SERVED = (404, 405)
DEADLINE_SLACK_S = 0.5
ALL_NAMESPACES = "*"  # lightkube's name for a list across every namespace
SNAPSHOT_FIELD_MANAGER = "gpuslice-snapshot"  # never used: the snapshot only reads


def _resource(kind: Kind, version: str = "") -> Any:
    if kind == "nodes":
        return typed_resource("core_v1", "Node")
    if kind == "pods":
        return typed_resource("core_v1", "Pod")
    return typed_resource(version, "ResourceSlice" if kind == "resourceslices" else "ResourceClaim")


class LightkubeReader:
    """Lists through the one API client (gpuslice.kube: in-cluster config or a kubeconfig); only `list` is
    ever sent. Pages of `page_size`, at most enough pages for the kind's object cap (a server that answers
    `continue` forever is refused), every request bounded by the read's total deadline."""

    def __init__(self, client: KubeClient, page_size: int = DEFAULT_PAGE_SIZE) -> None:
        self._client = client
        self._page_size = page_size

    def list_objects(self, kind: Kind, deadline: float) -> list[dict[str, Any]] | None:
        if kind in ("nodes", "pods"):
            return self._list(kind, _resource(kind), deadline)
        for version in DRA_VERSIONS:
            try:
                return self._list(kind, _resource(kind, version), deadline)
            except _NotServed:
                continue
        return None

    def _list(self, kind: Kind, resource: Any, deadline: float) -> list[dict[str, Any]]:
        namespace = ALL_NAMESPACES if kind in ("pods", "resourceclaims") else None
        max_pages = MAX_OBJECTS[kind] // self._page_size + 2
        if time.monotonic() > deadline:
            raise DeadlinePassed(f"listing {kind} passed the deadline")
        try:
            # Every page, and every byte of it, ends just after the read's total deadline: read_cluster
            # reports the deadline itself, and this thread cannot outlive it by more than the slack.
            with until(deadline + DEADLINE_SLACK_S):
                listed = self._client.list_all(
                    resource, namespace=namespace, page_size=self._page_size, max_pages=max_pages, what=f"list {kind}"
                )
        except DeadlineExceeded:
            raise DeadlinePassed(f"listing {kind} passed the deadline") from None
        except TooManyPages:
            raise SnapshotError(f"listing {kind}: the API server sent more than {max_pages} pages") from None
        except KubeError as exc:
            if kind not in ("nodes", "pods") and exc.status in NOT_SERVED:
                raise _NotServed from None
            if exc.status == 403:
                raise SnapshotError(
                    f"listing {kind} forbidden (see deploy/ for the snapshot's read-only ClusterRole): {exc}"
                ) from None
            raise SnapshotError(f"listing {kind} failed: {exc}") from None
        objects = [_plain(item) for item in listed]
        check_count(kind, len(objects))
        return objects


class _NotServed(Exception):
    """This API version of a DRA kind is not served here."""


def _plain(item: Any) -> dict[str, Any]:
    """A lightkube model as Kubernetes JSON (camelCase keys, unset fields left out)."""
    data = item.to_dict()
    if not isinstance(data, dict):
        raise SnapshotError(f"a listed object is {type(data).__name__}, not an object")
    return data


SNAPSHOT_REQUEST_TIMEOUT_S = 15.0  # per request; the snapshot's total deadline bounds the whole read
# A page of 500 pods runs to several MiB; the object caps (source.MAX_OBJECTS) bound the whole read.
SNAPSHOT_LIMITS = Limits(deadline_s=SNAPSHOT_REQUEST_TIMEOUT_S, max_body_bytes=64 * MiB, max_pages=1000, page_size=500)


def build_client(kubeconfig: str | None = None, context: str | None = None) -> KubeClient:
    """The API client: from `kubeconfig` (and `context`) when given, else in-cluster config or
    $KUBECONFIG / ~/.kube/config; SnapshotError (one line) when there is none."""
    try:
        client = KubeClient.from_environment(
            SNAPSHOT_FIELD_MANAGER, kubeconfig=kubeconfig, context=context, limits=SNAPSHOT_LIMITS, required=True
        )
    except NoConfig as exc:
        raise SnapshotError(str(exc)) from None
    if not client.configured:  # a kubeconfig that names a missing CA file, say: already said why
        raise SnapshotError(client.problem or "no API server configured")
    return client
