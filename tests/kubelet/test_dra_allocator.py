"""The mock's structured allocator and its CEL (Kubernetes' DRA environment): selectors, counts, All, firstAvailable,
counters."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from gpuslice.kubelet.dra_allocator import UnallocatableClaim, allocate
from gpuslice.kubelet.dra_cel import CelError, compile_selector, device_view, parse_quantity

DRIVER = "gpu.example.com"
VIEW = device_view(
    DRIVER,
    {
        "attributes": {
            "type": {"string": "mig"},
            "index": {"int": 3},
            "driverVersion": {"version": "550.127.8"},
            "resource.kubernetes.io/pciBusID": {"string": "0000:3b:00.0"},
        },
        "capacity": {"memory": {"value": "10Gi"}},
    },
)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (f"device.driver == '{DRIVER}'", True),
        (f"device.attributes['{DRIVER}'].type == 'mig' && device.attributes['{DRIVER}'].index > 2", True),
        (f"device.attributes['{DRIVER}'].index == 3 || device.attributes['{DRIVER}'].nope == 1", True),
        (f"!(device.attributes['{DRIVER}'].type == 'gpu')", True),
        (f"device.capacity['{DRIVER}'].memory.compareTo(quantity('16Gi')) < 0", True),
        (f"device.capacity['{DRIVER}'].memory.isLessThan(quantity('10737418241'))", True),
        (f"device.capacity['{DRIVER}'].memory.add(quantity('6Gi')).compareTo(quantity('16Gi')) == 0", True),
        (f"device.capacity['{DRIVER}'].memory.asInteger() == 10737418240", True),
        (f"device.attributes['{DRIVER}'].driverVersion.isGreaterThan(semver('550.0.0'))", True),
        (f"device.attributes['{DRIVER}'].driverVersion.compareTo(semver('550.127.8')) == 0", True),
        (f"device.attributes['{DRIVER}'].driverVersion.major() == 550", True),
        ("semver('1.0.0-rc.1').isLessThan(semver('1.0.0')) && isSemver('1.2.3') && !isQuantity('ten')", True),
        ("device.attributes['resource.kubernetes.io'].pciBusID == '0000:3b:00.0'", True),
        (f"'uuid' in device.attributes['{DRIVER}']", False),
        ("device.attributes['other.example.com'].size() == 0", True),  # a domain the device lacks: empty
        (f"['mig', 'gpu'].exists(t, device.attributes['{DRIVER}'].type == t)", True),  # CEL's own macros
        (f"device.attributes['{DRIVER}'].index == '3'", False),  # dyn == string: CEL's heterogeneous equality
        # Kubernetes' typing: versions and quantities compare with their methods only (a compile error)
        (f"device.attributes['{DRIVER}'].driverVersion >= semver('550.0.0')", CelError),
        (f"device.capacity['{DRIVER}'].memory > quantity('1Gi')", CelError),
        ("semver('1.0.0').compareTo(quantity('1'))", CelError),
        (f"device.attributes['{DRIVER}'].uuid == 'x'", CelError),  # no such key, as in CEL
        ("semver('550') == semver('550')", CelError),  # not a semantic version: an error on evaluation
        (f"device.attributes['{DRIVER}'].index", CelError),  # not a bool
        ("'a' + 1 == 'a1'", CelError),  # no such overload, at compile time
        ("device.driver ==", CelError),
        ("x" * 10241, CelError),
        ("[1].all(a, [1].all(b, [1].all(c, [1].all(d, true))))", CelError),  # the estimated cost
    ],
)  # fmt: skip
def test_cel(expression: str, expected: object) -> None:
    if expected is CelError:
        with pytest.raises(CelError):
            compile_selector(expression)(VIEW)
    else:
        assert compile_selector(expression)(VIEW) is expected


def test_compile_errors_name_the_overload_as_kubernetes_does() -> None:
    with pytest.raises(CelError, match=r"no matching overload for '_>=_' applied to '\(dyn, kubernetes.Semver\)'"):
        compile_selector(f"device.attributes['{DRIVER}'].driverVersion >= semver('550.0.0')")


@pytest.mark.parametrize(
    ("text", "value"),
    [("10Gi", 10 * 2**30), ("1.5", Fraction(3, 2)), ("500m", Fraction(1, 2)), ("1e3", 1000), ("2k", 2000),
     ("0.5Ki", 512), ("-1M", -(10**6))],
)  # fmt: skip
def test_quantities_parse_as_kubernetes_writes_them(text: str, value: object) -> None:
    assert parse_quantity(text) == value


def _slice(
    devices: list[dict[str, Any]], counters: dict[str, int] | None = None, generation: int = 1
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "nodeName": "node-a",
        "pool": {"name": "node-a", "generation": generation, "resourceSliceCount": 1},
        "devices": devices,
    }
    if counters:
        spec["sharedCounters"] = [{"name": "set", "counters": {k: {"value": str(v)} for k, v in counters.items()}}]
    return {"metadata": {"name": f"s-{generation}"}, "spec": spec}


def _device(name: str, kind: str = "gpu", uses: dict[str, int] | None = None, numa: int = 0) -> dict[str, Any]:
    device: dict[str, Any] = {"name": name, "attributes": {"type": {"string": kind}, "numa": {"int": numa}}}
    if uses:
        device["consumesCounters"] = [
            {"counterSet": "set", "counters": {k: {"value": str(v)} for k, v in uses.items()}}
        ]
    return device


CLASSES = {
    "gpu": {"spec": {"selectors": [{"cel": {"expression": f"device.attributes['{DRIVER}'].type == 'gpu'"}}]}},
    "mig": {
        "spec": {
            "selectors": [{"cel": {"expression": f"device.attributes['{DRIVER}'].type == 'mig'"}}],
            "config": [{"opaque": {"driver": DRIVER, "parameters": {"kind": "X"}}}],
        }
    },
}


def _claim(*requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"spec": {"devices": {"requests": list(requests), "constraints": constraints or []}}}


def _exactly(name: str, cls: str, count: int = 1, mode: str = "ExactCount") -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, "count": count, "allocationMode": mode}}


def _picked(allocation: dict[str, Any] | None) -> list[str]:
    assert allocation is not None
    return [result["device"] for result in allocation["devices"]["results"]]


def test_counts_in_device_order_and_class_configs_come_first() -> None:
    slices = [_slice([_device("gpu-0"), _device("gpu-1"), _device("mig-a", "mig")])]
    allocation = allocate(_claim(_exactly("a", "gpu", 2), _exactly("b", "mig")), CLASSES, slices, [], "node-a")
    assert _picked(allocation) == ["gpu-0", "gpu-1", "mig-a"]
    assert allocation is not None
    assert allocation["devices"]["config"][0]["source"] == "FromClass"
    assert allocation["devices"]["config"][0]["requests"] == ["b"]
    taken = allocate(_claim(_exactly("a", "gpu")), CLASSES, slices, [allocation], "node-a")
    assert taken is None, "both GPUs are allocated to the first claim"


def test_shared_counters_forbid_overlapping_placements() -> None:
    placements = [
        _device("big-0", "mig", {"slice-0": 1, "slice-1": 1}),
        _device("small-0", "mig", {"slice-0": 1}),
        _device("small-1", "mig", {"slice-1": 1}),
    ]
    slices = [_slice(placements, {"slice-0": 1, "slice-1": 1})]
    first = allocate(_claim(_exactly("a", "mig")), CLASSES, slices, [], "node-a")
    assert _picked(first) == ["big-0"]
    assert allocate(_claim(_exactly("a", "mig")), CLASSES, slices, [first], "node-a") is None  # type: ignore[list-item]
    two = allocate(_claim(_exactly("a", "mig", 2)), CLASSES, slices, [], "node-a")
    assert _picked(two) == ["small-0", "small-1"], "backtracking finds the pair the big placement would block"


def test_all_mode_first_available_and_match_attribute() -> None:
    slices = [_slice([_device("gpu-0", numa=0), _device("gpu-1", numa=1), _device("gpu-2", numa=1)])]
    assert _picked(allocate(_claim(_exactly("a", "gpu", mode="All")), CLASSES, slices, [], "node-a")) == [
        "gpu-0",
        "gpu-1",
        "gpu-2",
    ]
    fallback = {
        "name": "a",
        "firstAvailable": [{"name": "mig", "deviceClassName": "mig"}, {"name": "any", "deviceClassName": "gpu"}],
    }
    allocation = allocate(_claim(fallback), CLASSES, slices, [], "node-a")
    assert allocation is not None and allocation["devices"]["results"][0]["request"] == "a/any"
    same_numa = [{"requests": ["a"], "matchAttribute": f"{DRIVER}/numa"}]
    assert _picked(allocate(_claim(_exactly("a", "gpu", 2), constraints=same_numa), CLASSES, slices, [], "node-a")) == [
        "gpu-1",
        "gpu-2",
    ]


def test_only_the_newest_complete_generation_counts() -> None:
    old = _slice([_device("gpu-0"), _device("gpu-1")], generation=1)
    new = _slice([_device("gpu-1")], generation=2)
    assert _picked(allocate(_claim(_exactly("a", "gpu")), CLASSES, [old, new], [], "node-a")) == ["gpu-1"]
    incomplete = _slice([_device("gpu-5")], generation=3)
    incomplete["spec"]["pool"]["resourceSliceCount"] = 2
    assert allocate(_claim(_exactly("a", "gpu")), CLASSES, [old, new, incomplete], [], "node-a") is None


@pytest.mark.parametrize(
    ("claim", "message"),
    [
        (_claim(_exactly("a", "nope")), "device class nope does not exist"),
        (_claim({"name": "a"}), "needs exactly or firstAvailable"),
        (_claim(_exactly("a", "gpu", 0)), "count must be"),
        (
            _claim({"name": "a", "exactly": {"deviceClassName": "gpu", "selectors": [{"cel": {"expression": "1 +"}}]}}),
            "selector",
        ),
    ],
)
def test_claims_that_can_never_fit_say_why(claim: dict[str, Any], message: str) -> None:
    with pytest.raises(UnallocatableClaim, match=message):
        allocate(claim, CLASSES, [_slice([_device("gpu-0")])], [], "node-a")
