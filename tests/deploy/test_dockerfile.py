"""The image: a pinned Debian base, hashed locks, a locked build backend, no pip or setuptools in the runtime
venv, no simulator extra, non-root by default, and everything it copies present. (No Docker engine runs in
the tests: the Dockerfile is checked as text, and its build steps are what tests/packaging runs.)"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.rendering import DEPLOY, PROJECT_ROOT

DOCKERFILE = (PROJECT_ROOT / "Dockerfile").read_text()
INSTRUCTIONS = [
    line.strip() for line in re.sub(r"\\\n", " ", DOCKERFILE).splitlines() if line.strip() and not line.startswith("#")
]
RUNS = " ".join(" ".join(line.split()) for line in INSTRUCTIONS if line.upper().startswith("RUN "))


def _last(instruction: str) -> str:
    found = [line for line in INSTRUCTIONS if line.upper().startswith(instruction + " ")]
    assert found, f"Dockerfile has no {instruction}"
    return found[-1].split(" ", 1)[1]


def test_every_stage_is_the_pinned_debian_python_311_base() -> None:
    base = _last("ARG").split("=", 1)
    assert base[0] == "BASE_IMAGE"
    assert re.fullmatch(r"python:3\.11(\.\d+)?-slim-(bookworm|trixie)@sha256:[0-9a-f]{64}", base[1]), base[1]
    stages = [line.split()[1] for line in INSTRUCTIONS if line.upper().startswith("FROM ")]
    assert stages == ["${BASE_IMAGE}", "${BASE_IMAGE}"]  # multi-stage: build, then runtime


def test_dependencies_and_the_build_backend_come_from_hashed_locks() -> None:
    assert "--require-hashes --no-deps -r requirements/build.lock" in RUNS
    assert "--require-hashes --no-deps -r requirements/runtime.lock" in RUNS
    assert "--no-build-isolation" in RUNS  # the backend from build.lock, nothing fetched
    assert "dev.lock" not in DOCKERFILE and "[sim]" not in RUNS


def test_the_runtime_venv_has_no_installer() -> None:
    assert "python -m venv --without-pip /opt/gpuslice" in RUNS
    copied = [line for line in INSTRUCTIONS if line.upper().startswith("COPY --FROM=")]
    assert copied == ["COPY --from=build /opt/gpuslice /opt/gpuslice"]  # not /opt/build, which has pip


def test_the_runtime_lock_leaves_out_the_simulator_and_the_installers() -> None:
    pinned = {line.split("==")[0] for line in (PROJECT_ROOT / "requirements/runtime.lock").read_text().splitlines()}
    assert not pinned & {"matplotlib", "rich", "pillow", "pip", "setuptools", "pytest"}


def test_the_default_user_is_not_root_and_matches_the_label_writer() -> None:
    user = _last("USER").split(":")[0]
    assert user.isdigit() and int(user) != 0
    writer = yaml.safe_load((DEPLOY / "base" / "label-writer.yaml").read_text())
    security: dict[str, Any] = writer["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    assert security["runAsUser"] == int(user)


def test_entrypoint_is_the_cli() -> None:
    assert _last("ENTRYPOINT") == '["gpuslice"]'


def test_everything_copied_exists_and_is_not_dockerignored() -> None:
    ignore = [line.strip() for line in (PROJECT_ROOT / ".dockerignore").read_text().splitlines()]
    patterns = [line for line in ignore if line and not line.startswith("#")]
    sources = []
    for line in INSTRUCTIONS:
        if line.upper().startswith("COPY ") and "--from=" not in line:
            sources += line.split()[1:-1]
    assert sources
    for source in sources:
        assert (PROJECT_ROOT / source).exists(), source
        assert not _ignored(source, patterns), f"{source} is excluded by .dockerignore"


def _ignored(path: str, patterns: list[str]) -> bool:
    # Docker's rule: the last matching pattern wins; "!" re-includes.
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        bare = pattern.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path.rstrip("/"), bare) or Path(path).parts[0] == bare:
            ignored = not negated
    return ignored
