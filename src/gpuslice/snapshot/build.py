"""Nodes, pods and DRA objects (Kubernetes JSON) into a Snapshot: GPUs from allocatable resources, the
GFD-compatible labels and ResourceSlices; each pod's effective requests. Guesses are recorded, not hidden."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuslice.config.limits import MAX_REPLICAS
from gpuslice.discovery.nodespec import MAX_GPUS_PER_NODE
from gpuslice.dra.names import DEFAULT_DRIVER, NVIDIA_DRIVER
from gpuslice.dra.quantity import QuantityError
from gpuslice.gpu.mig import catalogue_for
from gpuslice.sharing.bases import GPU_RESOURCE
from gpuslice.snapshot.model import SnapNode, SnapPod, Snapshot
from gpuslice.snapshot.quantity import count, mebibytes, milli
from gpuslice.snapshot.source import ClusterObjects
from gpuslice.units import MILLI

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
PRODUCT_LABEL = "nvidia.com/gpu.product"
COUNT_LABEL = "nvidia.com/gpu.count"
MEMORY_LABEL = "nvidia.com/gpu.memory"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
SHARING_LABEL = "nvidia.com/gpu.sharing-strategy"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
GPU_DRIVERS = frozenset({DEFAULT_DRIVER, NVIDIA_DRIVER})
UNKNOWN_MODEL = "unknown"
DEFAULT_SM_SLICES = 7  # A100, H100, H200; the catalogue says when the model is known (A30: 4)
_PROFILE = re.compile(r"([0-9]{1,2})g\.[0-9]{1,4}gb")
_SPLIT_SUFFIX = re.compile(r"-(SHARED|MIG-.*)$")
GUESSES_SHOWN = 50  # guesses are grouped by kind; a kind met more often is counted, not listed


@dataclass
class _Notes:
    guesses: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    skipped: list[str] = field(default_factory=list)

    def guess(self, kind: str, who: str) -> None:
        self.guesses[kind].append(who)

    def lines(self) -> tuple[str, ...]:
        out = []
        for kind, who in self.guesses.items():
            shown = ", ".join(who[:5]) + (f" and {len(who) - 5} more" if len(who) > 5 else "")
            out.append(f"{kind}: {shown}")
        return tuple(out[:GUESSES_SHOWN])


def build_snapshot(objects: ClusterObjects) -> Snapshot:
    notes = _Notes()
    devices = _dra_devices(objects.resource_slices or (), notes)
    nodes = sorted(
        (node for node in (_node(item, devices, notes) for item in objects.nodes) if node is not None),
        key=lambda node: node.name,
    )
    by_name = {node.name: node for node in nodes}
    claimed = _claimed(objects.resource_claims or (), devices)
    pods = [pod for pod in (_pod(item, by_name, claimed, notes) for item in objects.pods) if pod is not None]
    pods.sort(key=lambda pod: (not pod.node, pod.created, pod.key))
    return Snapshot(
        nodes=tuple(nodes),
        pods=tuple(pods),
        dra="not served" if objects.resource_slices is None else "served",
        guesses=notes.lines(),
        skipped=tuple(notes.skipped),
    )


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _name(item: Any, kind: str, notes: _Notes) -> str | None:
    name = _get(item, "metadata", "name")
    if not isinstance(name, str) or not name or len(name) > 253:
        notes.skipped.append(f"a {kind} without a valid metadata.name")
        return None
    return name


def _int_label(labels: Mapping[str, Any], key: str, limit: int) -> int | None:
    text = labels.get(key)
    if isinstance(text, str) and text.isascii() and text.isdigit() and len(text) <= 9 and int(text) <= limit:
        return int(text)
    return None


def _resources(block: Any) -> dict[str, str | int]:
    if not isinstance(block, Mapping):
        return {}
    return {str(k): v for k, v in block.items() if isinstance(v, str | int) and not isinstance(v, bool)}


def _sm_slices(model: str, memory_mib: int) -> int:
    catalogue = catalogue_for(model, memory_mib)
    return catalogue.sm_slices if catalogue is not None else DEFAULT_SM_SLICES


@dataclass(frozen=True)
class _DraDevice:
    node: str
    kind: str  # gpu | mig | other
    gpu: str  # the physical GPU it is on (uuid, else the device name)
    model: str
    profile: str


def _dra_devices(slices: Iterable[Any], notes: _Notes) -> dict[tuple[str, str, str], _DraDevice]:
    """(driver, pool, device) -> device, for the GPU drivers' slices (gpuslice's and NVIDIA's name)."""
    found: dict[tuple[str, str, str], _DraDevice] = {}
    for item in slices:
        driver, pool = _get(item, "spec", "driver"), _get(item, "spec", "pool", "name")
        node = _get(item, "spec", "nodeName") or pool
        if driver not in GPU_DRIVERS or not isinstance(pool, str) or not isinstance(node, str):
            continue
        for device in _get(item, "spec", "devices") or ():
            name = _get(device, "name")
            if not isinstance(name, str):
                notes.skipped.append(f"a device without a name in a ResourceSlice of pool {pool}")
                continue
            attributes = _get(device, "attributes") or _get(device, "basic", "attributes") or {}
            kind = _get(attributes, "type", "string") or "gpu"
            uuid = _get(attributes, "parentUUID", "string") or _get(attributes, "uuid", "string") or name
            model = _get(attributes, "productName", "string") or ""
            profile = _get(attributes, "profile", "string") or ""
            found[(driver, pool, name)] = _DraDevice(node, str(kind), str(uuid), str(model), str(profile))
    return found


def _node(item: Any, devices: Mapping[tuple[str, str, str], _DraDevice], notes: _Notes) -> SnapNode | None:
    name = _name(item, "node", notes)
    if name is None:
        return None
    labels = _get(item, "metadata", "labels") or {}
    labels = labels if isinstance(labels, Mapping) else {}
    allocatable = _resources(_get(item, "status", "allocatable"))
    try:
        cpu = milli(allocatable.get("cpu", 0))
        memory = mebibytes(allocatable.get("memory", 0))
        advertised = count(allocatable.get(GPU_RESOURCE, 0))
        mig = {
            k[len(MIG_RESOURCE_PREFIX) :]: count(v) for k, v in allocatable.items() if k.startswith(MIG_RESOURCE_PREFIX)
        }
    except QuantityError as exc:
        notes.skipped.append(f"node {name}: {exc}")
        return None
    if "cpu" not in allocatable or "memory" not in allocatable:
        notes.guess("nodes without allocatable CPU or memory (counted as 0)", name)
    product = labels.get(PRODUCT_LABEL)
    model = _SPLIT_SUFFIX.sub("", product) if isinstance(product, str) and product else ""
    memory_mib = _int_label(labels, MEMORY_LABEL, 10**7) or 0
    replicas = _int_label(labels, REPLICAS_LABEL, MAX_REPLICAS) or 1
    labelled = _int_label(labels, COUNT_LABEL, MAX_GPUS_PER_NODE)
    strategy = labels.get(MIG_STRATEGY_LABEL)
    mig = {profile: n for profile, n in mig.items() if n > 0}
    own = [d for d in devices.values() if d.node == name]
    if mig or (strategy == "mixed" and not advertised):
        sharing = "mig-mixed"
        sm = _sm_slices(model, memory_mib)
        slices = sum(_profile_slices(profile) * n for profile, n in mig.items())
        gpus = labelled if labelled is not None else max(1, math.ceil(slices / sm))
        if labelled is None:
            notes.guess(f"MIG nodes without {COUNT_LABEL} (GPUs counted from the MIG slices)", name)
        gpus += advertised if labelled is None else 0
    elif strategy == "single" and advertised and isinstance(product, str) and "-MIG-" in product:
        sharing = "mig-single"
        sm = _sm_slices(model, memory_mib)
        gpus = max(1, math.ceil(advertised * _profile_slices(product.split("-MIG-")[-1]) / sm))
        notes.guess("MIG single nodes (GPUs counted from the MIG devices)", name)
        mig = {product.split("-MIG-")[-1]: advertised}
    elif advertised:
        strategy_label = labels.get(SHARING_LABEL)
        sharing = strategy_label if strategy_label in ("time-slicing", "mps") and replicas > 1 else "none"
        if sharing == "none":
            replicas = 1
        if isinstance(product, str) and product.endswith("-SHARED") and sharing == "none":
            notes.guess(f"shared GPU nodes without {REPLICAS_LABEL} (one replica per GPU)", name)
        gpus = labelled if labelled is not None else math.ceil(advertised / replicas)
    elif own:
        sharing = "dra"
        gpus = len({d.gpu for d in own if d.kind in ("gpu", "mig")})
        model = model or next((d.model for d in own if d.model), "")
    else:
        gpus, sharing = 0, "none"
    gpus = min(gpus, MAX_GPUS_PER_NODE)
    if gpus and not model:
        model = UNKNOWN_MODEL
        notes.guess(f"GPU nodes without {PRODUCT_LABEL} (model '{UNKNOWN_MODEL}')", name)
    return SnapNode(
        name=name,
        gpus=gpus,
        gpu_model=model if gpus else "",
        gpu_memory_mib=memory_mib if gpus else 0,
        cpu_milli=cpu,
        memory_mib=memory,
        sharing=sharing,
        replicas=replicas,
        mig=tuple(sorted(mig.items())),
    )


def _profile_slices(profile: str) -> int:
    match = _PROFILE.match(profile)
    return int(match[1]) if match else 1


def _claimed(claims: Iterable[Any], devices: Mapping[tuple[str, str, str], _DraDevice]) -> dict[str, list[_DraDevice]]:
    """Pod uid -> the GPU devices of the allocated claims it reserves."""
    out: dict[str, list[_DraDevice]] = defaultdict(list)
    for claim in claims:
        results = _get(claim, "status", "allocation", "devices", "results") or ()
        held = [
            devices.get((str(_get(r, "driver")), str(_get(r, "pool")), str(_get(r, "device"))))
            for r in results
            if _get(r, "driver") in GPU_DRIVERS
        ]
        for user in _get(claim, "status", "reservedFor") or ():
            uid = _get(user, "uid")
            if isinstance(uid, str):
                out[uid].extend(d if d is not None else _DraDevice("", "gpu", "", "", "") for d in held)
    return out


def _effective(spec: Mapping[str, Any], who: str, notes: _Notes) -> dict[str, int]:
    """Kubernetes' effective pod request per resource: max(Σ containers, max init container) + overhead;
    a container's limit stands for its request where it sets no request (as the API server defaults it)."""

    def of(container: Any) -> dict[str, int]:
        resources = _get(container, "resources") or {}
        merged = {
            **_resources(_get(resources, "limits")),
            **_resources(_get(resources, "requests")),
        }
        return {key: _amount(key, value) for key, value in merged.items() if _wanted(key)}

    total: Counter[str] = Counter()
    for container in spec.get("containers") or ():
        total.update(of(container))
    for container in spec.get("initContainers") or ():
        for key, value in of(container).items():
            total[key] = max(total[key], value)
    for key, extra in _resources(spec.get("overhead")).items():
        if _wanted(key):
            total[key] += _amount(key, extra)
    return dict(total)


def _wanted(key: str) -> bool:
    return key in ("cpu", "memory", GPU_RESOURCE) or key.startswith(MIG_RESOURCE_PREFIX)


def _amount(key: str, value: Any) -> int:
    if key == "cpu":
        return milli(value)
    if key == "memory":
        return mebibytes(value)
    return count(value)


def _pod(
    item: Any, nodes: Mapping[str, SnapNode], claimed: Mapping[str, list[_DraDevice]], notes: _Notes
) -> SnapPod | None:
    name = _name(item, "pod", notes)
    if name is None:
        return None
    namespace = str(_get(item, "metadata", "namespace") or "default")
    who = f"{namespace}/{name}"
    phase = str(_get(item, "status", "phase") or "Pending")
    if phase in ("Succeeded", "Failed"):
        return None  # a finished pod holds nothing
    spec = _get(item, "spec")
    if not isinstance(spec, Mapping):
        notes.skipped.append(f"pod {who}: no spec")
        return None
    try:
        requests = _effective(spec, who, notes)
    except QuantityError as exc:
        notes.skipped.append(f"pod {who}: {exc}")
        return None
    node_name = spec.get("nodeName") or ""
    node = nodes.get(node_name) if isinstance(node_name, str) else None
    if node_name and node is None:
        notes.guess("pods on a node that was not listed (treated as not scheduled)", who)
        node_name = ""
    if "cpu" not in requests and "memory" not in requests:
        notes.guess("pods without a CPU or memory request (counted as 0)", who)
    num_gpu, gpu_milli = _gpus(requests, node, claimed.get(str(_get(item, "metadata", "uid") or "")), who, notes)
    selector = spec.get("nodeSelector") or {}
    wanted = selector.get(PRODUCT_LABEL) if isinstance(selector, Mapping) else None
    return SnapPod(
        namespace=namespace,
        name=name,
        node=str(node_name),
        phase=phase,
        created=str(_get(item, "metadata", "creationTimestamp") or ""),
        cpu_milli=requests.get("cpu", 0),
        memory_mib=requests.get("memory", 0),
        num_gpu=num_gpu,
        gpu_milli=gpu_milli,
        spec=_SPLIT_SUFFIX.sub("", wanted) if isinstance(wanted, str) else "",
    )


def _gpus(
    requests: Mapping[str, int], node: SnapNode | None, devices: list[_DraDevice] | None, who: str, notes: _Notes
) -> tuple[int, int]:
    """(num_gpu, milli per GPU) in openb's terms: whole GPUs, or one GPU's share (a replica, a MIG device)."""
    whole = 0
    shared = 0  # milli of one GPU, summed over the pod's shares
    advertised = requests.get(GPU_RESOURCE, 0)
    sharing = node.sharing if node is not None else "none"
    if advertised and sharing in ("time-slicing", "mps") and node is not None:
        shared += advertised * MILLI // node.replicas
    elif advertised and sharing == "mig-single" and node is not None:
        profile = node.mig[0][0] if node.mig else ""
        shared += advertised * _profile_slices(profile) * MILLI // _sm_slices(node.gpu_model, node.gpu_memory_mib)
    else:
        whole += advertised
    for key, amount in requests.items():
        if key.startswith(MIG_RESOURCE_PREFIX) and amount:
            sm = _sm_slices(node.gpu_model, node.gpu_memory_mib) if node is not None else DEFAULT_SM_SLICES
            shared += amount * _profile_slices(key[len(MIG_RESOURCE_PREFIX) :]) * MILLI // sm
    for device in devices or ():
        if device.kind == "mig":
            sm = _sm_slices(node.gpu_model, node.gpu_memory_mib) if node is not None else DEFAULT_SM_SLICES
            shared += _profile_slices(device.profile) * MILLI // sm
        else:
            whole += 1
    if shared and (whole or shared > MILLI):
        notes.guess("pods with several GPU shares or shares beside whole GPUs (rounded up to whole GPUs)", who)
        return whole + math.ceil(shared / MILLI), MILLI
    if shared:
        if sharing in ("time-slicing", "mps"):
            notes.guess("time-sliced or MPS pods (a replica counted as 1/replicas of a GPU)", who)
        return 1, max(1, shared)
    return whole, MILLI if whole else 0
