"""The ClusterReader over lightkube: read-only paged lists of nodes, pods and the DRA objects where served."""

from __future__ import annotations

import time
from typing import Any

from gpuslice.snapshot.source import DEFAULT_PAGE_SIZE, MAX_OBJECTS, Kind, SnapshotError, check_count

# DRA's API versions, newest first: a cluster serves one or more of them (v1 from Kubernetes 1.34).
DRA_VERSIONS = ("resource_v1", "resource_v1beta2", "resource_v1beta1")
NOT_SERVED = (404, 405)


def _resource(kind: Kind, version: str = "") -> Any:
    import importlib

    if kind == "nodes":
        from lightkube.resources.core_v1 import Node

        return Node
    if kind == "pods":
        from lightkube.resources.core_v1 import Pod

        return Pod
    module = importlib.import_module(f"lightkube.resources.{version}")
    return module.ResourceSlice if kind == "resourceslices" else module.ResourceClaim


class LightkubeReader:
    """Lists through an already built lightkube Client (in-cluster config or a kubeconfig, with its own
    per-request timeout); only `list` is ever sent. Pages of `page_size`, at most enough pages for the
    kind's object cap (a server that answers `continue` forever is refused), the deadline checked
    before each page."""

    def __init__(self, client: Any, page_size: int = DEFAULT_PAGE_SIZE) -> None:
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
        from lightkube import ALL_NS, ApiError

        # lightkube's Client.list follows `continue` with no end; its generic client hands out one page
        # at a time (the same pinned client nodeconfig.kube uses), so pages can be counted and capped.
        generic = self._client._client
        namespace = ALL_NS if kind in ("pods", "resourceclaims") else None  # else the client's own namespace
        request = generic.prepare_request("list", res=resource, namespace=namespace, params={"limit": self._page_size})
        max_pages = MAX_OBJECTS[kind] // self._page_size + 2
        objects: list[dict[str, Any]] = []
        pages = generic.list_chunks(request)
        try:
            for page in range(max_pages + 1):
                if time.monotonic() > deadline:
                    raise SnapshotError(f"listing {kind} passed the deadline after {page} page(s)")
                if page == max_pages:
                    raise SnapshotError(f"listing {kind}: the API server sent more than {max_pages} pages")
                chunk = next(pages, None)
                if chunk is None:
                    return objects
                objects.extend(_plain(item) for item in chunk[1])
                check_count(kind, len(objects))
        except ApiError as exc:
            code = exc.status.code
            if kind not in ("nodes", "pods") and code in NOT_SERVED:
                raise _NotServed from None
            verb = "forbidden (see deploy/ for the snapshot's read-only ClusterRole)" if code == 403 else "failed"
            raise SnapshotError(f"listing {kind} {verb}: HTTP {code}: {exc.status.message}") from None
        except SnapshotError:
            raise
        except Exception as exc:  # httpx transport errors, lightkube decoding errors: one line for the user
            raise SnapshotError(f"listing {kind} failed: {type(exc).__name__}: {exc}") from None
        finally:
            pages.close()
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


class _NotServed(Exception):
    """This API version of a DRA kind is not served here."""


def _plain(item: Any) -> dict[str, Any]:
    """A lightkube model as Kubernetes JSON (camelCase keys, unset fields left out)."""
    data = item.to_dict()
    if not isinstance(data, dict):
        raise SnapshotError(f"a listed object is {type(data).__name__}, not an object")
    return data


SNAPSHOT_REQUEST_TIMEOUT_S = 15.0  # per request; the snapshot's total deadline bounds the whole read


def build_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A lightkube Client: from `kubeconfig` (and `context`) when given, else in-cluster config or
    $KUBECONFIG / ~/.kube/config as lightkube finds them. (The one place to swap in a shared client.)"""
    import httpx2
    from lightkube import Client, KubeConfig

    try:
        config: Any = KubeConfig.from_file(kubeconfig) if kubeconfig else None
        if context:
            config = (config or KubeConfig.from_env()).get(context_name=context)
        return Client(config=config, timeout=httpx2.Timeout(SNAPSHOT_REQUEST_TIMEOUT_S))
    except Exception as exc:  # lightkube raises several config error types; all mean "no usable cluster config"
        raise SnapshotError(f"no Kubernetes API configuration (in-cluster or kubeconfig): {exc}") from None
