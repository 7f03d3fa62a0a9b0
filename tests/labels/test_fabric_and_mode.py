"""gpu.clique from the fabric cluster UUID and clique ID, gpu.mode from the PCI class: rules as a table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuslice.config import effective_sharing
from gpuslice.discovery import NodeSpecError, parse_node_spec
from gpuslice.discovery.nvml import NvmlBackend
from gpuslice.discovery.nvml.fabric import NVML_GPU_FABRIC_STATE_COMPLETED
from gpuslice.discovery.nvml.nodes import dgx_h100
from gpuslice.labels.nvidia import nvidia_labels
from tests.labels.helpers import H100, L4, config, node

CLUSTER = "8a4f6c2e-1b3d-4e5f-9a7b-0c1d2e3f4a5b"
OTHER = "00000000-0000-4000-8000-00000000beef"


def fabric(cluster: str = CLUSTER, clique: int = 7) -> dict[str, Any]:
    return {"cluster_uuid": cluster, "clique_id": clique}


# (id, GPU entries, expected gpu.mode, expected gpu.clique or None, expected warning fragment or None)
CASES: list[tuple[str, list[dict[str, Any]], str, str | None, str | None]] = [
    ("default-3d-controller", [{**H100, "count": 2}], "compute", None, None),
    ("vga-controller", [{**L4, "pci_class": "0x030000"}], "graphics", None, None),
    ("other-class", [{**L4, "pci_class": 0x038000}], "unknown", None, None),
    ("mixed-classes", [{**H100}, {**L4, "pci_class": 0x030000}], "unknown", None, None),
    ("one-clique", [{**H100, "count": 4, "fabric": fabric()}], "compute", f"{CLUSTER}.7", None),
    ("some-gpus-unattached", [{**H100, "fabric": fabric()}, {**H100}], "compute", f"{CLUSTER}.7", None),
    ("two-cliques", [{**H100, "fabric": fabric()}, {**H100, "fabric": fabric(clique=8)}], "compute", None, "2 fabric"),
    ("two-clusters", [{**H100, "fabric": fabric()}, {**H100, "fabric": fabric(OTHER)}], "compute", None, "cliques"),
]


@pytest.mark.parametrize(("entries", "mode", "clique", "warning"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_mode_and_clique_labels(
    entries: list[dict[str, Any]], mode: str, clique: str | None, warning: str | None
) -> None:
    cfg = config()
    labels, warnings = nvidia_labels(node(*entries), cfg, effective_sharing(cfg), "machine")
    assert labels["nvidia.com/gpu.mode"] == mode
    assert labels.get("nvidia.com/gpu.clique") == clique
    about_cliques = [w for w in warnings if "clique" in w]
    if warning is None:
        assert about_cliques == []
    else:
        assert about_cliques and all(warning in w for w in about_cliques)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"pci_class": "compute"}, "pci_class: must be a 24-bit PCI class code"),
        ({"pci_class": 0x1000000}, "pci_class: must be a 24-bit PCI class code"),
        ({"fabric": {"cluster_uuid": CLUSTER}}, "fabric: must be a mapping with exactly cluster_uuid and clique_id"),
        ({"fabric": fabric("not-a-uuid")}, "fabric.cluster_uuid: not a UUID"),
        ({"fabric": fabric(clique=-1)}, "fabric.clique_id: must be an integer from 0 to 4294967295"),
    ],
)
def test_bad_fabric_or_class_in_a_node_spec_names_the_key(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(NodeSpecError, match=message):
        parse_node_spec({"gpus": [{**H100, **entry}]})


def test_nvml_reads_the_fabric_and_sysfs_the_class(tmp_path: Path) -> None:
    fake = dgx_h100()
    cluster = bytes.fromhex(CLUSTER.replace("-", ""))
    for gpu in fake.gpus[:4]:
        gpu.fabric = (cluster, 3, NVML_GPU_FABRIC_STATE_COMPLETED)
    fake.gpus[4].fabric = (cluster, 3, 1)  # still registering: not counted
    bus = fake.gpus[0].bus_id[-12:].lower()
    (tmp_path / "sys/bus/pci/devices" / bus).mkdir(parents=True)
    (tmp_path / "sys/bus/pci/devices" / bus / "class").write_text("0x030200\n")
    gpus = NvmlBackend(fake, driver_root=tmp_path, node_name="dgx").discover().gpus
    assert [g.fabric.clique if g.fabric else None for g in gpus[:5]] == [f"{CLUSTER}.3"] * 4 + [None]
    assert gpus[0].pci_class == 0x030200 and gpus[1].pci_class is None
