"""The walkthrough itself: three sharing modes, two proofs and dynamic MIG, over real gRPC, as plain report data."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc

from gpuslice.demo.cdi import CdiPart, run_cdi_part
from gpuslice.demo.dra import DraPart, run_dra_part
from gpuslice.demo.dynamic_part import WAIT_S, DynamicMigPart, run_dynamic_part
from gpuslice.discovery import load_node_spec
from gpuslice.gpu import Node
from gpuslice.kubelet import GrantedDevices, MockKubelet
from gpuslice.plugin import PluginManager
from gpuslice.plugin.app import AppOptions, PluginApp
from gpuslice.sharing import Resource
from gpuslice.wire import deviceplugin_pb2

_SHORT_TEMP_LIMIT = 40  # keep "<temp>/gs-demo-xxxxxxxx/timeslice/<socket>" well under 107 bytes


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    preset: str
    config_yaml: str
    config_summary: str
    pods: int = 1  # pods asking for one unit each


SCENARIOS = (
    Scenario("whole", "Whole GPUs", "h100x4", "", "(defaults: no sharing, flags.migStrategy none)"),
    Scenario(
        "timeslice",
        "Time-slicing, 4 replicas per GPU",
        "h100x4",
        "sharing:\n  timeSlicing:\n    resources:\n      - name: nvidia.com/gpu\n        replicas: 4\n",
        "sharing.timeSlicing.resources: [{name: nvidia.com/gpu, replicas: 4}]",
        pods=5,
    ),
    Scenario(
        "mig",
        "MIG, 1g.10gb x 7 per GPU",
        "h100x4-mig",
        "flags:\n  migStrategy: mixed\n",
        "flags.migStrategy: mixed (node preset h100x4-mig: the 4 H100s with MIG enabled)",
    ),
)


@dataclass(frozen=True)
class PodAllocation:
    pod: str
    request: str
    device_ids: list[str]
    envs: dict[str, str]
    device_nodes: list[str]


@dataclass(frozen=True)
class ModeReport:
    key: str
    title: str
    mode: str
    node: str
    config: str
    resource: str
    advertised: int
    derivation: str
    kubelet_capacity: int
    kubelet_allocatable: int
    isolation: str
    isolation_strength: str
    isolation_why: str
    allocation: PodAllocation


@dataclass(frozen=True)
class Proof:
    claim: str
    holds: bool
    evidence: list[str]


@dataclass
class DemoReport:
    node: str
    gpus: list[str]
    socket_dir: str
    modes: list[ModeReport] = field(default_factory=list)
    proofs: list[Proof] = field(default_factory=list)
    dynamic_mig: DynamicMigPart | None = None
    cdi: CdiPart | None = None
    dra: DraPart | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        dynamic_holds = self.dynamic_mig is None or self.dynamic_mig.holds
        dra_holds = self.dra is None or self.dra.holds
        cdi_holds = self.cdi is None or self.cdi.holds
        return all(proof.holds for proof in self.proofs) and dynamic_holds and cdi_holds and dra_holds

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def short_temp_root() -> Path:
    """The system temp dir if its path is short, else /tmp: Unix socket paths must stay under 107 bytes."""
    candidate = Path(tempfile.gettempdir())
    return candidate if len(str(candidate)) <= _SHORT_TEMP_LIMIT else Path("/tmp")


def run_demo(workdir: Path | None = None) -> DemoReport:
    """Run every scenario and the proofs; the temp dir is removed afterwards unless `workdir` was given."""
    started = time.perf_counter()
    root = workdir or Path(tempfile.mkdtemp(prefix="gs-demo-", dir=short_temp_root()))
    default_node = load_node_spec("preset:h100x4").node
    report = DemoReport(node=default_node.name, gpus=_describe_gpus(default_node), socket_dir=str(root))
    try:
        for scenario in SCENARIOS:
            with _running(scenario, root / scenario.key) as (kubelet, manager, resource, node):
                allocations = [
                    kubelet.admit_one(f"{scenario.key}-{n + 1}", resource.name) for n in range(scenario.pods)
                ]
                report.modes.append(_mode_report(scenario, kubelet, resource, node, allocations[0]))
                if scenario.key == "timeslice":
                    report.proofs.append(_same_gpu_proof(resource, allocations[0], allocations[-1]))
                    report.proofs.append(_unhealthy_proof(kubelet, manager, resource, node))
        report.dynamic_mig = run_dynamic_part(root / "dynamic-mig")
        report.cdi = run_cdi_part(root / "cdi")
        report.dra = run_dra_part(root / "dra")
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    report.seconds = round(time.perf_counter() - started, 2)
    return report


@contextmanager
def _running(scenario: Scenario, directory: Path) -> Iterator[tuple[MockKubelet, PluginManager, Resource, Node]]:
    """A mock kubelet and an in-process plugin (PluginApp) for one scenario, both stopped on exit."""
    config_file = directory / "config.yaml"
    directory.mkdir(parents=True, exist_ok=True)
    config_file.write_text(scenario.config_yaml)
    with MockKubelet(directory, checkpoint_enabled=False) as kubelet:
        options = AppOptions(
            backend="fake",
            node_spec=f"preset:{scenario.preset}",
            config_file=str(config_file),
            kubelet_socket=str(kubelet.socket_path),
            pod_resources_socket=str(kubelet.pod_resources_socket),
            cdi_spec_dir=str(directory / "cdi"),
            nvidia_answers=False,  # the walkthrough shows the model's plain answer
        )
        app = PluginApp(options)
        plan = app.plan
        if len(plan.resources) != 1:
            raise RuntimeError(f"scenario {scenario.key} should advertise one resource, not {list(plan.names)}")
        resource = plan.resources[0]
        with app:
            if not kubelet.wait_for(resource=resource.name, allocatable=len(resource.devices), timeout=WAIT_S):
                raise RuntimeError(f"the kubelet never saw {resource.name} with {len(resource.devices)} devices")
            yield kubelet, app.manager, resource, app.node


def _mode_report(
    scenario: Scenario, kubelet: MockKubelet, resource: Resource, node: Node, allocation: GrantedDevices
) -> ModeReport:
    view = kubelet.resource(resource.name)
    assert view is not None
    return ModeReport(
        key=scenario.key,
        title=scenario.title,
        mode=resource.mode,
        node=f"{node.name} ({len(node.gpus)} x {node.gpus[0].product_name})",
        config=scenario.config_summary,
        resource=resource.name,
        advertised=len(resource.devices),
        derivation=resource.derivation,
        kubelet_capacity=view.capacity,
        kubelet_allocatable=view.allocatable,
        isolation=resource.isolation.value,
        isolation_strength=resource.isolation.strength,
        isolation_why=resource.isolation.why,
        allocation=_pod_allocation(f"{scenario.key}-1", allocation),
    )


def _pod_allocation(pod: str, allocation: GrantedDevices) -> PodAllocation:
    return PodAllocation(
        pod=pod,
        request=f"{allocation.resource}: {len(allocation.device_ids)}",
        device_ids=list(allocation.device_ids),
        envs=allocation.envs,
        device_nodes=[path for path, _, _ in allocation.device_nodes],
    )


def _same_gpu_proof(resource: Resource, first: GrantedDevices, last: GrantedDevices) -> Proof:
    env = "NVIDIA_VISIBLE_DEVICES"
    physical = {resource.by_id[device_id].physical_id for device_id in (*first.device_ids, *last.device_ids)}
    holds = len(physical) == 1 and first.envs.get(env) == last.envs.get(env)
    evidence = [
        f"pod timeslice-1 got {first.device_ids[0]} -> {env}={first.envs.get(env)}",
        f"pod timeslice-{len(resource.physical_gpus) + 1} got {last.device_ids[0]} -> {env}={last.envs.get(env)}",
        "(pods 1-4 were spread over the 4 GPUs by the distributed policy; pod 5 shares GPU 0 with pod 1)",
    ]
    return Proof("two time-slice replicas of one GPU resolve to the same NVIDIA_VISIBLE_DEVICES", holds, evidence)


def _unhealthy_proof(kubelet: MockKubelet, manager: PluginManager, resource: Resource, node: Node) -> Proof:
    gpu = node.gpus[1]
    before = kubelet.resource(resource.name)
    assert before is not None
    replicas = len(resource.replicas_of[gpu.uuid])
    manager.set_health(gpu.uuid, healthy=False, reason="demo: simulated Xid 79 (fallen off the bus)")
    expected = before.allocatable - replicas
    seen = kubelet.wait_for(resource=resource.name, allocatable=expected, timeout=WAIT_S)
    after = kubelet.resource(resource.name)
    assert after is not None
    refused = _raw_allocate(kubelet, resource.name, resource.replicas_of[gpu.uuid][-1].id)
    evidence = [
        f"GPU {gpu.index} ({gpu.uuid}) marked unhealthy: all {replicas} of its replicas are sent as Unhealthy",
        f"kubelet {resource.name}: allocatable {before.allocatable} -> {after.allocatable}, "
        f"capacity stays {after.capacity}",
        f"Allocate of {resource.replicas_of[gpu.uuid][-1].id} is now refused: {refused}",
    ]
    holds = (
        seen and after.allocatable == expected and after.capacity == before.capacity and refused.startswith("INVALID")
    )
    return Proof("a device marked unhealthy leaves the allocatable count", holds, evidence)


def _raw_allocate(kubelet: MockKubelet, resource: str, device_id: str) -> str:
    """Call Allocate directly on the kubelet's live connection; the status it ends with."""
    request = deviceplugin_pb2.AllocateRequest(
        container_requests=[deviceplugin_pb2.ContainerAllocateRequest(devices_ids=[device_id])]
    )
    try:
        kubelet.plugin_stub(resource).Allocate(request, timeout=WAIT_S)
    except grpc.RpcError as exc:
        return f"{exc.code().name}: {exc.details()}"
    return "OK (unexpected)"


def _describe_gpus(node: Node) -> list[str]:
    return [
        f"GPU {gpu.index}: {gpu.product_name}, {gpu.memory_mib} MiB, NUMA {gpu.numa_node}, {gpu.uuid}"
        for gpu in node.gpus
    ]
