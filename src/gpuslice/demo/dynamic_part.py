"""The walkthrough's dynamic-MIG part: carve a 3g.40gb on demand, watch the 1g.10gb count fall by overlap and return."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpuslice.discovery import FakeBackend, RecordsMigCalls, parse_node_spec
from gpuslice.kubelet import MockKubelet, ResourceView
from gpuslice.plugin.app import AppOptions, PluginApp
from gpuslice.plugin.dynamic_runtime import DynamicMigRuntime
from gpuslice.sharing import Isolation, Resource

WAIT_S = 10.0
LABEL_COLUMN = 14  # the walkthrough's label column
NODE_SPEC = {
    "name": "gpuslice-h100-dynamic",
    "gpus": [
        {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0", "count": 1, "mig": []}
    ],
}
CONFIG = "flags:\n  migStrategy: dynamic\n"
BIG = "nvidia.com/mig-3g.40gb"
SMALL = "nvidia.com/mig-1g.10gb"
POD = "dynamic-1"


@dataclass(frozen=True)
class DynamicStep:
    """One moment of the story and the kubelet's allocatable count of every profile then."""

    what: str
    allocatable: dict[str, int]


@dataclass
class DynamicMigPart:
    node: str
    config: str
    advertised: dict[str, int]
    pod: str = POD
    request: str = f"{BIG}: 1"
    device_id: str = ""
    created: str = ""
    envs: dict[str, str] = field(default_factory=dict)
    device_nodes: list[str] = field(default_factory=list)
    steps: list[DynamicStep] = field(default_factory=list)
    device_calls: list[str] = field(default_factory=list)
    claim: str = ""
    holds: bool = False
    evidence: list[str] = field(default_factory=list)


def run_dynamic_part(directory: Path) -> DynamicMigPart:
    """Mock kubelet + the plugin under `migStrategy: dynamic` on one H100 with MIG on and no fixed layout."""
    backend = FakeBackend(parse_node_spec(NODE_SPEC, source="<demo dynamic>"))
    directory.mkdir(parents=True, exist_ok=True)
    config_file = directory / "config.yaml"
    config_file.write_text(CONFIG)
    with MockKubelet(directory, checkpoint_enabled=False) as kubelet:
        options = AppOptions(
            backend="fake",
            config_file=str(config_file),
            kubelet_socket=str(kubelet.socket_path),
            pod_resources_socket=str(kubelet.pod_resources_socket),
            cdi_spec_dir=str(directory / "cdi"),
            nvidia_answers=False,  # the walkthrough shows the model's plain answer
        )
        app = PluginApp(options, backend=backend)
        node, plan, runtime = app.node, app.plan, app.dynamic_mig
        if runtime is None:
            raise RuntimeError("the dynamic-MIG node spec advertises no placements")
        control = runtime.dynamic.control
        recorded = control.calls if isinstance(control, RecordsMigCalls) else []  # the fake backend's control records
        part = DynamicMigPart(
            node=f"{node.name} (1 x {node.gpus[0].product_name}, MIG on, no fixed layout: node spec mig: [])",
            config="flags.migStrategy: dynamic (a gpuslice extension)",
            advertised={_short(r.name): len(r.devices) for r in plan.resources},
        )
        with app:
            _settle(kubelet, plan.resources, runtime)
            part.steps.append(DynamicStep("before", _allocatable(kubelet, plan.names)))
            allocation = kubelet.admit_one(POD, BIG)
            _settle(kubelet, plan.resources, runtime)
            part.steps.append(DynamicStep("while held", _allocatable(kubelet, plan.names)))
            runtime.wait_until_listed(WAIT_S)  # deleted before its first listing, it would wait out the grace
            kubelet.delete_pod(POD)
            kubelet.wait_for(resource=SMALL, allocatable=7, timeout=WAIT_S)
            _settle(kubelet, plan.resources, runtime)
            part.steps.append(DynamicStep("after release", _allocatable(kubelet, plan.names)))
    part.device_id = allocation.device_ids[0]
    part.envs = allocation.envs
    part.device_nodes = [path for path, _, _ in allocation.device_nodes]
    part.device_calls = [_call(call) for call in recorded]
    visible = part.envs.get("NVIDIA_VISIBLE_DEVICES", "")
    part.created = f"{visible} (GPU instance at memory slices 0-3, created by Allocate)"
    _prove(part)
    return part


def _prove(part: DynamicMigPart) -> None:
    before, held, after = (step.allocatable for step in part.steps)
    part.claim = "a 3g.40gb takes memory slices 0-3: free 1g.10gb placements fall 7 -> 3, and return when it is freed"
    part.holds = (
        (before["1g.10gb"], held["1g.10gb"], after["1g.10gb"]) == (7, 3, 7)
        and after == before
        and [c.split(" ", 1)[0] for c in part.device_calls] == ["create", "destroy"]
    )
    part.evidence = [
        f"kubelet {SMALL}: allocatable {before['1g.10gb']} -> {held['1g.10gb']} -> {after['1g.10gb']} "
        "(starts 0-3 overlap the 3g.40gb; starts 4, 5, 6 stay free)",
        f"kubelet {BIG}: allocatable stays {held['3g.40gb']} (the held one plus the free one at slice 4); "
        f"7g.80gb {before['7g.80gb']} -> {held['7g.80gb']} -> {after['7g.80gb']}",
        f"on the device: {'; then '.join(part.device_calls)} (the release was learnt from pod-resources)",
    ]


def _settle(kubelet: MockKubelet, resources: tuple[Resource, ...], runtime: DynamicMigRuntime) -> None:
    """Wait until every resource's allocatable count is what the plugin's geometry says it should be."""

    def settled(views: Mapping[str, ResourceView]) -> bool:
        return all(
            r.name in views and views[r.name].allocatable == len(r.devices) - len(runtime.geometry.unavailable(r.name))
            for r in resources
        )

    if not kubelet.wait_for(settled, timeout=WAIT_S):
        raise RuntimeError("the kubelet's counts never matched the plugin's MIG geometry")


def _allocatable(kubelet: MockKubelet, names: tuple[str, ...]) -> dict[str, int]:
    counts = {}
    for name in names:
        view = kubelet.resource(name)
        counts[_short(name)] = view.allocatable if view is not None else 0
    return counts


def _short(resource: str) -> str:
    return resource.removeprefix("nvidia.com/mig-")


def _call(call: tuple[object, ...]) -> str:
    kind, gpu, what, where = call
    if kind == "create":
        return f"create {what} at slice {where} on GPU {gpu}"
    return f"destroy GI {what}/CI {where} on GPU {gpu}"


def render_dynamic_lines(number: int, part: DynamicMigPart) -> list[str]:
    """The section's text lines, in the walkthrough's two-column layout."""
    counts = ", ".join(f"{name} {count}" for name, count in part.advertised.items())
    env = [f"{key}={value}" for key, value in sorted(part.envs.items())]
    seen = [
        row("kubelet sees", f"{step.what}: " + ", ".join(f"{n} {c}" for n, c in step.allocatable.items()))
        for step in part.steps
    ]
    visible = part.envs.get("NVIDIA_VISIBLE_DEVICES", "")
    return [
        f"{number}. Dynamic MIG: instances carved on demand",
        row("mode", "mig (dynamic)"),
        row("node", part.node),
        row("config", part.config),
        row("advertised", f"{sum(part.advertised.values())} placements, one resource per profile: {counts}"),
        *seen[:1],
        row("allocation", f"pod {part.pod} asks for {part.request}"),
        row("device", part.device_id, 5),
        row("created", part.created, 5),
        *(row("env" if i == 0 else "", item, 5) for i, item in enumerate(env)),
        *(row("device nodes" if i == 0 else "", node, 5) for i, node in enumerate(part.device_nodes)),
        *seen[1:2],
        row("release", f"pod {part.pod} deleted; the plugin saw it leave pod-resources and destroyed {visible}"),
        *seen[2:],
        row("isolation", f"{Isolation.MIG.summary}: {Isolation.MIG.why}"),
    ]


def row(label: str, value: str, indent: int = 3) -> str:
    """One line of the walkthrough's two-column layout."""
    return f"{' ' * indent}{label:<{LABEL_COLUMN}}{value}"
