"""Fuzzing the openb node and pod loaders: any bytes give a table or OpenbTraceError, nothing else."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gpuslice.fgd.trace import NODE_FILE, OpenbTraceError, load_nodes, load_pods
from tests.support.fuzz import mutated

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn1,96000,786432,8,V100M32\nn2,64000,262144,0,\n"
PODS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np1,1000,1024,1,500,\np2,8000,4096,2,1000,V100M32|T4\n"
CELL = st.one_of(st.sampled_from(["", "0", "1", "-1", "1000", "1001", "9" * 30, "x", '"q"']), st.text(max_size=6))


def load(data: bytes, name: str) -> None:
    with tempfile.TemporaryDirectory(prefix="gs") as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        with contextlib.suppress(OpenbTraceError):
            (load_nodes if name == NODE_FILE else load_pods)(path)


@given(st.one_of(mutated(NODES.encode()), st.binary(max_size=256)))
def test_fuzz_openb_node_bytes(data: bytes) -> None:
    load(data, NODE_FILE)


@given(
    st.one_of(
        mutated(PODS.encode()),
        st.lists(st.lists(CELL, min_size=4, max_size=7).map(",".join), max_size=5).map(
            lambda rows: (PODS.splitlines()[0] + "\n" + "\n".join(rows) + "\n").encode()
        ),
    )
)
def test_fuzz_openb_pod_rows(data: bytes) -> None:
    load(data, "openb_pod_list_default.csv")
