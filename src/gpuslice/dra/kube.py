"""ResourceApi over the one API client (gpuslice.kube): resource.k8s.io v1, else v1beta2, else v1beta1."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from gpuslice.dra.api import ApiError
from gpuslice.dra.slices import API_GROUP, API_VERSIONS

# gpuslice.kube (its client, counters and errors) is imported by the methods that call the API: the first
# call comes from the publisher's thread, after registration, which need not wait for the package to load.
if TYPE_CHECKING:
    from gpuslice.kube import KubeClient

log = logging.getLogger("gpuslice.dra")

DRA_FIELD_MANAGER = "gpuslice-dra"
CLAIM_READ_S = 10.0  # one claim read, API discovery included: well inside the kubelet's 45 s per call
_T = TypeVar("_T")


class LightkubeResourceApi:
    """Talks to the API server found in-cluster or in the kubeconfig, or to `server` (a URL) when given.

    Without any configuration it still serves: every call fails as an ApiError, so publishing retries and
    claims get a clear error. Each call has the client's total deadline (well inside the kubelet's 45 s).
    The client is made on the first call (the publisher's first sync): making it loads gpuslice.kube, lightkube
    and httpx, which registration with the kubelet has no need to wait for.
    """

    def __init__(self, server: str | None = None, client: KubeClient | None = None) -> None:
        self._server = server
        self._client = client
        self._made = threading.Lock()
        self._closed = False
        self._version: str | None = None

    @property
    def client(self) -> KubeClient:
        with self._made:
            if self._client is None:
                from gpuslice.kube import KubeClient

                self._client = (
                    KubeClient.for_server(self._server, DRA_FIELD_MANAGER)
                    if self._server
                    else KubeClient.from_environment(DRA_FIELD_MANAGER)
                )
                if self._closed:  # closed before its first call: refuses every request, as a closed one does
                    self._client.close()
            return self._client

    def close(self) -> None:
        """End requests in flight (the process stops)."""
        with self._made:
            self._closed = True
            client = self._client
        if client is not None:
            client.close()

    def _kinds(self, version: str) -> tuple[Any, Any]:
        from gpuslice.kube.resources import generic_resource

        slices = generic_resource(API_GROUP, version, "ResourceSlice", "resourceslices", namespaced=False)
        claims = generic_resource(API_GROUP, version, "ResourceClaim", "resourceclaims", namespaced=True)
        return slices, claims

    @staticmethod
    def _call(call: Callable[[], _T]) -> _T:
        from gpuslice.kube import KubeError

        try:
            return call()
        except KubeError as exc:
            raise ApiError(str(exc), exc.status) from exc

    @staticmethod
    def _found(call: Callable[[], _T]) -> _T | None:
        """`call`'s answer, or None where the object does not exist (404); any other failure is an ApiError."""
        from gpuslice.kube import KubeError, NotFound

        try:
            return call()
        except NotFound:
            return None
        except KubeError as exc:
            raise ApiError(str(exc), exc.status) from exc

    def resource_version(self) -> str:
        if self._version is not None:
            return self._version
        problems = []
        for version in API_VERSIONS:
            slices, _ = self._kinds(version)
            what = f"list {API_GROUP}/{version} ResourceSlices"
            try:
                self._probe(slices, what)
            except ApiError as exc:
                if exc.status in (404, 405):
                    problems.append(f"{version}: not served")
                    continue
                raise
            self._version = version
            log.info("using %s/%s", API_GROUP, version)
            return version
        raise ApiError(f"the API server serves no {API_GROUP} version we know ({'; '.join(problems)})", 404)

    def _probe(self, slices: Any, what: str) -> None:
        self._call(lambda: self.client.list_all(slices, fields={"spec.driver": "probe.invalid"}, what=what))

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        from gpuslice.kube.deadline import until

        what = f"get ResourceClaim {namespace}/{name}"
        with until(time.monotonic() + CLAIM_READ_S):
            _, claims = self._kinds(self.resource_version())
            found = self._found(lambda: self.client.get(claims, name, namespace=namespace, what=what))
        return None if found is None else dict(found.to_dict())

    def list_slices(self, driver: str, node_name: str) -> list[dict[str, Any]]:
        slices, _ = self._kinds(self.resource_version())
        fields = {"spec.driver": driver, "spec.nodeName": node_name}
        listed = self._call(lambda: self.client.list_all(slices, fields=fields, what="list ResourceSlices"))
        return [dict(obj.to_dict()) for obj in listed]

    def apply_slice(self, obj: dict[str, Any]) -> None:
        slices, _ = self._kinds(obj["apiVersion"].rsplit("/", 1)[-1])
        name = obj["metadata"]["name"]
        current = self._found(lambda: self.client.get(slices, name, what=f"get ResourceSlice {name}"))
        if current is None:
            self._call(lambda: self.client.create(slices.from_dict(obj), what=f"create ResourceSlice {name}"))
            return
        version = (current.to_dict().get("metadata") or {}).get("resourceVersion")
        body = {**obj, "metadata": {**obj["metadata"], "resourceVersion": version}}
        self._call(lambda: self.client.replace(slices.from_dict(body), what=f"replace ResourceSlice {name}"))

    def delete_slice(self, name: str) -> None:
        slices, _ = self._kinds(self.resource_version())
        self._found(lambda: self.client.delete(slices, name, what=f"delete ResourceSlice {name}"))
