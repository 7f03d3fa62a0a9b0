"""Every selector we ship or document compiles in the DRA CEL environment, and the mock allocates as Kubernetes does."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuslice.dra import PoolSpec, build_slices, prepare_setup
from gpuslice.kubelet.dra_allocator import allocate
from gpuslice.kubelet.dra_cel import CelError, compile_selector, device_view
from tests.dra.support import DRIVER, NODE, NODE_SPEC

ROOT = Path(__file__).resolve().parents[2]
NVIDIA_DRIVER = "gpu.nvidia.com"
_BACKTICKED = re.compile(r"`([^`\n]*device\.(?:driver|attributes|capacity)[^`\n]*)`")


def documented() -> list[str]:
    """Every inline-code CEL selector of docs/ and the README."""
    found: list[str] = []
    for path in sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md"]):
        found += _BACKTICKED.findall(path.read_text())
    return list(dict.fromkeys(found))


def _expressions(node: Any) -> list[str]:
    if isinstance(node, dict):
        cel = node.get("cel")
        own = [str(cel["expression"])] if isinstance(cel, dict) and "expression" in cel else []
        return own + [e for value in node.values() for e in _expressions(value)]
    if isinstance(node, list):
        return [e for value in node for e in _expressions(value)]
    return []


def shipped() -> list[str]:
    """Every selector of the deploy/ manifests: DeviceClasses and example claim templates, every overlay
    (a Helm template is not YAML until rendered: tests/deploy checks the chart's objects)."""
    found: list[str] = []
    for path in sorted((ROOT / "deploy").rglob("*.yaml")):
        text = path.read_text()
        if "{{" in text:
            continue
        for doc in yaml.safe_load_all(text):
            found += _expressions(doc)
    return list(dict.fromkeys(found))


@pytest.fixture(scope="module")
def slices(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The test node's pool (two whole H100s, a fixed MIG layout, a dynamic-MIG GPU) as the plugin publishes it."""
    root = tmp_path_factory.mktemp("node")
    (root / "node.yaml").write_text(NODE_SPEC)
    (root / "config.yaml").write_text("version: v1\nflags:\n  migStrategy: dynamic\n")
    setup = prepare_setup("fake", str(root / "node.yaml"), str(root / "config.yaml"))
    return build_slices(PoolSpec(DRIVER, NODE), setup.devices, 1)


def _devices(slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [device for obj in slices for device in obj["spec"]["devices"]]


def test_the_docs_and_manifests_have_selectors_to_check() -> None:
    assert len(documented()) >= 6 and len(shipped()) >= 3


@pytest.mark.parametrize("expression", [*documented(), *shipped()])
def test_every_documented_and_shipped_selector_compiles_and_decides(
    expression: str, slices: list[dict[str, Any]]
) -> None:
    selector = compile_selector(expression)
    # NVIDIA's selectors (docs/dra.md compares) select our devices under NVIDIA's name (--driver-name)
    driver = NVIDIA_DRIVER if NVIDIA_DRIVER in expression else DRIVER
    decided = []
    for device in _devices(slices):
        try:
            decided.append(selector(device_view(driver, device)))
        except CelError as exc:
            assert "Key not found" in str(exc), exc  # only an attribute some devices lack (a GPU's profile)
    assert True in decided, f"{expression} selects no device of the test node"


def test_the_old_semver_form_is_the_compile_error_kubernetes_gives() -> None:
    with pytest.raises(CelError, match=r"no matching overload for '_>=_' applied to '\(dyn, kubernetes\.Semver\)'"):
        compile_selector(f"device.attributes['{DRIVER}'].driverVersion >= semver('550.0.0')")


def _classes() -> dict[str, Any]:
    text = (ROOT / "deploy" / "overlays" / "dra" / "deviceclasses.yaml").read_text()
    return {doc["metadata"]["name"]: doc for doc in yaml.safe_load_all(text) if doc}


def _claim(*requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": "c", "namespace": "default"}, "spec": {"devices": devices}}


def _request(name: str, device_class: str, *selectors: str, count: int = 1) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": exactly}


A = f"device.attributes['{DRIVER}']"
C = f"device.capacity['{DRIVER}']"
# (id, claim, the devices allocated, or None when it does not fit): the cases the real allocator was run on.
CASES = [
    ("whole", _claim(_request("gpu", "gpu.gpuslice.io")), ["gpu-0"]),
    ("two-gpus", _claim(_request("gpu", "gpu.gpuslice.io", count=2)), ["gpu-0", "gpu-1"]),
    ("too-many", _claim(_request("gpu", "gpu.gpuslice.io", count=3)), None),
    ("memory", _claim(_request("m", "mig.gpuslice.io", f"{C}.memory.compareTo(quantity('30Gi')) >= 0",
                               f"{A}.index == 2")), ["gpu-2-mig-3g40gb-9-0"]),
    ("mig-profile", _claim(_request("m", "mig.gpuslice.io", f"{A}.profile == '1g.10gb'", f"{A}.index == 2")),
     ["gpu-2-mig-1g10gb-19-4"]),
    ("version", _claim(_request("gpu", "gpu.gpuslice.io", f"{A}.driverVersion.isGreaterThan(semver('550.0.0'))")),
     ["gpu-0"]),
    ("version-too-new", _claim(_request("gpu", "gpu.gpuslice.io",
                                        f"{A}.driverVersion.isGreaterThan(semver('999.0.0'))")), None),
    # matchAttribute: two MIG devices of one parent GPU (the fixed layout's two 1g.10gb)
    ("match-attribute", _claim(_request("a", "mig.gpuslice.io", f"{A}.profile == '1g.10gb'", f"{A}.index == 2"),
                               _request("b", "mig.gpuslice.io", f"{A}.profile == '1g.10gb'"),
                               constraints=[{"requests": ["a", "b"], "matchAttribute": f"{DRIVER}/parentUUID"}]),
     ["gpu-2-mig-1g10gb-19-4", "gpu-2-mig-1g10gb-19-5"]),
]  # fmt: skip


@pytest.mark.parametrize(("claim", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_mock_allocates_as_the_real_allocator_did(
    slices: list[dict[str, Any]], claim: dict[str, Any], expected: list[str] | None
) -> None:
    allocation = allocate(claim, _classes(), slices, [], NODE)
    if expected is None:
        assert allocation is None
    else:
        assert allocation is not None
        assert [result["device"] for result in allocation["devices"]["results"]] == expected
