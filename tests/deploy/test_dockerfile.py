"""The image: slim Python 3.11, locked dependencies, non-root by default, and everything it copies present."""

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


def _last(instruction: str) -> str:
    found = [line for line in INSTRUCTIONS if line.upper().startswith(instruction + " ")]
    assert found, f"Dockerfile has no {instruction}"
    return found[-1].split(" ", 1)[1]


def test_every_stage_is_python_311_slim() -> None:
    stages = [line.split()[1] for line in INSTRUCTIONS if line.upper().startswith("FROM ")]
    assert stages and all(image == "python:3.11-slim" for image in stages)


def test_dependencies_come_from_the_lock() -> None:
    assert "--constraint requirements.lock" in DOCKERFILE


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
