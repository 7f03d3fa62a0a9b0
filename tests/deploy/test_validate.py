"""Every rendered object is valid against the Kubernetes OpenAPI schemas (kubernetes-validate, strict)."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest

from tests.deploy.rendering import TARGETS, find

# The oldest Kubernetes we support, and the newest the pinned kubernetes-validate ships schemas for.
KUBERNETES_VERSIONS = ("1.33.0", "1.37.0")
# Kinds served by CRDs have no schema in kubernetes-validate; their shape is checked in test_nodefeature.py.
CRD_KINDS = {"NodeFeature"}


def _validate(obj: dict[str, Any], version: str) -> None:
    kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("target", TARGETS)
def test_every_object_validates(rendered: dict[str, list[dict[str, Any]]], target: str, version: str) -> None:
    problems = []
    for obj in rendered[target]:
        if obj["kind"] in CRD_KINDS:
            continue
        try:
            _validate(obj, version)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(part) for part in exc.path)
            problems.append(f"{obj['kind']}/{obj['metadata']['name']}: {where}: {exc.message}")
    assert problems == []


@pytest.mark.parametrize(
    ("where", "mistake"),
    [
        ("pod", {"hostPid": True}),  # misspelt field: strict mode refuses unknown keys
        ("container", {"securityContext": {"allowPrivilegeEscalation": "no"}}),  # wrong type
    ],
)
def test_the_validator_catches_mistakes(
    rendered: dict[str, list[dict[str, Any]]], where: str, mistake: dict[str, Any]
) -> None:
    daemonset = copy.deepcopy(find(rendered["base"], "DaemonSet", "gpuslice-device-plugin"))
    pod = daemonset["spec"]["template"]["spec"]
    (pod if where == "pod" else pod["containers"][0]).update(mistake)
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate(daemonset, KUBERNETES_VERSIONS[0])
