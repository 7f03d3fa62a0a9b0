"""NodeFeature is a CRD (Node Feature Discovery's), so no schema ships for it: check the object's shape here."""

from __future__ import annotations

import importlib.util
import re
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from tests.deploy.rendering import find

NODE = "node-1"
NAMESPACE = "gpuslice-system"
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def nodefeature_problems(obj: dict[str, Any], node: str, namespace: str) -> list[str]:
    """What is wrong with a NodeFeature for `node` (NFD v1alpha1, as gpu-feature-discovery writes it)."""
    problems = []
    if obj.get("apiVersion") != "nfd.k8s-sigs.io/v1alpha1" or obj.get("kind") != "NodeFeature":
        problems.append(f"not an nfd.k8s-sigs.io/v1alpha1 NodeFeature: {obj.get('apiVersion')} {obj.get('kind')}")
    meta = obj.get("metadata", {})
    if meta.get("name") != f"nvidia-features-for-{node}":
        problems.append(f"name {meta.get('name')!r}")
    if meta.get("namespace") != namespace:
        problems.append(f"namespace {meta.get('namespace')!r}")
    if meta.get("labels", {}).get("nfd.node.kubernetes.io/node-name") != node:
        problems.append("missing the nfd.node.kubernetes.io/node-name label NFD uses to find the node")
    labels = obj.get("spec", {}).get("labels")
    if not isinstance(labels, dict) or not labels:
        return [*problems, "spec.labels must be a non-empty mapping"]
    for key, value in labels.items():
        prefix, _, name = str(key).rpartition("/")
        if (prefix and not _DNS_SUBDOMAIN.fullmatch(prefix)) or len(name) > 63 or not _LABEL_NAME.fullmatch(name):
            problems.append(f"label key {key!r} is not a valid Kubernetes label key")
        if not isinstance(value, str) or len(value) > 63 or (value and not _LABEL_NAME.fullmatch(value)):
            problems.append(f"label {key}={value!r}: not a valid label value")
    return problems


def test_the_shape_check_can_fail() -> None:
    bad = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "spec": {"labels": {"a/b/c": "x y"}}}
    assert len(nodefeature_problems(bad, NODE, NAMESPACE)) == 6


def test_the_label_writer_emits_a_well_formed_nodefeature() -> None:
    if importlib.util.find_spec("gpuslice.cli.labels_cmd") is None:
        pytest.skip("gpuslice.cli.labels_cmd is not written yet")
    from gpuslice.cli.labels_cmd import labels

    args = ["--backend", "fake", "--node-spec", "preset:h100x4", "--oneshot", "--no-timestamp"]
    args += ["--node-feature", "yaml", "--node-name", NODE, "--namespace", NAMESPACE, "--quiet"]
    result = CliRunner().invoke(labels, args)
    assert result.exit_code == 0, result.output
    obj = yaml.safe_load(result.stdout)
    assert nodefeature_problems(obj, NODE, NAMESPACE) == []
    assert obj["spec"]["labels"]["nvidia.com/gpu.count"] == "4"


def test_the_role_grants_the_nodefeature_resource(rendered: dict[str, list[dict[str, Any]]]) -> None:
    # apiVersion nfd.k8s-sigs.io/v1alpha1, kind NodeFeature -> group nfd.k8s-sigs.io, resource nodefeatures.
    rule = find(rendered["base"], "Role")["rules"][0]
    assert (rule["apiGroups"], rule["resources"]) == (["nfd.k8s-sigs.io"], ["nodefeatures"])
    assert {"get", "create", "update"} <= set(rule["verbs"])
