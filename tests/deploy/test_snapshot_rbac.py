"""deploy/snapshot: the snapshot's access is list on nodes, pods and the DRA objects, nothing more, and valid."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "snapshot" / "rbac.yaml"


def _objects() -> list[dict[str, object]]:
    return [obj for obj in yaml.safe_load_all(RBAC.read_text()) if obj]


@pytest.mark.parametrize("version", ["1.33.0", "1.37.0"])
def test_the_objects_validate(version: str) -> None:
    for obj in _objects():
        kubernetes_validate.validate(obj, version, strict=True)


def test_the_role_only_lists_what_the_snapshot_reads() -> None:
    (role,) = [obj for obj in _objects() if obj["kind"] == "ClusterRole"]
    granted = {
        (group, resource, verb)
        for rule in role["rules"]  # type: ignore[attr-defined]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert granted == {
        ("", "nodes", "list"),
        ("", "pods", "list"),
        ("resource.k8s.io", "resourceslices", "list"),
        ("resource.k8s.io", "resourceclaims", "list"),
    }
