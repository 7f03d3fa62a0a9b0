"""The lock files: every pin hashed, one version per package across locks, nothing local, and what pyproject asks."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ("runtime", "build", "demo", "dev")
_PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s\\;]+)")


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def pins(lock: str) -> dict[str, str]:
    """name -> version; asserts every pin carries at least one sha256 hash."""
    text = (ROOT / "requirements" / f"{lock}.lock").read_text()
    found: dict[str, str] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        match = _PIN.match(block)
        if match is None:
            continue
        assert "--hash=sha256:" in block, f"{lock}.lock: {match.group(1)} has no hash"
        found[match.group(1).lower()] = match.group(2)
    return found


@pytest.mark.parametrize("lock", LOCKS)
def test_locks_name_packages_and_hashes_only(lock: str) -> None:
    text = (ROOT / "requirements" / f"{lock}.lock").read_text()
    assert pins(lock)
    assert not re.search(r"file:|https?://|--index-url|--extra-index-url|--find-links|/work/|/tmp/|/opt/", text)


def test_one_version_per_package_in_every_lock() -> None:
    everything = pins("dev")
    for lock in ("runtime", "build", "demo"):
        for name, version in pins(lock).items():
            assert everything.get(name) == version, (
                f"{name}: {lock}.lock has {version}, dev.lock {everything.get(name)}"
            )


def test_locks_hold_what_pyproject_asks_for() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    runtime, dev = pins("runtime"), pins("dev")
    for requirement in project["dependencies"]:
        assert _name(requirement) in runtime, requirement
    for extra in ("sim", "dev"):
        for requirement in project["optional-dependencies"][extra]:
            if not requirement.startswith("gpuslice"):
                assert _name(requirement) in dev, requirement
    assert set(pins("build")) == {_name(r) for r in pyproject["build-system"]["requires"]}


def test_the_demo_lock_is_the_runtime_the_demo_extra_and_the_build_backend() -> None:
    """`make demo` installs demo.lock first (the rest of dev.lock only for `make test`)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    demo = pins("demo")
    assert set(pins("runtime")) | set(pins("build")) <= set(demo)
    for requirement in pyproject["project"]["optional-dependencies"]["demo"]:
        assert _name(requirement) in demo, requirement
    for tool in ("pytest", "mypy", "hypothesis", "ruff", "matplotlib"):
        assert tool not in demo, f"{tool} is for `make test`, not the demo"
