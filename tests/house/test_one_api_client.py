"""One module builds Kubernetes API clients: nothing outside gpuslice.kube imports lightkube or its HTTP stack."""

from __future__ import annotations

import ast
from pathlib import Path

import gpuslice

SRC = Path(gpuslice.__file__).parent
HTTP_STACK = ("lightkube", "httpx2", "httpcore2")


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_only_the_kube_package_imports_the_api_client_stack() -> None:
    outside = {
        str(path.relative_to(SRC)): sorted(imported(path) & set(HTTP_STACK))
        for path in SRC.rglob("*.py")
        if path.relative_to(SRC).parts[0] != "kube"
    }
    assert {path: names for path, names in outside.items() if names} == {}


def test_the_kube_package_builds_the_client_in_one_place() -> None:
    builders = [p.name for p in (SRC / "kube").glob("*.py") if "GenericSyncClient(" in p.read_text()]
    assert builders == ["client.py"]
