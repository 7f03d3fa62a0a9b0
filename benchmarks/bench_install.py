"""The first command's install: what `make demo` installs on a fresh clone (requirements/demo.lock and the
editable package) beside what it installed before (all of requirements/dev.lock), each into a new virtual
environment, interleaved, with pip's cache as it is (warm after any earlier install here).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.figures import Figure

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 2
GOAL_X = 0.5  # issue 28: the first command's install part at most half of the full dev install's
PIP = ["-m", "pip", "install", "--quiet", "--disable-pip-version-check"]


DEMO_LOCKS = ("demo.lock",)  # the Makefile's demo stamp
DEV_LOCKS = ("dev.lock",)


def _install(locks: tuple[str, ...], venv: Path) -> float:
    """Seconds to make `venv` and install `locks` plus the editable package, as the Makefile does."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    requirements = [arg for lock in locks for arg in ("-r", str(ROOT / "requirements" / lock))]
    subprocess.run([python, *PIP, "--require-hashes", "--no-deps", *requirements], check=True)
    subprocess.run([python, *PIP, "--no-deps", "--no-build-isolation", "-e", str(ROOT)], check=True)
    return time.perf_counter() - started


def _count(locks: tuple[str, ...]) -> int:
    texts = [(ROOT / "requirements" / lock).read_text() for lock in locks]
    return sum(1 for text in texts for line in text.splitlines() if "==" in line and not line.startswith((" ", "#")))


def main() -> list[Figure]:
    workdir = Path(tempfile.mkdtemp(prefix="gs-install"))
    demo_s: list[float] = []
    dev_s: list[float] = []
    try:
        for number in range(ROUNDS):  # interleaved: the load and the cache treat both alike
            dev_s.append(_install(DEV_LOCKS, workdir / f"dev{number}"))
            demo_s.append(_install(DEMO_LOCKS, workdir / f"demo{number}"))
            shutil.rmtree(workdir / f"dev{number}")
            shutil.rmtree(workdir / f"demo{number}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    demo, dev = min(demo_s), min(dev_s)
    load = os.getloadavg()[0]
    print(f"{ROUNDS} rounds, interleaved, pip cache as found; {os.cpu_count()} CPUs, load average {load:.2f}")
    print(f"make demo's install (demo.lock, {_count(DEMO_LOCKS)} packages), s: " + _seconds(demo_s))
    print(f"before: the whole dev.lock ({_count(DEV_LOCKS)} packages), s:    " + _seconds(dev_s))
    return [
        Figure("make demo install (fresh clone), best", demo, "s", note="informational"),
        Figure("full dev install (what make demo did), best", dev, "s", note="informational"),
        Figure("make demo install / full dev install", demo / dev, "x", GOAL_X, note="same run, interleaved"),
    ]


def _seconds(samples: list[float]) -> str:
    return ", ".join(f"{sample:.1f}" for sample in samples)


if __name__ == "__main__":
    main()
