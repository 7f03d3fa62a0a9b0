"""Fixtures: a usable kubectl (or a skip that says why) and every kustomization rendered once."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.rendering import DRA_TARGETS, TARGETS, find_kubectl, render


@pytest.fixture(scope="session")
def kubectl() -> str:
    found = find_kubectl()
    if found.path is None:
        pytest.skip(found.why_not)
    return found.path


@pytest.fixture(scope="session")
def rendered(kubectl: str) -> dict[str, list[dict[str, Any]]]:
    return {target: render(kubectl, target) for target in (*TARGETS, *DRA_TARGETS)}
