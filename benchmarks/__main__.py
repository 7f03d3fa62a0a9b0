"""Run every benchmark module (or those named on the command line): `python -m benchmarks [name ...]`.

Modules whose `main()` returns figures (benchmarks.figures.Figure) get them in one table at the end, each
beside its goal; the exit status is 0 either way (a missed goal is a finding, not a crash).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import time
from pathlib import Path

from benchmarks.figures import Figure, table


def main(selected: list[str]) -> int:
    here = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
    if selected:
        names = [n for n in names if any(s in n for s in selected)]
    figures: list[Figure] = []
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        module = importlib.import_module(f"benchmarks.{name}")
        figures += module.main() or []
        print(f"--- {name} took {time.perf_counter() - started:.1f} s", flush=True)
    if figures:
        load = os.getloadavg()[0]
        print(f"\n=== summary: every figure beside its goal ({os.cpu_count()} CPUs, load average {load:.2f}) ===")
        print(table(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
