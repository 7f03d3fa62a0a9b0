"""lightkube's typed resource kinds, so that no module outside gpuslice.kube imports lightkube."""

from __future__ import annotations

from typing import Any


def node_resource() -> Any:
    """core/v1 Node (lightkube's generated model)."""
    return typed_resource("core_v1", "Node")


def typed_resource(module: str, kind: str) -> Any:
    """A kind lightkube has a generated model for: `typed_resource("resource_v1", "ResourceSlice")`."""
    import importlib

    return getattr(importlib.import_module(f"lightkube.resources.{module}"), kind)


def generic_resource(group: str, version: str, kind: str, plural: str, *, namespaced: bool) -> Any:
    """A kind lightkube has no model for (ResourceSlice, ResourceClaim, NodeFeature): dict-like objects."""
    from lightkube.generic_resource import create_global_resource, create_namespaced_resource

    create = create_namespaced_resource if namespaced else create_global_resource
    return create(group, version, kind, plural)
