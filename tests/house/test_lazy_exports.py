"""Package `__init__`s: plain imports and one `__all__`, except the few lazy ones, whose one list is their
TYPE_CHECKING block (gpuslice.exports); each lazy one must save the plugin's start a measured 5 ms."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import gpuslice
from gpuslice.exports import _type_checking_imports

SOURCE = Path(gpuslice.__file__).parent
INITS = sorted(p for p in SOURCE.rglob("__init__.py") if "generated" not in p.parts)
LAZY = [p for p in INITS if "lazy_exports(" in p.read_text()]
# The lazy packages and why: each is imported by the plugin's start for a little of what it holds.
EXPECTED_LAZY = {
    "gpuslice.discovery.nvml": "a start on the fake backend loads none of it; its modules cost about 14 ms",
    "gpuslice.sharing.dynamic": "a plugin without dynamic MIG reads the plan and a file name; the rest about 10 ms",
    "gpuslice.wire": "a process loads only the gRPC APIs it speaks (the device plugin none of DRA's)",
}


# submodules a lazy package's parent loads itself (gpuslice.sharing's dispatcher builds dynamic plans)
LOADED_BY_PARENT = {"gpuslice.sharing.dynamic": ["gpuslice.sharing.dynamic.plan"]}


def package_of(path: Path) -> str:
    return ".".join(("gpuslice", *path.parent.relative_to(SOURCE).parts))


def test_only_the_measured_packages_are_lazy() -> None:
    assert {package_of(p) for p in LAZY} == set(EXPECTED_LAZY)


@pytest.mark.parametrize("path", [p for p in INITS if p not in LAZY], ids=package_of)
def test_a_plain_package_imports_what_it_exports_and_lists_it_once(path: Path) -> None:
    tree = ast.parse(path.read_text())
    assert not any(isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING" for n in tree.body)
    exported = [n for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "__all__"]
    package = importlib.import_module(package_of(path))
    if not exported:
        return  # a package with no re-exports: its docstring only
    names = ast.literal_eval(exported[0].value)
    assert len(names) == len(set(names)), f"{package_of(path)}: a name listed twice in __all__"
    assert all(hasattr(package, name) for name in names)


@pytest.mark.parametrize("path", LAZY, ids=package_of)
def test_a_lazy_package_resolves_every_name_of_its_one_list(path: Path) -> None:
    where = _type_checking_imports(str(path))
    package = importlib.import_module(package_of(path))
    assert set(where) <= set(package.__all__)
    for alias, (home, name) in where.items():
        module = importlib.import_module(home)
        expected = getattr(module, name, None) or importlib.import_module(f"{home}.{name}")
        assert getattr(package, alias) is expected, f"{package_of(path)}.{alias}"
    # a name equal to a submodule's would be the module once that submodule is imported
    submodules = {module.name for module in pkgutil.iter_modules([str(path.parent)])}
    assert submodules.isdisjoint(where)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        package.no_such_name  # noqa: B018


@pytest.mark.parametrize("package", sorted(EXPECTED_LAZY))
def test_a_lazy_package_loads_nothing_until_a_name_is_used(package: str) -> None:
    code = f"import sys, {package} as p; print(sorted(m for m in sys.modules if m.startswith(p.__name__ + '.')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert ast.literal_eval(loaded.strip()) == LOADED_BY_PARENT.get(package, []), f"importing {package} loaded {loaded}"
