"""One name means one thing: no two modules of src/ define a public class, constant or function of the same name."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuslice"


def _public_definitions(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper() and not t.id.startswith("_")]
    return names


def test_each_public_class_and_constant_is_defined_once() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(SRC.rglob("*.py")):
        if "generated" in path.parts:
            continue  # protoc's output names follow the .proto files
        for name in _public_definitions(path):
            where[name].append(str(path.relative_to(SRC)))
    repeated = {name: places for name, places in where.items() if len(places) > 1}
    assert not repeated, f"names defined in more than one module: {repeated}"


# The mock kubelet, the CLI and the two independent simulators may reuse a function name: each is its own
# world (docs/architecture.md); everywhere else a public function name means one thing.
OWN_WORLDS = ("kubelet", "cli", "sim", "fgd")


def test_each_public_function_name_is_defined_once_outside_the_own_worlds() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC)
        if "generated" in path.parts or relative.parts[0] in OWN_WORLDS:
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
                where[node.name].append(str(relative))
    repeated = {name: places for name, places in where.items() if len(places) > 1}
    assert not repeated, f"public functions defined in more than one module: {repeated}"
