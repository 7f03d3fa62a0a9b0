"""Every kustomization renders, with the objects, names and references a cluster needs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.rendering import DEPLOY, DRA_TARGETS, PER_NODE_TARGETS, TARGETS, container, find, render

NAMESPACE = "gpuslice-system"
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
ACCESS_KINDS = [
    "Namespace",
    "ServiceAccount",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
]
EXPECTED_KINDS = sorted([*ACCESS_KINDS, "ConfigMap", "Service", "NetworkPolicy", "DaemonSet", "DaemonSet"])
# Per-node configs add the node reader: a ClusterRole (get, watch nodes) bound to both service accounts.
NODE_READER_KINDS = sorted([*EXPECTED_KINDS, "ClusterRole", "ClusterRoleBinding"])


def test_every_kustomization_is_tested() -> None:
    on_disk = {"base"} | {f"overlays/{p.name}" for p in (DEPLOY / "overlays").iterdir() if p.is_dir()}
    assert on_disk == {*TARGETS, *DRA_TARGETS}


@pytest.mark.parametrize("target", TARGETS)
def test_renders_the_same_set_of_objects(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    expected = NODE_READER_KINDS if target in PER_NODE_TARGETS else EXPECTED_KINDS
    assert sorted(o["kind"] for o in rendered[target]) == expected


@pytest.mark.parametrize("target", TARGETS)
def test_namespaced_objects_land_in_our_namespace(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    for obj in rendered[target]:
        where = obj["metadata"].get("namespace")
        if obj["kind"] in CLUSTER_SCOPED:
            assert where is None, obj["metadata"]["name"]
        else:
            assert where == NAMESPACE, f"{obj['kind']}/{obj['metadata']['name']}"


@pytest.mark.parametrize("target", TARGETS)
def test_both_daemonsets_mount_the_generated_config(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    objects = rendered[target]
    config_map = find(objects, "ConfigMap", "gpuslice-config-")
    for name in ("gpuslice-device-plugin", "gpuslice-label-writer"):
        volumes = find(objects, "DaemonSet", name)["spec"]["template"]["spec"]["volumes"]
        referenced = [v["configMap"]["name"] for v in volumes if "configMap" in v]
        assert referenced == [config_map["metadata"]["name"]], name


def test_a_different_config_gives_a_different_configmap_name(rendered: dict[str, list[dict[str, Any]]]) -> None:
    # The content hash in the name is what rolls the DaemonSets when the config changes.
    names = {find(rendered[t], "ConfigMap")["metadata"]["name"] for t in TARGETS}
    assert len(names) == len(TARGETS)


@pytest.mark.parametrize("target", TARGETS)
def test_metrics_service_selects_the_plugin_pods(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    objects = rendered[target]
    service = find(objects, "Service", "gpuslice-metrics")
    plugin = find(objects, "DaemonSet", "gpuslice-device-plugin")
    pod_labels = plugin["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["clusterIP"] == "None"
    assert all(pod_labels.get(k) == v for k, v in service["spec"]["selector"].items())
    label_writer = find(objects, "DaemonSet", "gpuslice-label-writer")["spec"]["template"]["metadata"]["labels"]
    assert not all(label_writer.get(k) == v for k, v in service["spec"]["selector"].items())
    port = service["spec"]["ports"][0]
    named = {p["name"]: p["containerPort"] for p in container(plugin)["ports"]}
    assert port["targetPort"] == "metrics" and named["metrics"] == port["port"]


@pytest.mark.parametrize("target", TARGETS)
def test_rbac_binds_the_label_writer_to_what_it_writes(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    objects = rendered[target]
    role = find(objects, "Role")
    assert role["rules"] == [
        {
            "apiGroups": ["nfd.k8s-sigs.io"],
            "resources": ["nodefeatures"],
            "verbs": ["get", "list", "create", "update", "patch"],
        }
    ]
    reader = find(objects, "ClusterRole", "gpuslice-label-writer")
    assert reader["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    label_writer = find(objects, "DaemonSet", "gpuslice-label-writer")["spec"]["template"]["spec"]
    account = label_writer["serviceAccountName"]
    for binding_kind, role_kind in (("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")):
        binding = find(objects, binding_kind, account)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": account}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    accounts = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ServiceAccount"}
    assert accounts[account].get("automountServiceAccountToken", True) is True
    plugin = find(objects, "DaemonSet", "gpuslice-device-plugin")["spec"]["template"]["spec"]
    plugin_account = accounts[plugin["serviceAccountName"]]
    if target not in PER_NODE_TARGETS:
        # The plugin has no business with the API server: no RBAC, and no token in the pod.
        assert plugin["automountServiceAccountToken"] is False
        assert plugin_account["automountServiceAccountToken"] is False
        return
    # Per-node configs: both read (get, watch) Node objects and nothing else; the plugin gets a token for it.
    assert plugin["automountServiceAccountToken"] is True and plugin_account["automountServiceAccountToken"] is True
    node_reader = find(objects, "ClusterRole", "gpuslice-node-config")
    assert node_reader["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "watch"]}]
    binding = find(objects, "ClusterRoleBinding", "gpuslice-node-config")
    assert binding["roleRef"]["name"] == "gpuslice-node-config"
    assert sorted(s["name"] for s in binding["subjects"]) == ["gpuslice-device-plugin", "gpuslice-label-writer"]


def test_the_runtime_class_component_sets_both_daemonsets(kubectl: str, tmp_path: Path) -> None:
    # How docs/install.md says to use it: from your own kustomization, on top of an overlay (kustomize wants
    # relative paths there).
    deploy = os.path.relpath(DEPLOY, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{deploy}/overlays/time-slicing]\ncomponents: [{deploy}/components/runtime-class]\n"
    )
    objects = render(kubectl, tmp_path)
    for name in ("gpuslice-device-plugin", "gpuslice-label-writer"):
        assert find(objects, "DaemonSet", name)["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia"
