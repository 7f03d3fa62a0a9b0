"""The hardware boundary: a Backend discovers a Node; the fake one reads a node spec."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from gpuslice.discovery.nodespec import NodeSpec, load_node_spec
from gpuslice.gpu import Node


@runtime_checkable
class Backend(Protocol):
    """Discovers the GPUs of this node."""

    name: str

    def discover(self) -> Node:
        """Return the node as it is now."""
        ...


class FakeBackend:
    """A node described by a YAML node spec or a built-in preset; deterministic IDs."""

    name = "fake"

    def __init__(self, spec: NodeSpec) -> None:
        self.spec = spec

    @classmethod
    def from_ref(cls, ref: str | None) -> FakeBackend:
        """`preset:NAME`, a preset name or a YAML path; None is the default preset."""
        return cls(load_node_spec(ref))

    def discover(self) -> Node:
        return self.spec.node
