"""Fuzzing the dynamic-MIG checkpoint loader: any bytes or document give holdings or MigCheckpointError."""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gpuslice.sharing.dynamic.checkpoint import MigCheckpointError, checksum, decode, encode, read_checkpoint
from tests.support.fuzz import json_values, mutated
from tests.support.hostile import CHECKPOINT_NODE as NODE
from tests.support.hostile import sample_holdings as held

VALID = json.dumps(encode(held(), NODE.name), indent=1).encode()


@given(st.one_of(mutated(VALID), st.binary(max_size=512)))
def test_fuzz_checkpoint_files(data: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="gs") as folder:
        path = Path(folder) / "ckpt"
        path.write_bytes(data)
        with contextlib.suppress(MigCheckpointError):
            read_checkpoint(path, NODE.name)


@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["slot_id", "gpu_uuid", "gpu_index", "profile", "start", "size", "since", "seen", "mig"]),
            json_values(),
            max_size=9,
        ),
        max_size=3,
    )
)
def test_fuzz_checkpoint_documents_with_a_valid_seal(holdings: list[Any]) -> None:
    """A correctly sealed document with hostile content still gives holdings or the typed error."""
    data = {"node": NODE.name, "holdings": holdings}
    document = {"kind": "gpuslice/dynamic-mig-checkpoint", "version": 1, "checksum": checksum(data), "data": data}
    with contextlib.suppress(MigCheckpointError):
        decode(document, NODE.name)
