"""Boundaries the code keeps: capabilities asked, never backend classes or names; one CDI builder; facts once."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import gpuslice.discovery
from gpuslice.discovery import Backend, HealthSource, MigControl, Prober, TimeSliceControl

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuslice"
DISCOVERY = SRC / "discovery"
CDI_BUILDER = SRC / "allocation" / "cdi.py"
CAPABILITIES = (HealthSource, Prober, MigControl, TimeSliceControl)

Finder = Callable[[ast.Module], list[str]]


@functools.cache
def _modules() -> tuple[tuple[Path, ast.Module], ...]:
    paths = sorted(path for path in SRC.rglob("*.py") if "generated" not in path.parts)  # protoc's output apart
    return tuple((path, ast.parse(path.read_text(encoding="utf-8"))) for path in paths)


def _outside(directory: Path) -> Iterator[tuple[Path, ast.Module]]:
    return ((path, tree) for path, tree in _modules() if not path.is_relative_to(directory))


def _where(found: dict[Path, list[str]]) -> dict[str, list[str]]:
    return {str(path.relative_to(SRC)): hits for path, hits in found.items() if hits}


# Backend and control classes ---------------------------------------------------------------------


def _methods(protocol: type) -> set[str]:
    return {name for name, value in vars(protocol).items() if inspect.isfunction(value) and not name.startswith("_")}


def _discovery_classes() -> Iterator[type]:
    for info in pkgutil.walk_packages(gpuslice.discovery.__path__, "gpuslice.discovery."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == info.name:
                yield value


def _is_backend(cls: type) -> bool:
    return Backend in cls.__mro__  # a subclass; issubclass() refuses a protocol with data members


def concrete_backends_and_controls() -> frozenset[str]:
    """The classes in discovery/ that are backends or implement a capability (protocols themselves apart)."""
    names = set()
    for cls in _discovery_classes():
        if getattr(cls, "_is_protocol", False):
            continue
        if _is_backend(cls) or any(_methods(p) <= set(dir(cls)) for p in CAPABILITIES):
            names.add(cls.__name__)
    return frozenset(names)


def backend_names() -> frozenset[str]:
    """What the backends call themselves (`name`): what code outside discovery/ must never compare."""
    return frozenset(
        cls.name for cls in _discovery_classes() if _is_backend(cls) and isinstance(vars(cls).get("name"), str)
    )


def _class_refs(node: ast.expr) -> list[str]:
    elements = node.elts if isinstance(node, ast.Tuple) else [node]
    names = []
    for element in elements:
        if isinstance(element, ast.Name):
            names.append(element.id)
        elif isinstance(element, ast.Attribute):
            names.append(element.attr)
    return names


def _called(node: ast.AST, *functions: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions


def class_checks(forbidden: frozenset[str]) -> Finder:
    """isinstance / issubclass / type(x) is|== against one of `forbidden`."""

    def find(tree: ast.Module) -> list[str]:
        hits = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called(node, "isinstance", "issubclass") and len(node.args) == 2:
                hits += [f"line {node.lineno}: {name}" for name in _class_refs(node.args[1]) if name in forbidden]
            if isinstance(node, ast.Compare) and any(_called(o, "type") for o in (node.left, *node.comparators)):
                refs = [name for o in (node.left, *node.comparators) for name in _class_refs(o)]
                hits += [f"line {node.lineno}: type() vs {name}" for name in refs if name in forbidden]
        return hits

    return find


def _strings(node: ast.expr) -> list[str] | None:
    """The string constants `node` is (one, or a tuple/list/set of them); None when it is anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return values if len(values) == len(node.elts) else None
    return None


def name_comparisons(names: frozenset[str], also_allowed: frozenset[str] = frozenset({"auto"})) -> Finder:
    """Comparisons with a backend's name, or with a collection of nothing but backend kinds (`auto`...)."""

    def find(tree: ast.Module) -> list[str]:
        hits = []
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            for operand in (node.left, *node.comparators):
                values = _strings(operand)
                if values and set(values) <= names | also_allowed and set(values) & names:
                    hits.append(f"line {node.lineno}: {ast.unparse(node)}")
        return hits

    return find


FORBIDDEN_CLASSES = concrete_backends_and_controls()
BACKEND_NAMES = backend_names()


def test_the_boundary_knows_the_backends_and_controls() -> None:
    assert {"FakeBackend", "NvmlBackend", "HostPathBackend", "IdleBackend"} <= FORBIDDEN_CLASSES
    assert {"RecordingMigControl", "NvmlMigControl", "RecordingTimeSlice", "NvidiaSmiTimeSlice"} <= FORBIDDEN_CLASSES
    assert {"HealthFileSource", "NvmlHealthSource", "NvmlProbe"} <= FORBIDDEN_CLASSES
    assert "RecordsMigCalls" not in FORBIDDEN_CLASSES, "a protocol is what callers may ask"
    assert {"fake", "nvml", "hostpath", "idle"} == BACKEND_NAMES


def test_no_code_outside_discovery_asks_a_backend_or_control_for_its_class() -> None:
    find = class_checks(FORBIDDEN_CLASSES)
    assert not _where({path: find(tree) for path, tree in _outside(DISCOVERY)})


def test_no_code_outside_discovery_compares_a_backend_name() -> None:
    find = name_comparisons(BACKEND_NAMES)
    assert not _where({path: find(tree) for path, tree in _outside(DISCOVERY)})


# One CDI builder ---------------------------------------------------------------------------------


def _is_text(node: ast.expr, text: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == text


def spec_literals(tree: ast.Module) -> list[str]:
    """Dicts shaped like a CDI spec (`cdiVersion`, or `kind` with `devices`), and the version rule called."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if "cdiVersion" in keys or {"kind", "devices"} <= keys:
                hits.append(f"line {node.lineno}: a spec built by hand")
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and _is_text(node.slice, "cdiVersion"):
            hits.append(f"line {node.lineno}: cdiVersion set by hand")
        if isinstance(node, ast.Call) and _class_refs(node.func) == ["minimum_version"]:
            hits.append(f"line {node.lineno}: minimum_version called")
        if isinstance(node, ast.Constant) and node.value == "NVIDIA_VISIBLE_DEVICES=void":
            hits.append(f"line {node.lineno}: the void edit written again")
    return hits


def test_every_cdi_spec_is_built_by_the_one_builder() -> None:
    checker = SRC / "allocation" / "cdi_validate.py"  # reads specs and states the version rule
    found = {path: spec_literals(tree) for path, tree in _modules() if path not in (CDI_BUILDER, checker)}
    assert not _where(found)


# Facts written once ------------------------------------------------------------------------------


def _text_parts(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Every string constant, f-string parts included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def _writes(fragment: str) -> Finder:
    return lambda tree: [f"line {line}" for line, text in _text_parts(tree) if fragment in text and len(text) < 200]


# (what, the one module that may write it, the text that gives it away)
FACTS = [
    ("the gRPC request size cap", "wire/__init__.py", "grpc.max_receive_message_length"),
    ("a MIG capability device node", "gpu/model.py", "/dev/nvidia-caps/nvidia-cap"),
    ("the mig-minors file", "discovery/mig_minors.py", "nvidia-caps/mig-minors"),
    ("the control device nodes", "allocation/cdi.py", "/dev/nvidiactl"),
    ("the modeset node", "allocation/cdi.py", "/dev/nvidia-modeset"),
]


@pytest.mark.parametrize(("what", "home", "text"), FACTS, ids=[fact[0] for fact in FACTS])
def test_each_fact_is_written_in_one_module(what: str, home: str, text: str) -> None:
    find = _writes(text)
    where = _where({path: find(tree) for path, tree in _modules()})
    assert list(where) == [home], f"{what}: {where}"


# The finders find --------------------------------------------------------------------------------


FINDER_CASES = [
    ("isinstance(b, FakeBackend)", class_checks(frozenset({"FakeBackend"})), True),
    ("isinstance(c, (int, nvml.NvmlMigControl))", class_checks(frozenset({"NvmlMigControl"})), True),
    ("type(b) is FakeBackend", class_checks(frozenset({"FakeBackend"})), True),
    ("isinstance(c, RecordsMigCalls)", class_checks(frozenset({"FakeBackend"})), False),
    ('backend.name == "fake"', name_comparisons(frozenset({"fake"})), True),
    ('kind in ("auto", "nvml")', name_comparisons(frozenset({"nvml"})), True),
    ('value not in ("auto", "nvml", "tegra")', name_comparisons(frozenset({"nvml"})), False),
    ('layout == "auto"', name_comparisons(frozenset({"fake"})), False),
    ('spec = {"kind": k, "devices": []}', spec_literals, True),
    ('spec["cdiVersion"] = "0.3.0"', spec_literals, True),
    ('env = ["NVIDIA_VISIBLE_DEVICES=void"]', spec_literals, True),
    ('obj = {"kind": "ResourceSlice", "spec": {}}', spec_literals, False),
    ('path = f"/dev/nvidia-caps/nvidia-cap{minor}"', _writes("/dev/nvidia-caps/nvidia-cap"), True),
]


@pytest.mark.parametrize(("code", "finder", "flagged"), FINDER_CASES, ids=[case[0] for case in FINDER_CASES])
def test_the_finders_find_what_they_look_for(code: str, finder: Finder, flagged: bool) -> None:
    assert bool(finder(ast.parse(code))) is flagged
