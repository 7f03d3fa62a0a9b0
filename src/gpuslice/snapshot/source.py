"""What a snapshot reads of the cluster (the ClusterReader protocol), its limits, and an in-memory reader."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Kind = Literal["nodes", "pods", "resourceslices", "resourceclaims"]
KINDS: tuple[Kind, ...] = ("nodes", "pods", "resourceslices", "resourceclaims")
OPTIONAL_KINDS: frozenset[Kind] = frozenset({"resourceslices", "resourceclaims"})  # DRA: only where served

# Limits (docs/security.md). 5,000 nodes and 150,000 pods are Kubernetes' published scalability limits; a
# listed object costs a few KiB here, so the caps stay well inside a laptop.
DEFAULT_PAGE_SIZE = 500
MAX_OBJECTS = {"nodes": 10_000, "pods": 300_000, "resourceslices": 100_000, "resourceclaims": 300_000}
DEFAULT_DEADLINE_S = 60.0
MAX_DEADLINE_S = 3600.0


class SnapshotError(Exception):
    """The cluster could not be read (unreachable, refused, over a limit, too slow): one line for the user."""


class DeadlinePassed(SnapshotError):
    """A reader saw the total deadline pass; read_cluster says so in the one wording a slow server gets."""


class ClusterReader(Protocol):
    """Lists one kind of object as plain Kubernetes JSON (dicts), every page of it.

    Returns None when the API server does not serve that kind (a cluster without DRA); raises
    SnapshotError for anything else that goes wrong. `deadline` is a time.monotonic() value: a reader
    stops asking for pages after it and raises SnapshotError.
    """

    def list_objects(self, kind: Kind, deadline: float) -> list[dict[str, Any]] | None: ...


@dataclass(frozen=True)
class ClusterObjects:
    """Everything one snapshot read: nodes and pods, and the DRA objects (None: not served)."""

    nodes: tuple[dict[str, Any], ...]
    pods: tuple[dict[str, Any], ...]
    resource_slices: tuple[dict[str, Any], ...] | None
    resource_claims: tuple[dict[str, Any], ...] | None


def check_count(kind: Kind, count: int) -> None:
    """Refuse a list longer than this kind's cap (a hostile or broken API server could send millions)."""
    limit = MAX_OBJECTS[kind]
    if count > limit:
        raise SnapshotError(f"the API server listed more than {limit} {kind}, the limit of a snapshot")


def read_cluster(reader: ClusterReader, deadline_s: float = DEFAULT_DEADLINE_S) -> ClusterObjects:
    """Read the four kinds within one total deadline. The read runs in a daemon thread so that a server that
    trickles bytes (a per-read timeout never trips) cannot hold the command past the deadline."""
    if not 0 < deadline_s <= MAX_DEADLINE_S:
        raise SnapshotError(f"the read deadline must be in (0, {MAX_DEADLINE_S:g}] seconds, got {deadline_s:g}")
    deadline = time.monotonic() + deadline_s
    found: dict[Kind, list[dict[str, Any]] | None] = {}
    failure: list[BaseException] = []

    def read() -> None:
        try:
            for kind in KINDS:
                objects = reader.list_objects(kind, deadline)
                if objects is None and kind not in OPTIONAL_KINDS:
                    raise SnapshotError(f"the API server does not serve {kind}")
                if objects is not None:
                    check_count(kind, len(objects))
                found[kind] = objects
        except BaseException as exc:  # handed to the caller's thread, which raises it
            failure.append(exc)

    worker = threading.Thread(target=read, name="snapshot-read", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()) + 0.05)
    too_slow = f"reading the cluster took longer than the deadline of {deadline_s:g} s"
    if worker.is_alive():
        raise SnapshotError(too_slow)
    if failure:
        # the reader may notice the deadline just before this thread does: the same error either way
        if isinstance(failure[0], DeadlinePassed):
            raise SnapshotError(f"{too_slow} ({failure[0]})") from failure[0]
        if isinstance(failure[0], SnapshotError):
            raise failure[0]
        raise SnapshotError(f"reading the cluster failed: {type(failure[0]).__name__}: {failure[0]}") from failure[0]

    def optional(kind: Kind) -> tuple[dict[str, Any], ...] | None:
        objects = found[kind]
        return None if objects is None else tuple(objects)

    return ClusterObjects(
        nodes=tuple(found["nodes"] or ()),
        pods=tuple(found["pods"] or ()),
        resource_slices=optional("resourceslices"),
        resource_claims=optional("resourceclaims"),
    )


@dataclass
class MemoryReader:
    """Objects held in memory (the honest fake of the tests): serves them in pages of
    `page_size` as the API server would, honouring the deadline between pages. A kind left out of
    `objects` is not served (None), as on a cluster without DRA."""

    objects: Mapping[Kind, Sequence[Mapping[str, Any]]]
    page_size: int = DEFAULT_PAGE_SIZE
    pages: dict[str, int] = field(default_factory=dict)  # kind -> pages served, for tests

    def list_objects(self, kind: Kind, deadline: float) -> list[dict[str, Any]] | None:
        if kind not in self.objects:
            return None
        items = [dict(item) for item in self.objects[kind]]
        out: list[dict[str, Any]] = []
        for start in range(0, max(len(items), 1), self.page_size):
            if time.monotonic() > deadline:
                raise DeadlinePassed(f"listing {kind} passed the deadline")
            self.pages[kind] = self.pages.get(kind, 0) + 1
            out.extend(items[start : start + self.page_size])
            check_count(kind, len(out))
        return out
