"""The CDI spec checker, row by row from the CDI specification: what a valid spec is, and its lowest version."""

from __future__ import annotations

from typing import Any

import pytest

from gpuslice.allocation.cdi import CdiError, build_spec, check_spec
from gpuslice.allocation.cdi_validate import minimum_version, spec_problems

EDITS = {"env": ["A=1"]}
GOOD: dict[str, Any] = {"cdiVersion": "0.3.0", "kind": "a.b/gpu", "devices": [{"name": "a", "containerEdits": EDITS}]}
HOOK = {"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook", "args": ["nvidia-cdi-hook", "x"]}
MOUNT = {"hostPath": "/lib/x.so", "containerPath": "/lib/x.so", "options": ["ro", "rbind"]}


def device(**edits: Any) -> dict[str, Any]:
    return {"devices": [{"name": "a", "containerEdits": edits}]}


# (id, change to GOOD, fragment of the first problem)
INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("version-not-semver", {"cdiVersion": "v1"}, "cdiVersion: expected a semantic version"),
    ("version-unreleased", {"cdiVersion": "0.2.0"}, "not a released CDI spec version"),
    ("kind-no-vendor", {"kind": "gpu"}, "kind: expected '<vendor>/<class>'"),
    ("kind-upper-vendor", {"kind": "Vendor.com/gpu"}, "is not a DNS subdomain"),
    ("kind-two-slashes", {"kind": "a.b/gpu/x"}, "kind: expected"),
    ("kind-class-too-long", {"kind": "a.b/" + "g" * 64}, "must be 1-63"),
    ("unknown-spec-field", {"containerRuntime": ["docker"]}, "containerRuntime: not a CDI spec field"),
    ("no-devices", {"devices": []}, "at least one device"),
    ("device-name-slash", {"devices": [{"name": "MIG-GPU-x/1/0", "containerEdits": EDITS}]}, "not a valid CDI"),
    ("device-name-dash-first", {"devices": [{"name": "-x", "containerEdits": EDITS}]}, "not a valid CDI"),
    (
        "device-twice",
        {"devices": [{"name": "a", "containerEdits": EDITS}, {"name": "a", "containerEdits": EDITS}]},
        "appears twice",
    ),
    ("device-edits-nothing", {"devices": [{"name": "a"}]}, "a device must edit the container"),
    ("device-edits-empty", device(), "a device must edit the container"),
    ("node-relative", device(deviceNodes=[{"path": "dev/x"}]), "deviceNodes[0].path: expected an absolute path"),
    ("node-host-relative", device(deviceNodes=[{"path": "/dev/x", "hostPath": "x"}]), "hostPath: expected an abs"),
    ("node-type", device(deviceNodes=[{"path": "/dev/x", "type": "char"}]), "type: expected one of b, c, u, p"),
    ("node-permissions", device(deviceNodes=[{"path": "/dev/x", "permissions": "rwx"}]), "letters of 'rwm'"),
    ("node-major", device(deviceNodes=[{"path": "/dev/x", "major": "195"}]), "major: expected an integer"),
    ("env-no-equals", {"containerEdits": {"env": ["NOVALUE"]}}, "NAME=value"),
    ("mount-no-host", device(mounts=[{"containerPath": "/x"}]), "mounts[0].hostPath: required"),
    ("mount-relative", device(mounts=[{"hostPath": "/x", "containerPath": "x"}]), "containerPath: expected an abs"),
    ("mount-options", device(mounts=[{**MOUNT, "options": "ro"}]), "options: expected a list"),
    ("hook-name", device(hooks=[{**HOOK, "hookName": "preStart"}]), "hookName: expected one of"),
    ("hook-relative", device(hooks=[{**HOOK, "path": "nvidia-cdi-hook"}]), "hooks[0].path: expected an absolute"),
    ("hook-timeout", device(hooks=[{**HOOK, "timeout": 0}]), "timeout: expected a number of seconds greater"),
    ("hook-args", device(hooks=[{**HOOK, "args": "x"}]), "args: expected a list of strings"),
    ("edit-field", device(env=["A=1"], devices=["/dev/x"]), "devices: not a containerEdits field"),
    ("gids", device(env=["A=1"], additionalGIDs=[-1]), "unsigned integers"),
    ("version-too-low", {**device(deviceNodes=[{"path": "/dev/x", "hostPath": "/h/dev/x"}])}, "needs 0.5.0"),
]


@pytest.mark.parametrize(("change", "problem"), [r[1:] for r in INVALID], ids=[r[0] for r in INVALID])
def test_invalid_specs_are_caught(change: dict[str, Any], problem: str) -> None:
    assert spec_problems(GOOD) == []
    problems = spec_problems({**GOOD, **change})
    assert any(problem in p for p in problems), problems
    with pytest.raises(CdiError, match="invalid CDI spec"):
        check_spec({**GOOD, **change})


# (id, spec fields beyond a minimal one, the lowest version that carries them)
VERSIONS: list[tuple[str, dict[str, Any], str]] = [
    ("plain", {}, "0.3.0"),
    ("hooks-and-mounts", device(hooks=[HOOK], mounts=[MOUNT]), "0.3.0"),
    ("mount-type", device(mounts=[{**MOUNT, "type": "bind"}]), "0.4.0"),
    ("host-path", device(deviceNodes=[{"path": "/dev/x", "hostPath": "/h/dev/x"}]), "0.5.0"),
    ("digit-name", {"devices": [{"name": "0", "containerEdits": EDITS}]}, "0.5.0"),
    ("annotations", {"annotations": {"a": "b"}}, "0.6.0"),
    ("dotted-class", {"kind": "a.b/gpu.x"}, "0.6.0"),
    ("additional-gids", device(additionalGIDs=[44]), "0.7.0"),
]


@pytest.mark.parametrize(("change", "version"), [r[1:] for r in VERSIONS], ids=[r[0] for r in VERSIONS])
def test_lowest_version_that_carries_the_fields(change: dict[str, Any], version: str) -> None:
    spec = {**GOOD, **change}
    assert minimum_version(spec) == version
    assert spec_problems({**spec, "cdiVersion": version}) == []


def test_the_one_builder_refuses_an_invalid_spec_so_none_is_written() -> None:
    with pytest.raises(CdiError, match="invalid CDI spec"):
        build_spec("nvidia.com/gpu", [{"name": "bad name!", "containerEdits": {"env": ["A=1"]}}])
