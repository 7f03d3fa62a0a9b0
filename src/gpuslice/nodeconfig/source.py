"""The cluster boundary of per-node configs: read one Node's labels and follow them (a protocol and its fake)."""

from __future__ import annotations

import queue
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from gpuslice.records import record

EventKind = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]


class NodeSourceError(Exception):
    """The API server could not be reached, or refused the request; the message says which and why."""


class WatchExpired(NodeSourceError):
    """410 Gone: the resource version the watch resumed from is too old; get the node again, then watch."""


@record
class NodeState:
    """A Node as a GET returns it: its labels and the resource version to watch from."""

    labels: Mapping[str, str]
    resource_version: str


@record
class NodeEvent:
    """One watch event; a BOOKMARK carries only a newer resource version (labels None)."""

    kind: EventKind
    resource_version: str
    labels: Mapping[str, str] | None = None


class NodeSource(Protocol):
    """One Node through the Kubernetes API (nodeconfig.kube.LightkubeNodeSource, or FakeNodeSource)."""

    def get(self, node_name: str, deadline_s: float | None = None) -> NodeState:
        """The node now, within `deadline_s` (None: the client's own); NodeSourceError when the API cannot
        answer in time."""
        ...

    def watch(self, node_name: str, resource_version: str) -> Iterator[NodeEvent]:
        """Changes after `resource_version`, until the stream ends; WatchExpired on 410 Gone, NodeSourceError
        when the connection drops or the API refuses."""
        ...

    def close(self) -> None:
        """End a running watch (the watcher is stopping) and release connections."""
        ...


@dataclass
class FakeNodeSource:
    """An in-memory API server for one node: tests script label changes, bookmarks, drops and expiries.

    `fail_gets` GETs fail before one succeeds (the API unreachable). `push()` queues what the current or
    next watch stream delivers: a NodeEvent, "drop" (connection lost), "expire" (410 Gone) or "end".
    """

    labels: dict[str, str] = field(default_factory=dict)
    resource_version: int = 1
    fail_gets: int = 0
    gets: int = 0
    watches: list[str] = field(default_factory=list)  # the resource version each watch resumed from
    _stream: queue.Queue[NodeEvent | str] = field(default_factory=queue.Queue)

    def get(self, node_name: str, deadline_s: float | None = None) -> NodeState:
        self.gets += 1
        if self.fail_gets > 0:
            self.fail_gets -= 1
            raise NodeSourceError(f"get node {node_name}: connection refused")
        return NodeState(dict(self.labels), str(self.resource_version))

    def watch(self, node_name: str, resource_version: str) -> Iterator[NodeEvent]:
        self.watches.append(resource_version)
        while True:
            item = self._stream.get()
            if item == "drop":
                raise NodeSourceError(f"watch node {node_name}: connection lost")
            if item == "expire":
                raise WatchExpired(f"watch node {node_name}: 410 Gone: too old resource version")
            if item in ("end", "close") or not isinstance(item, NodeEvent):
                if item == "close":
                    self._stream.put(item)  # every later watch ends at once too
                return
            yield item

    def close(self) -> None:
        self._stream.put("close")

    def set_labels(self, labels: Mapping[str, str]) -> NodeEvent:
        """Change the node's labels (as `kubectl label` does) and deliver the MODIFIED event."""
        self.labels = dict(labels)
        self.resource_version += 1
        event = NodeEvent("MODIFIED", str(self.resource_version), dict(labels))
        self._stream.put(event)
        return event

    def push(self, item: NodeEvent | str) -> None:
        self._stream.put(item)
