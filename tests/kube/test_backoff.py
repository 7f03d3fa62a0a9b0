"""RetryBackoff: never under 1 s after a fault, doubling to 30 s, jitter only lengthens, a success resets."""

from __future__ import annotations

import random

import pytest

from gpuslice.kube import ApiCounters, Limits, RetryBackoff


@pytest.mark.parametrize("seed", range(5))
def test_delays_double_to_the_cap_and_jitter_only_lengthens(seed: int) -> None:
    counters = ApiCounters()
    backoff = RetryBackoff(rng=random.Random(seed), counters=counters)
    delays = [backoff.failure() for _ in range(8)]
    for delay, base in zip(delays, [1, 2, 4, 8, 16, 30, 30, 30], strict=True):
        assert base <= delay <= base * 1.25
    assert counters.snapshot().retries == 8 and backoff.failures == 8


def test_only_a_success_starts_over() -> None:
    backoff = RetryBackoff(jitter=0)
    assert [backoff.failure() for _ in range(3)] == [1, 2, 4]
    backoff.success()
    assert backoff.failure() == 1 and backoff.failures == 1


@pytest.mark.parametrize(
    ("first", "most", "jitter"), [(0, 30, 0.25), (-1, 30, 0.25), (31, 30, 0.25), (1, 30, -0.1), (1, 30, 1.5)]
)
def test_nonsense_settings_are_refused(first: float, most: float, jitter: float) -> None:
    with pytest.raises(ValueError, match="backoff"):
        RetryBackoff(first, most, jitter)


@pytest.mark.parametrize(
    "field", [{"deadline_s": 0}, {"max_body_bytes": 10}, {"max_line_bytes": 2**40}, {"max_pages": 0}, {"page_size": 0}]
)
def test_limits_out_of_range_are_refused(field: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=f"kube limit {next(iter(field))}="):
        Limits(**field)  # type: ignore[arg-type]
