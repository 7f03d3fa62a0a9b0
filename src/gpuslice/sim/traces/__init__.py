"""Traces: the CSV format, the synthetic generator, the adversarial, two-gang and extension traces, a registry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from gpuslice.sim.traces.adversarial import adversarial, build_adversarial
from gpuslice.sim.traces.csv_format import load_trace, parse_trace, trace_to_text, write_trace
from gpuslice.sim.traces.preemption import build_preemption
from gpuslice.sim.traces.sharing import build_sharing
from gpuslice.sim.traces.synthetic import DEFAULT_MIX, JobClass, SyntheticParams, generate
from gpuslice.sim.traces.tenants import build_tenants
from gpuslice.sim.traces.topology import build_topology
from gpuslice.sim.traces.trace import CheckpointCosts, NvlinkLinks, Trace, TraceError, TracePhysics
from gpuslice.sim.traces.two_gang import build_two_gang, two_gang

TraceBuilder = Callable[[int, Mapping[str, str]], Trace]


def _build_synthetic(seed: int, params: Mapping[str, str]) -> Trace:
    return generate(SyntheticParams.from_params(params), seed)


# name -> builder(seed, params). The last four are the extension traces (docs/simulator.md, "Extensions").
TRACES: dict[str, TraceBuilder] = {
    "synthetic": _build_synthetic,
    "adversarial": build_adversarial,
    "two-gang": build_two_gang,
    "preemption": build_preemption,
    "tenants": build_tenants,
    "topology": build_topology,
    "sharing": build_sharing,
}


def resolve_trace(ref: str, seed: int = 0) -> Trace:
    """A registered trace `NAME[:key=value,...]`, or else a trace file path."""
    name, _, param_text = ref.partition(":")
    if name in TRACES:
        params: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in param_text.split(","))):
            key, sep, value = item.partition("=")
            if not sep:
                raise TraceError(f"trace {ref!r}: parameter {item!r} must be key=value")
            params[key.strip()] = value.strip()
        return TRACES[name](seed, params)
    if Path(ref).is_file():
        return load_trace(ref)
    raise TraceError(f"trace {ref!r} is neither a known trace ({', '.join(TRACES)}) nor a readable file")


__all__ = [
    "DEFAULT_MIX",
    "TRACES",
    "CheckpointCosts",
    "JobClass",
    "NvlinkLinks",
    "SyntheticParams",
    "Trace",
    "TraceBuilder",
    "TraceError",
    "TracePhysics",
    "adversarial",
    "generate",
    "load_trace",
    "parse_trace",
    "resolve_trace",
    "trace_to_text",
    "two_gang",
    "write_trace",
]
