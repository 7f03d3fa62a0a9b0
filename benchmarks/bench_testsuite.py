"""`make test`'s wall time beside the same checks run as they were before (one after the other, the test
suite on one CPU), in one run on this machine: the developer's and CI's loop on every change.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.figures import Figure

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GOAL_X = 0.5  # issue 28: make test at most half of the serial checks' wall time
# Issue 28's own measure: `make test` took 3:32 (212 s, the fastest of its runs) on this 2-CPU machine; half.
ISSUE_MAKE_TEST_S = 212.0
GOAL_S = ISSUE_MAKE_TEST_S / 2
# What `make test` ran before: each check in turn, then pytest in one process (-p no:xdist keeps it there).
SERIAL = (
    [str(BIN / "ruff"), "check", "src", "tests", "benchmarks", "tools"],
    [str(BIN / "ruff"), "format", "--check", "src", "tests", "benchmarks", "tools"],
    [str(BIN / "mypy")],
    [str(BIN / "lint-imports")],
    [str(BIN / "pytest"), "-q", "-p", "no:xdist", "-p", "no:cacheprovider"],
)
MAKE_TEST = ["make", "--no-print-directory", "test"]


def _timed(commands: tuple[list[str], ...]) -> tuple[float, str]:
    """Wall seconds of the commands in turn, and pytest's summary line."""
    started = time.perf_counter()
    tail = ""
    for command in commands:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        output = (done.stdout + done.stderr).strip()
        summaries = [line for line in output.splitlines() if " passed" in line]
        tail = summaries[-1].strip("= ") if summaries else tail
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {output[-2000:]}")
    return time.perf_counter() - started, tail


def main() -> list[Figure]:
    subprocess.run([str(BIN / "mypy")], cwd=ROOT, capture_output=True, check=False)  # both find mypy's cache warm
    serial_s, serial_tail = _timed(SERIAL)
    serial_load = os.getloadavg()[0]
    parallel_s, parallel_tail = _timed((MAKE_TEST,))
    parallel_load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs; one run of each, one after the other")
    print(f"before (checks in turn, pytest on one CPU): {serial_s:6.1f} s  load {serial_load:.2f}  {serial_tail}")
    print(f"make test (checks at once, pytest -n):      {parallel_s:6.1f} s  load {parallel_load:.2f}  {parallel_tail}")
    return [
        Figure("make test, wall", parallel_s, "s", GOAL_S, note=f"issue 28: half of its {ISSUE_MAKE_TEST_S:.0f} s"),
        Figure("the same checks in turn, pytest serial", serial_s, "s", note="informational"),
        Figure("make test / checks in turn", parallel_s / serial_s, "x", GOAL_X, note="same run"),
    ]


if __name__ == "__main__":
    main()
