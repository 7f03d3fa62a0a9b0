"""Fuzzing the DRA checkpoint: any bytes, and any sealed record, give records or CheckpointCorrupt, nothing else."""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gpuslice.dra.checkpoint import (
    CLAIM_CHECKPOINT_FORMAT,
    CheckpointCorrupt,
    ClaimRecord,
    CreatedMig,
    decode_claims,
    encode_claims,
)
from tests.support.fuzz import json_values, mutated

NODE = "node-a"
RECORD = ClaimRecord(
    "u-1",
    "default",
    "one",
    "PrepareCompleted",
    migs=(CreatedMig("gpu-3-mig-3g40gb-9-0", 3, "GPU-x", "3g.40gb", 0, 1, 0, "MIG-y", 417, 418),),
    env={"A": "b"},
    mounts=(("/tmp/nvidia-mps", "/host/pipe"),),
)
VALID = encode_claims(NODE, {"u-1": RECORD}).encode()
KEYS = [*asdict(RECORD), "mig"]


@given(st.one_of(mutated(VALID), st.binary(max_size=512)))
def test_fuzz_checkpoint_files(data: bytes) -> None:
    with contextlib.suppress(CheckpointCorrupt):
        records = decode_claims(data.decode("utf-8", "replace"), NODE)
        assert all(isinstance(record, ClaimRecord) for record in records.values())


@given(st.dictionaries(st.sampled_from(KEYS), json_values(), max_size=len(KEYS)))
def test_fuzz_sealed_records(fields: dict[str, Any]) -> None:
    """A correctly sealed record with hostile content still gives a typed record or the typed error."""
    record = {**asdict(RECORD), **fields}
    text = json.dumps(CLAIM_CHECKPOINT_FORMAT.seal(NODE, {"u-1": record}))
    with contextlib.suppress(CheckpointCorrupt):
        (decoded,) = decode_claims(text, NODE).values()
        assert all(isinstance(mig.gi_cap_minor, int) for mig in decoded.migs)
