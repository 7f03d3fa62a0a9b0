"""A total deadline per request, set around a request on its thread (`until`) and read by the transport.

httpx's timeouts apply to each read, so a server that trickles one byte a second would hold a request
forever. kube.transport bounds connect, TLS, every write and every read by the deadline of the request
running on this thread, which makes the deadline total.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

_DEADLINE: ContextVar[float | None] = ContextVar("gpuslice_kube_deadline", default=None)


@contextlib.contextmanager
def until(end: float) -> Iterator[None]:
    """Socket operations inside end by `end` (time.monotonic), or sooner inside an outer, earlier deadline.

    Never yield to other code inside: a generator that did would leak its deadline into its caller.
    """
    outer = _DEADLINE.get()
    token = _DEADLINE.set(end if outer is None else min(end, outer))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def ends_by(end: float) -> float:
    """`end`, or this thread's deadline when that comes sooner."""
    outer = _DEADLINE.get()
    return end if outer is None else min(end, outer)


def remaining() -> float | None:
    """Seconds left of this thread's deadline (None: no deadline)."""
    end = _DEADLINE.get()
    return None if end is None else end - time.monotonic()


def bounded(timeout: float | None, error: type[Exception]) -> float | None:
    """`timeout` cut to the time left of this thread's deadline; `error` when none is left."""
    left = remaining()
    if left is None:
        return timeout
    if left <= 0:
        raise error("the request's total deadline passed")
    return left if timeout is None else min(timeout, left)
