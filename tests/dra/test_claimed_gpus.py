"""The start-up peek at the DRA checkpoint is lenient and bounded: no bad file stops `gpuslice dra`."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuslice.dra.checkpoint import MAX_BYTES, gpus_with_prepared_migs

CASES = [
    ("missing", None, ()),
    ("deep nesting", b"[" * 100_000, ()),
    ("not UTF-8", b"\xff\xfe{}", ()),
    ("over the size cap", b" " * (MAX_BYTES + 1), ()),
    ("wrong shapes", b'{"claims": {"a": {"migs": [1]}}}', ()),
    ("one MIG device", b'{"claims": {"a": {"migs": [{"gpu_uuid": "GPU-1"}]}}}', ("GPU-1",)),
]


@pytest.mark.parametrize(("case", "content", "expected"), CASES, ids=[c[0] for c in CASES])
def test_gpus_with_prepared_migs(tmp_path: Path, case: str, content: bytes | None, expected: tuple[str, ...]) -> None:
    path = tmp_path / "checkpoint.json"
    if content is not None:
        path.write_bytes(content)
    assert gpus_with_prepared_migs(path) == expected
