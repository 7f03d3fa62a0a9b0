"""docs/architecture.md draws the code as it is: each diagram arrow `A --> B` is an import of B by A."""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "gpuslice"
DOC = ROOT / "docs" / "architecture.md"


def diagrams(text: str) -> list[str]:
    return re.findall(r"```mermaid\n(.*?)```", text, flags=re.DOTALL)


def arrows(diagram: str) -> Iterator[tuple[str, str]]:
    """Every (user, used) pair of `a --> b & c --> d` lines, node labels (`id["..."]`) stripped."""
    for line in diagram.splitlines():
        if "-->" not in line:
            continue
        steps = [[name.strip() for name in part.split("&")] for part in re.sub(r'\["[^"]*"\]', "", line).split("-->")]
        for users, used in itertools.pairwise(steps):
            yield from ((user, target) for user in users for target in used)


def module_of(node_id: str) -> str:
    """A node id is the module's dotted name under gpuslice, `_` for the dot (`sim_core`: gpuslice.sim.core)."""
    return node_id.replace("_", ".")


def source_files(module: str) -> list[Path]:
    path = SRC.joinpath(*module.split("."))
    if path.is_dir():
        return sorted(p for p in path.rglob("*.py") if "generated" not in p.parts)
    return [path.with_suffix(".py")] if path.with_suffix(".py").is_file() else []


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def imports(user: str, used: str) -> bool:
    target = f"gpuslice.{used}"
    return any(name == target or name.startswith(target + ".") for p in source_files(user) for name in imported(p))


ARROWS = sorted({pair for diagram in diagrams(DOC.read_text(encoding="utf-8")) for pair in arrows(diagram)})


def test_the_diagrams_are_found() -> None:
    assert len(diagrams(DOC.read_text(encoding="utf-8"))) >= 2
    assert ("dra", "node") in ARROWS and ("sim_core", "gpu") in ARROWS


@pytest.mark.parametrize(("user", "used"), ARROWS, ids=[f"{a}-->{b}" for a, b in ARROWS])
def test_each_arrow_is_an_import(user: str, used: str) -> None:
    for node in (user, used):
        assert source_files(module_of(node)), f"{node} is not a module of gpuslice"
    assert imports(module_of(user), module_of(used)), f"{user} does not import {used}"


@pytest.mark.parametrize(
    ("line", "pairs"),
    [
        ('a["x --> y"] --> b & c', [("a", "b"), ("a", "c")]),
        ("a & b --> c --> d", [("a", "c"), ("b", "c"), ("c", "d")]),
        ('a["label"]', []),
    ],
)
def test_arrows_are_read_as_drawn(line: str, pairs: list[tuple[str, str]]) -> None:
    assert list(arrows(line)) == pairs


def test_a_missing_import_is_caught() -> None:
    assert not imports("gpu", "sharing"), "the pure model imports nothing above it"
    assert imports("dra", "node")
