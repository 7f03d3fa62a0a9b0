"""Packages that re-export lazily (gpuslice.exports) name the same things for type checkers and at run time."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import gpuslice

SOURCE = Path(gpuslice.__file__).parent
LAZY = sorted(p for p in SOURCE.rglob("__init__.py") if "lazy_exports(" in p.read_text())


def declared(path: Path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(what the TYPE_CHECKING block imports, what the lazy_exports call maps), each home -> names."""
    tree = ast.parse(path.read_text())
    typed: dict[str, set[str]] = {}
    mapped: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module, ast.unparse(statement)
                for alias in statement.names:
                    assert alias.asname == alias.name, f"{path}: {alias.name} is re-exported as itself"
                    typed.setdefault(statement.module, set()).add(alias.name)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            homes = ast.literal_eval(node.value.args[1])
            mapped = {home: set(names) for home, names in homes.items()}
    return typed, mapped


def package_of(path: Path) -> str:
    return ".".join(("gpuslice", *path.parent.relative_to(SOURCE).parts))


def test_the_lazy_packages_are_found() -> None:
    assert {package_of(p) for p in LAZY} >= {"gpuslice.gpu", "gpuslice.allocation", "gpuslice.plugin"}


@pytest.mark.parametrize("path", LAZY, ids=package_of)
def test_type_checkers_and_the_run_time_see_the_same_names(path: Path) -> None:
    typed, mapped = declared(path)
    assert typed == mapped
    package = importlib.import_module(package_of(path))
    assert sorted(package.__all__) == sorted(name for names in mapped.values() for name in names)
    for home, names in mapped.items():
        module = importlib.import_module(home)
        for name in names:
            assert getattr(package, name) is getattr(module, name), f"{package_of(path)}.{name}"
    # a name equal to a submodule's would be the module once that submodule is imported
    submodules = {module.name for module in pkgutil.iter_modules([str(path.parent)])}
    assert submodules.isdisjoint(package.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        package.no_such_name  # noqa: B018
