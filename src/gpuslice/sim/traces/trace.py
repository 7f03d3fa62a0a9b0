"""A trace: the cluster it runs on and the jobs that arrive, with a name for reports."""

from __future__ import annotations

from dataclasses import dataclass

from gpuslice.sim.model import ClusterSpec, JobSpec


@dataclass(frozen=True)
class Trace:
    name: str
    cluster: ClusterSpec
    jobs: tuple[JobSpec, ...]
    description: str = ""
    cluster_text: str = ""  # the one-line cluster spec it was built from (written to CSV headers)


class TraceError(ValueError):
    """A trace that cannot be built or read; the message names the file, line or parameter."""
