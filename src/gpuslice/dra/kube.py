"""ResourceApi over lightkube: resource.k8s.io v1, else v1beta2, else v1beta1, found by asking the server."""

from __future__ import annotations

import logging
import threading
from typing import Any

from gpuslice.dra.api import ApiError
from gpuslice.dra.slices import API_GROUP, API_VERSIONS

log = logging.getLogger("gpuslice.dra")

API_REQUEST_TIMEOUT_S = 10.0  # well inside the kubelet's 45 s per call, which includes reading each claim
FIELD_MANAGER = "gpuslice-dra"


class LightkubeResourceApi:
    """Talks to the API server lightkube finds (in-cluster, KUBECONFIG), or to `server` (a URL) when given."""

    def __init__(self, server: str | None = None) -> None:
        # The client (lightkube, httpx2 and their models: most of what `gpuslice dra` imports) is made on
        # the first call, so the plugin serves and registers before paying for it.
        self._server = server
        self._client: Any = None
        self._no_client: str | None = None
        self._made = False
        self._lock = threading.Lock()
        self._version: str | None = None

    def _make_client(self) -> None:
        import httpx2  # lightkube's HTTP client; imported here so `--print-resource-slices` never needs it
        from lightkube import Client, KubeConfig
        from lightkube.config.models import Cluster, User
        from lightkube.core.exceptions import ConfigError

        # A plain URL (the mock kubelet's API, a local proxy) needs no credentials.
        server = self._server
        config = KubeConfig.from_one(cluster=Cluster(server=server), user=User()) if server else None
        try:
            self._client = Client(
                config=config, timeout=httpx2.Timeout(API_REQUEST_TIMEOUT_S), field_manager=FIELD_MANAGER,
                trust_env=False,
            )  # fmt: skip
        except ConfigError as exc:
            # No in-cluster config and no kubeconfig: serve anyway (as the device plugin's watcher does);
            # every API call fails as an ApiError, so publishing retries and claims get a clear error.
            self._no_client = f"no API server configured (in-cluster config or KUBECONFIG): {exc}"
            log.warning("%s; serving without the API server", self._no_client)

    @property
    def client(self) -> Any:
        with self._lock:
            if not self._made:
                self._made = True
                self._make_client()
        if self._client is None:
            raise ApiError(self._no_client or "no API client")
        return self._client

    def _kinds(self, version: str) -> tuple[Any, Any]:
        from lightkube.generic_resource import create_global_resource, create_namespaced_resource

        slices = create_global_resource(API_GROUP, version, "ResourceSlice", "resourceslices")
        claims = create_namespaced_resource(API_GROUP, version, "ResourceClaim", "resourceclaims")
        return slices, claims

    def _call(self, what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        from lightkube.core.exceptions import ApiError as LightkubeApiError

        try:
            return call(*args, **kwargs)
        except LightkubeApiError as exc:
            raise ApiError(f"{what}: {exc.status.message or exc}", exc.status.code) from exc
        except Exception as exc:  # httpx transport errors: connection refused, timeouts, TLS
            raise ApiError(f"{what}: {type(exc).__name__}: {exc}") from exc

    def resource_version(self) -> str:
        if self._version is not None:
            return self._version
        problems = []
        for version in API_VERSIONS:
            slices, _ = self._kinds(version)
            try:
                self._call(f"list {API_GROUP}/{version} ResourceSlices", lambda s=slices: list(
                    self.client.list(s, chunk_size=1, fields={"spec.driver": "probe.invalid"})
                ))  # fmt: skip
            except ApiError as exc:
                if exc.status in (404, 405):
                    problems.append(f"{version}: not served")
                    continue
                raise
            self._version = version
            log.info("using %s/%s", API_GROUP, version)
            return version
        raise ApiError(f"the API server serves no {API_GROUP} version we know ({'; '.join(problems)})", 404)

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        _, claims = self._kinds(self.resource_version())
        try:
            found = self._call(
                f"get ResourceClaim {namespace}/{name}", self.client.get, claims, name, namespace=namespace
            )
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return dict(found.to_dict())

    def list_slices(self, driver: str, node_name: str) -> list[dict[str, Any]]:
        slices, _ = self._kinds(self.resource_version())
        fields: dict[str, Any] = {"spec.driver": driver, "spec.nodeName": node_name}
        listed = self._call("list ResourceSlices", lambda: list(self.client.list(slices, fields=fields)))
        return [dict(obj.to_dict()) for obj in listed]

    def apply_slice(self, obj: dict[str, Any]) -> None:
        slices, _ = self._kinds(obj["apiVersion"].rsplit("/", 1)[-1])
        name = obj["metadata"]["name"]
        try:
            current = self._call(f"get ResourceSlice {name}", self.client.get, slices, name)
        except ApiError as exc:
            if exc.status != 404:
                raise
            self._call(f"create ResourceSlice {name}", self.client.create, slices(obj))
            return
        body = {
            **obj,
            "metadata": {**obj["metadata"], "resourceVersion": current.to_dict()["metadata"]["resourceVersion"]},
        }
        self._call(f"replace ResourceSlice {name}", self.client.replace, slices(body))

    def delete_slice(self, name: str) -> None:
        slices, _ = self._kinds(self.resource_version())
        try:
            self._call(f"delete ResourceSlice {name}", self.client.delete, slices, name)
        except ApiError as exc:
            if exc.status != 404:
                raise
