"""The hardware boundary: a Backend discovers a Node and says what else it can do; the fake one reads a node spec."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from gpuslice.discovery.capabilities import HealthSource, MigControl, Prober, TimeSliceControl
from gpuslice.discovery.health_file import HEALTH_FILE_POLL_S, HealthFileSource
from gpuslice.discovery.mig_recording import RecordingMigControl
from gpuslice.discovery.nodespec import NodeSpec, load_node_spec
from gpuslice.discovery.timeslice import RecordingTimeSlice
from gpuslice.gpu import Node


@runtime_checkable
class Backend(Protocol):
    """Discovers the GPUs of this node, and answers what else it offers.

    Every capability is a method with an honest default (none of it), so a new or wrapping backend that
    subclasses Backend keeps working and only loses what it does not provide; callers ask these methods,
    never the backend's class.
    """

    name: str

    def discover(self) -> Node:
        """Return the node as it is now."""
        ...

    def health_source(self, poll_interval_s: float = HEALTH_FILE_POLL_S) -> HealthSource | None:
        """Where health events come from (polled every `poll_interval_s` where it polls); None: no events."""
        return None

    def prober(self) -> Prober | None:
        """An active probe that may return an unhealthy GPU to Healthy; None: recovery comes from events only."""
        return None

    def mig_control(self, node: Node) -> MigControl | None:
        """What creates and destroys MIG devices on `node` (as this backend discovered it); None: it cannot."""
        return None

    def timeslice_control(self) -> TimeSliceControl | None:
        """What sets a GPU's time-slice interval (a DRA claim's TimeSlicing config); None: it cannot."""
        return None

    def topology_spec(self) -> Mapping[str, Any] | None:
        """A node-spec `topology` section describing the GPU links; None: derive them from the GPUs."""
        return None

    def assumes_device_nodes(self) -> bool:
        """True when the node's /dev is imaginary, so every device node NVIDIA looks for counts as present."""
        return False

    def close(self) -> None:
        """Release what discovery holds (NVML's library handle); the front ends call it on exit.

        A later call that needs the hardware again may reopen it. Default: nothing to release.
        """
        return


class FakeBackend(Backend):
    """A node described by a YAML node spec or a built-in preset; deterministic IDs.

    Capabilities: the spec's `health_events` file, a recording MIG control, a recording time-slice
    control, the spec's topology, and a /dev where every NVIDIA device node exists.
    """

    name = "fake"

    def __init__(self, spec: NodeSpec, node_name: str | None = None) -> None:
        self.spec = spec
        # `--node-name` wins over the spec's name, as for the real backends (the GPUs' IDs stay the spec's).
        self._node = replace(spec.node, name=node_name) if node_name else spec.node
        self._timeslice = RecordingTimeSlice()  # one per backend, so the levels set stay readable

    @classmethod
    def from_ref(cls, ref: str | None, node_name: str | None = None) -> FakeBackend:
        """`preset:NAME`, a preset name or a YAML path; None is the default preset."""
        return cls(load_node_spec(ref), node_name)

    def discover(self) -> Node:
        return self._node

    def health_source(self, poll_interval_s: float = HEALTH_FILE_POLL_S) -> HealthSource | None:
        path = self.spec.health_events
        return HealthFileSource(path, poll_interval_s) if path is not None else None

    def mig_control(self, node: Node) -> MigControl | None:
        return RecordingMigControl(node)

    def timeslice_control(self) -> TimeSliceControl | None:
        return self._timeslice

    def topology_spec(self) -> Mapping[str, Any] | None:
        return self.spec.topology

    def assumes_device_nodes(self) -> bool:
        return True
