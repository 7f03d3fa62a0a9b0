"""Cluster specs as one line of text (`64xdgx-h100;island=8`), built from the node-spec presets of discovery."""

from __future__ import annotations

import re

from gpuslice.discovery import PRESETS, NodeSpecError, parse_node_spec
from gpuslice.sim.core.model import ClusterSpec, SimModelError, SimNode

# CPU and memory per GPU when a spec does not say: a DGX H100 has 112 cores and 2 TiB for 8 GPUs.
DEFAULT_CPU_MILLI_PER_GPU = 14_000
DEFAULT_MEMORY_MIB_PER_GPU = 256 * 1024
DEFAULT_ISLAND_NODES = 8
# A simulated node costs ~5 KiB (its GPUs and state); 50,000 nodes (400,000 GPUs on 8-GPU nodes) is past
# the largest clusters run today and a few hundred MiB, inside a 24 GiB machine with the jobs beside it.
MAX_CLUSTER_NODES = 50_000

_GROUP = re.compile(r"(\d{1,9})x([A-Za-z0-9][A-Za-z0-9_.-]*)")  # 9 digits: far past MAX_CLUSTER_NODES, int()-safe
_OPTIONS = {"island", "cpu", "memory"}


def parse_cluster(text: str) -> ClusterSpec:
    """Build a cluster from `<count>x<preset>[+<count>x<preset>...][;island=N][;cpu=MILLI][;memory=MIB]`.

    Presets are the node-spec presets of gpuslice.discovery (dgx-h100, a100x8, h100x4, ...). Nodes are
    named node-0000, node-0001, ... in the order written; every `island` consecutive nodes form one
    NVLink island (default 8). `cpu` and `memory` are per node; by default 14 cores and 256 GiB per GPU.
    """
    parts = [part.strip() for part in text.strip().split(";")]
    groups_text, option_texts = parts[0], parts[1:]
    options: dict[str, int] = {}
    for option in option_texts:
        key, sep, value = option.partition("=")
        key = key.strip()
        if not sep or key not in _OPTIONS:
            raise SimModelError(f"cluster {text!r}: option {option!r} must be one of {sorted(_OPTIONS)} as key=value")
        number = value.strip()
        if not (number.isascii() and number.isdigit()) or len(number) > 12 or int(number) <= 0:
            raise SimModelError(f"cluster {text!r}: {key} must be a positive integer, got {value!r}")
        options[key] = int(value)
    groups: list[tuple[int, str]] = []
    for group in groups_text.split("+"):
        match = _GROUP.fullmatch(group.strip())
        if match is None:
            raise SimModelError(
                f"cluster {text!r}: {group.strip()!r} must look like <count>x<preset>, e.g. 64xdgx-h100"
            )
        count, preset = int(match.group(1)), match.group(2)
        if preset not in PRESETS:
            raise SimModelError(f"cluster {text!r}: unknown preset {preset!r}; known: {', '.join(sorted(PRESETS))}")
        if count <= 0:
            raise SimModelError(f"cluster {text!r}: node count must be positive in {group.strip()!r}")
        groups.append((count, preset))
    if sum(count for count, _ in groups) > MAX_CLUSTER_NODES:  # before building any: the count alone could fill memory
        raise SimModelError(
            f"cluster {text!r}: {sum(count for count, _ in groups)} nodes, over the limit of {MAX_CLUSTER_NODES}"
        )
    island_nodes = options.get("island", DEFAULT_ISLAND_NODES)
    nodes: list[SimNode] = []
    for count, preset in groups:
        for _ in range(count):
            position = len(nodes)
            name = f"node-{position:04d}"
            try:
                node = parse_node_spec({**PRESETS[preset], "name": name}, source=f"preset:{preset}").node
            except NodeSpecError as exc:  # a broken preset is a bug, but say which
                raise SimModelError(f"cluster {text!r}: {exc}") from exc
            gpus = len(node.gpus)
            nodes.append(
                SimNode(
                    name=name,
                    gpus=node.gpus,
                    cpu_milli=options.get("cpu", DEFAULT_CPU_MILLI_PER_GPU * max(gpus, 1)),
                    memory_mib=options.get("memory", DEFAULT_MEMORY_MIB_PER_GPU * max(gpus, 1)),
                    island=f"island-{position // island_nodes:03d}",
                )
            )
    return ClusterSpec(nodes=tuple(nodes), description=text.strip())
