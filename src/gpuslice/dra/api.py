"""The cluster boundary of the DRA front end: ResourceClaims to read, ResourceSlices to write (a Protocol)."""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Iterable
from typing import Any, Protocol

from gpuslice.dra.slices import API_VERSIONS


class ApiError(RuntimeError):
    """The API server refused or could not be reached; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class ResourceApi(Protocol):
    """What the DRA plugin asks of the API server (lightkube in production, InMemoryResourceApi in tests)."""

    def resource_version(self) -> str:
        """The newest resource.k8s.io version the server serves (v1, v1beta2 or v1beta1); ApiError if none."""
        ...

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The ResourceClaim, or None when it does not exist."""
        ...

    def list_slices(self, driver: str, node_name: str) -> list[dict[str, Any]]:
        """Our ResourceSlices for this node (spec.driver and spec.nodeName)."""
        ...

    def apply_slice(self, obj: dict[str, Any]) -> None:
        """Create the slice, or replace the one with its name."""
        ...

    def delete_slice(self, name: str) -> None:
        """Delete the slice; a slice that is already gone is not an error."""
        ...

    def close(self) -> None:
        """End requests in flight and refuse new ones (the process stops)."""
        ...


class InMemoryResourceApi:
    """An honest in-process API: objects kept as plain dicts, UIDs and resourceVersions assigned as a server does.

    `served` lists the resource.k8s.io versions it pretends to serve (newest first wins discovery).
    """

    def __init__(self, served: Iterable[str] = API_VERSIONS) -> None:
        self.served = tuple(served)
        self.slices: dict[str, dict[str, Any]] = {}
        self.claims: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes = 0
        self._versions = itertools.count(1)
        self._lock = threading.Lock()

    def resource_version(self) -> str:
        for version in API_VERSIONS:
            if version in self.served:
                return version
        raise ApiError("the API server serves no resource.k8s.io version we know", 404)

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            claim = self.claims.get((namespace, name))
            return copy.deepcopy(claim) if claim is not None else None

    def put_claim(self, claim: dict[str, Any]) -> None:
        metadata = claim["metadata"]
        with self._lock:
            self.claims[(metadata["namespace"], metadata["name"])] = copy.deepcopy(claim)

    def list_slices(self, driver: str, node_name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [
                copy.deepcopy(obj)
                for obj in self.slices.values()
                if obj["spec"].get("driver") == driver and obj["spec"].get("nodeName") == node_name
            ]

    def apply_slice(self, obj: dict[str, Any]) -> None:
        version = obj["apiVersion"].rsplit("/", 1)[-1]
        if version not in self.served:
            raise ApiError(f"resource.k8s.io/{version} is not served", 404)
        with self._lock:
            stored = copy.deepcopy(obj)
            stored["metadata"]["resourceVersion"] = str(next(self._versions))
            self.slices[obj["metadata"]["name"]] = stored
            self.writes += 1

    def delete_slice(self, name: str) -> None:
        with self._lock:
            self.slices.pop(name, None)

    def close(self) -> None:
        pass  # nothing in flight: every call returns at once
