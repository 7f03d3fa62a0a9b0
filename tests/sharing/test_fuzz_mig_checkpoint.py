"""Fuzzing the dynamic-MIG checkpoint loader: any bytes or document give holdings or MigCheckpointError."""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gpuslice.fsutil.checkpoint import digest
from gpuslice.sharing.dynamic.checkpoint import (
    MIG_CHECKPOINT_FORMAT,
    MigCheckpointError,
    decode_holdings,
    encode_holdings,
    read_checkpoint,
)
from tests.support.fuzz import json_values, mutated
from tests.support.hostile import CHECKPOINT_NODE as NODE
from tests.support.hostile import sample_holdings as held

VALID = json.dumps(encode_holdings(held(), NODE.name), indent=1).encode()


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
    with contextlib.suppress(MigCheckpointError):
        decode_holdings(MIG_CHECKPOINT_FORMAT.seal(NODE.name, {"holdings": holdings}), NODE.name)
    data = {"node": NODE.name, "holdings": holdings}  # the same in the version 1 layout, upgraded on read
    with contextlib.suppress(MigCheckpointError):
        document = {"kind": MIG_CHECKPOINT_FORMAT.kind, "version": 1, "checksum": digest(data), "data": data}
        decode_holdings(document, NODE.name)
