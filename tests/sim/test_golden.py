"""`sim compare` on every built-in trace gives exactly the committed numbers and extension report rows."""

from __future__ import annotations

import json

from tests.sim.golden import GOLDEN_FILE, golden_numbers


def test_comparisons_match_the_golden_file() -> None:
    assert golden_numbers() == json.loads(GOLDEN_FILE.read_text())
