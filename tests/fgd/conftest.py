"""Fixtures on the real openb trace: skipped, with the reason, when the trace folder is not there."""

from __future__ import annotations

import pytest

from gpuslice.fgd.engine import Workload
from gpuslice.fgd.trace import OpenbTraceError, load_trace, resolve_trace_dir


@pytest.fixture(scope="session")
def trace_dir():  # type: ignore[no-untyped-def]
    try:
        return resolve_trace_dir()
    except OpenbTraceError as error:
        pytest.skip(f"openb trace not available: {error}")


@pytest.fixture(scope="session")
def default_workload(trace_dir):  # type: ignore[no-untyped-def]
    return Workload.from_trace(load_trace("default", trace_dir))
