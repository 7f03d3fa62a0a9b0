"""Fuzzing the node-spec parser: any file or mapping gives a NodeSpec or NodeSpecError, nothing else."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gpuslice.discovery import NodeSpecError, load_node_spec, parse_node_spec
from tests.support.fuzz import json_values, mutated, yaml_documents

KEYS = [
    "name",
    "gpus",
    "model",
    "count",
    "memory_mib",
    "compute_capability",
    "numa_node",
    "mig",
    "pci_bus_id",
    "driver_version",
    "cuda_version",
    "machine_type",
    "health_events",
    "topology",
    "preset",
    "links",
    "nvlink",
    "pairs",
]
VALID = (
    "name: n\ngpus:\n  - model: NVIDIA H100 80GB HBM3\n    count: 2\n    memory_mib: 81559\n"
    "    compute_capability: '9.0'\n    numa_node: 0\n    mig: [1g.10gb, 3g.40gb]\ntopology: {preset: dgx-h100}\n"
)
GPU_ENTRY = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from(["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "X", ""]),
        "count": st.integers(-2, 100),
        "memory_mib": st.one_of(st.integers(-1, 200_000), st.text(max_size=3)),
        "compute_capability": st.sampled_from(["9.0", "8.0", "7.5", "x", "", "99.99"]),
        "numa_node": st.one_of(st.integers(-1, 3), st.none(), st.booleans()),
        "mig": st.one_of(st.lists(st.sampled_from(["1g.10gb", "3g.40gb", "7g.80gb", "2g.20gb", "x"]), max_size=9)),
        "pci_bus_id": st.text(max_size=12),
    },
)


def load_file(data: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="gs") as folder:
        path = Path(folder) / "node.yaml"
        path.write_bytes(data)
        with contextlib.suppress(NodeSpecError):
            load_node_spec(str(path))


@given(st.one_of(mutated(VALID.encode()), st.binary(max_size=512), yaml_documents(KEYS).map(str.encode)))
def test_fuzz_node_spec_files(data: bytes) -> None:
    load_file(data)


@given(
    st.one_of(
        json_values(),
        st.fixed_dictionaries(
            {"gpus": st.lists(GPU_ENTRY, max_size=4)},
            optional={"name": st.text(max_size=8), "topology": json_values(), "health_events": json_values()},
        ),
    )
)
def test_fuzz_node_spec_mappings(data: Any) -> None:
    with contextlib.suppress(NodeSpecError):
        parse_node_spec(data)
