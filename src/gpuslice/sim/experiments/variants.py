"""Named run variants (`preempt:ckpt=900`, `drf`, `kueue:overcommit=2`, `mig`, ...) and the traces that need them.

A variant is `NAME[:key=value]...`. NAME is a core placement policy, an extension (`nvlink-aware`,
`preempt`, `fifo`, `priority`, `drf`, `wdrf`, `kueue`) or, for a trace that declares GPU memory (runs on
the sharing tiers), a sharing plan (`whole`, `time-slicing`, `mps`, `mig`, `tiered`). The physics a trace
declares (Trace.physics) attach their extension to every run, whatever the variant: checkpoint costs,
fairness between tenants, NVLink slowdowns. The JSON record's `policy` is the variant text, so each row
says exactly what ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuslice.sim.core.engine import Engine, Listener, Progress, SimConfig
from gpuslice.sim.core.metrics import SimResult
from gpuslice.sim.core.model import SimModelError
from gpuslice.sim.core.placement import PlacementPolicy
from gpuslice.sim.core.queue import QueueOrder
from gpuslice.sim.extensions.checkpoint import NEVER, Checkpointing
from gpuslice.sim.extensions.drf import DrfOrder
from gpuslice.sim.extensions.fairness import Fairness
from gpuslice.sim.extensions.kueue import Kueue, KueueConfig
from gpuslice.sim.extensions.orders import ORDERS
from gpuslice.sim.extensions.preemption import Checkpoints, PreemptionConfig, Preemptor, parse_grace
from gpuslice.sim.extensions.tiers import PLAN_NAMES, TierEngine, plan_for
from gpuslice.sim.extensions.topology_penalty import TopologyPenalty
from gpuslice.sim.policies import POLICIES, NvlinkAware, make_policy
from gpuslice.sim.policies.loader import load_policy, register_policy
from gpuslice.sim.traces.trace import Trace

_SWEEP = ("none", "300", "900", "1800", "3600", "7200")
# What `sim compare --trace NAME` runs when --policies is not given.
TRACE_DEFAULT_POLICIES: dict[str, tuple[str, ...]] = {
    "preemption": (
        "gang",
        *(f"preempt:ckpt={interval}" for interval in _SWEEP),
        *(f"preempt:ckpt={interval}:grace=inf" for interval in _SWEEP[1:]),
    ),
    "tenants": ("fifo", "priority", "drf", "wdrf"),
    "topology": ("best-fit", "topology-aware", "nvlink-aware"),
    "sharing": ("whole", "time-slicing", "mps", "mig", "tiered"),
    "two-gang": ("first-fit", "gang", "kueue", "kueue:overcommit=2", "kueue:overcommit=2:block=1"),
}

_OPTIONS: dict[str, set[str]] = {
    "preempt": {"ckpt", "grace", "save", "restore", "policy"},
    "fifo": {"policy"},
    "priority": {"policy"},
    "drf": {"policy"},
    "wdrf": {"policy"},
    "kueue": {"timeout", "base", "max", "limit", "block", "quota", "overcommit", "policy"},
    "whole": set(),
    "time-slicing": {"replicas"},
    "mps": {"replicas"},
    "mig": {"layout"},
    "tiered": {"mig", "mps", "replicas"},
}


class UnknownVariant(SimModelError):
    """A variant name or option that does not exist, or does not apply to the trace."""


@dataclass(frozen=True)
class Variant:
    text: str
    name: str
    options: Mapping[str, str]


def parse_variant(text: str) -> Variant:
    name, *parts = [part.strip() for part in text.strip().split(":")]
    options: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise UnknownVariant(f"variant {text!r}: option {part!r} must be key=value")
        options[key.strip()] = value.strip()
    known = _OPTIONS.get(name, set()) if name not in POLICIES else set()
    if name not in POLICIES and name not in _OPTIONS:
        names = ", ".join([*POLICIES, *_OPTIONS])
        raise UnknownVariant(f"unknown policy {name}; known: {names}")
    unknown = sorted(set(options) - known)
    if unknown:
        raise UnknownVariant(f"variant {text!r}: unknown option(s) {unknown}; {name} takes {sorted(known) or 'none'}")
    return Variant(text.strip(), name, options)


def check_variant(text: str, trace: Trace | None = None) -> Variant:
    """Parse `text` and check that it can run on `trace` (sharing plans only on a sharing trace, and back)."""
    variant = parse_variant(text)
    is_plan = variant.name in PLAN_NAMES
    if trace is not None and _on_sharing_tiers(trace) != is_plan:
        if is_plan:
            raise UnknownVariant(f"{variant.name!r} is a sharing plan: it runs only on the sharing trace")
        raise UnknownVariant(
            f"the sharing trace compares sharing plans ({', '.join(PLAN_NAMES)}), not {variant.name!r}"
        )
    return variant


def add_user_policy(reference: str) -> str:
    """Load a policy class from `module:Name` or an installed entry point and make it a variant; its name."""
    factory = load_policy(reference)
    name = factory().name
    if name in _OPTIONS:
        raise UnknownVariant(f"{reference!r}: policy name {name!r} is a built-in variant; give the class another name")
    return register_policy(factory, POLICIES)


def default_policies(trace_name: str) -> tuple[str, ...] | None:
    return TRACE_DEFAULT_POLICIES.get(trace_name)


def run_variant(
    trace: Trace, text: str, config: SimConfig, order: str = "priority", progress: Progress | None = None
) -> SimResult:
    """Simulate `trace` under one variant; the result's policy is the variant text."""
    variant = check_variant(text, trace)
    gpu_memory = trace.physics.gpu_memory
    if gpu_memory is not None:
        plan = plan_for(variant.name, variant.options, trace.cluster)
        result = TierEngine(trace.cluster, trace.jobs, plan, gpu_memory, trace.name, progress).run()
        result.policy = variant.text
        return result
    listeners = _physics_listeners(trace, variant)
    policy, queue_order, extra = _build(variant, trace, order, listeners)
    listeners += extra
    engine = Engine(trace.cluster, trace.jobs, policy, queue_order, config, progress=progress, trace_name=trace.name)
    for listener in listeners:
        engine.add_listener(listener)
    result = engine.run()
    result.policy = variant.text
    return result


def _on_sharing_tiers(trace: Trace) -> bool:
    return trace.physics.gpu_memory is not None


def _physics_listeners(trace: Trace, variant: Variant) -> list[Listener]:
    """The extensions the trace's declared physics attach (a preempt variant brings checkpoints too)."""
    physics = trace.physics
    listeners: list[Listener] = []
    if physics.checkpoints is not None or variant.name == "preempt":
        listeners.append(_checkpoints(trace, variant))
    if physics.tenant_weights is not None:
        listeners.append(Fairness(trace.cluster, physics.tenant_weights))
    if physics.nvlink is not None:
        listeners.append(TopologyPenalty(physics.nvlink.topologies, physics.nvlink.penalties))
    return listeners


# Checkpoint costs of a preempt variant on a trace that declares none (seconds).
_DEFAULT_SAVE, _DEFAULT_RESTORE = 60.0, 120.0


def _checkpoints(trace: Trace, variant: Variant) -> Checkpoints:
    costs = trace.physics.checkpoints
    known = dict(costs.checkpoints) if costs is not None else {}
    options = variant.options
    text = options.get("ckpt", None if known else "none")
    try:
        save = float(options.get("save", costs.save if costs is not None else _DEFAULT_SAVE))
        restore = float(options.get("restore", costs.restore if costs is not None else _DEFAULT_RESTORE))
        interval = None if text is None or text.lower() in {"none", "never", "0"} else float(text)
        every = Checkpointing(interval, save, restore)
    except ValueError as exc:
        raise UnknownVariant(f"{variant.text}: ckpt, save and restore must be seconds ({exc})") from None
    if text is None:
        return Checkpoints(known)
    if known:  # override the jobs that checkpoint in the trace; the others keep never checkpointing
        return Checkpoints({job: every if ckpt is not NEVER else NEVER for job, ckpt in known.items()})
    return Checkpoints({}, default=every)


def _build(
    variant: Variant, trace: Trace, order: str, listeners: list[Listener]
) -> tuple[PlacementPolicy, QueueOrder, list[Listener]]:
    name, options = variant.name, variant.options
    default_order = ORDERS[order]()
    if name == NvlinkAware.name:  # with the trace's own topologies when it has them
        nvlink = trace.physics.nvlink
        return NvlinkAware(nvlink.topologies if nvlink is not None else None), default_order, []
    if name in POLICIES:
        return make_policy(name), default_order, []
    placement = _placement(options.get("policy"), "first-fit" if name == "kueue" else "gang")
    if name == "preempt":
        checkpoints = next(listener for listener in listeners if isinstance(listener, Checkpoints))
        try:
            config = PreemptionConfig(grace=parse_grace(options.get("grace", "0")))
        except ValueError as exc:
            raise UnknownVariant(f"preempt: {exc}") from None
        return placement, default_order, [Preemptor(checkpoints, config)]
    if name in ("fifo", "priority"):
        return placement, ORDERS[name](), []
    if name in ("drf", "wdrf"):
        weights = (trace.physics.tenant_weights or {}) if name == "wdrf" else {}
        return placement, DrfOrder(weights, name), []
    return placement, default_order, [Kueue(_kueue_config(options, trace))]


def _placement(name: str | None, default: str) -> PlacementPolicy:
    chosen = name or default
    if chosen not in POLICIES:
        raise UnknownVariant(f"policy={chosen!r} is not a placement policy; known: {', '.join(POLICIES)}")
    return make_policy(chosen)


def _kueue_config(options: Mapping[str, str], trace: Trace) -> KueueConfig:
    def number(key: str, default: float) -> float:
        try:
            return float(options.get(key, default))
        except ValueError:
            raise UnknownVariant(f"kueue: {key} must be a number, got {options[key]!r}") from None

    limit = options.get("limit")
    quota: float | None = number("quota", 0) or None
    overcommit = number("overcommit", 0)
    if overcommit:
        quota = overcommit * trace.cluster.total_gpus
    try:
        return KueueConfig(
            timeout=number("timeout", 300),
            backoff_base=number("base", 60),
            backoff_max=number("max", 3600),
            backoff_limit=None if limit in (None, "", "none") else int(limit),
            block_admission=options.get("block", "0").lower() in {"1", "true", "yes"},
            quota_gpus=quota,
        )
    except ValueError as exc:
        raise UnknownVariant(f"kueue: {exc}") from None
