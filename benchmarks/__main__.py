"""Run every benchmark module (or those named on the command line): `python -m benchmarks [name ...]`."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from pathlib import Path


def main(selected: list[str]) -> int:
    here = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))
    if selected:
        names = [n for n in names if any(s in n for s in selected)]
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        module = importlib.import_module(f"benchmarks.{name}")
        module.main()
        print(f"--- {name} took {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
