"""Least privilege per overlay: what each DaemonSet may do on the node, and nothing more."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from tests.deploy.rendering import DRA_TARGETS, TARGETS, container, find

PLUGIN, LABEL_WRITER = "gpuslice-device-plugin", "gpuslice-label-writer"
# Added capabilities and hostPID each overlay needs, per DaemonSet (why: see each kustomization.yaml).
EXTRA_PRIVILEGE: dict[str, dict[str, tuple[set[str], bool]]] = {
    "base": {PLUGIN: (set(), False), LABEL_WRITER: (set(), False)},
    "overlays/time-slicing": {PLUGIN: (set(), False), LABEL_WRITER: (set(), False)},
    "overlays/mps": {PLUGIN: ({"SYS_ADMIN"}, True), LABEL_WRITER: (set(), False)},
    "overlays/mig-mixed": {PLUGIN: ({"SYS_ADMIN"}, False), LABEL_WRITER: ({"SYS_ADMIN"}, False)},
    # One of its named configs uses MIG, so it carries MIG's privileges (components/mig).
    "overlays/per-node-config": {PLUGIN: ({"SYS_ADMIN"}, False), LABEL_WRITER: ({"SYS_ADMIN"}, False)},
    "overlays/cdi": {PLUGIN: (set(), False), LABEL_WRITER: (set(), False)},
}
MIG_TARGETS = ("overlays/mig-mixed", "overlays/per-node-config")
HOST_PATHS: dict[str, dict[str, dict[str, bool]]] = {  # host path -> mounted read-only?
    "base": {
        PLUGIN: {"/var/lib/kubelet/device-plugins": False, "/var/lib/kubelet/pod-resources": True},
        LABEL_WRITER: {},
    },
}
HOST_PATHS["overlays/time-slicing"] = HOST_PATHS["base"]
HOST_PATHS["overlays/mig-mixed"] = HOST_PATHS["base"]
HOST_PATHS["overlays/per-node-config"] = HOST_PATHS["base"]
HOST_PATHS["overlays/cdi"] = {  # the CDI spec is written where the container runtime reads it
    PLUGIN: {**HOST_PATHS["base"][PLUGIN], "/var/run/cdi": False},
    LABEL_WRITER: {},
}
HOST_PATHS["overlays/mps"] = {
    PLUGIN: {**HOST_PATHS["base"][PLUGIN], "/run/nvidia/mps": False, "/run/nvidia/mps/shm": False},
    LABEL_WRITER: {},
}


def _daemonset(rendered: dict[str, list[dict[str, Any]]], target: str, name: str) -> dict[str, Any]:
    return find(rendered[target], "DaemonSet", name)


@pytest.mark.parametrize("name", [PLUGIN, LABEL_WRITER])
@pytest.mark.parametrize("target", TARGETS)
def test_capabilities_and_host_pid(rendered: dict[str, list[dict[str, Any]]], target: str, name: str) -> None:
    daemonset = _daemonset(rendered, target, name)
    pod, security = daemonset["spec"]["template"]["spec"], container(daemonset)["securityContext"]
    added, host_pid = EXTRA_PRIVILEGE[target][name]
    assert set(security["capabilities"].get("add", [])) == added
    assert security["capabilities"]["drop"] == ["ALL"]
    assert pod.get("hostPID", False) is host_pid
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security.get("privileged", False) is False
    assert not pod.get("hostNetwork", False) and not pod.get("hostIPC", False)
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


@pytest.mark.parametrize("target", TARGETS)
def test_who_runs_as_root(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    # The plugin always (the kubelet's socket directory is root:root 0750); the label writer only for MIG,
    # where it needs SYS_ADMIN to be effective.
    assert container(_daemonset(rendered, target, PLUGIN))["securityContext"]["runAsUser"] == 0
    writer = container(_daemonset(rendered, target, LABEL_WRITER))["securityContext"]
    if target in MIG_TARGETS:
        assert writer["runAsUser"] == 0 and writer["runAsNonRoot"] is False
    else:
        assert writer["runAsUser"] != 0 and writer["runAsNonRoot"] is True


@pytest.mark.parametrize("name", [PLUGIN, LABEL_WRITER])
@pytest.mark.parametrize("target", TARGETS)
def test_host_paths(rendered: dict[str, list[dict[str, Any]]], target: str, name: str) -> None:
    daemonset = _daemonset(rendered, target, name)
    volumes = {
        v["name"]: v["hostPath"]["path"] for v in daemonset["spec"]["template"]["spec"]["volumes"] if "hostPath" in v
    }
    mounts = {m["name"]: m.get("readOnly", False) for m in container(daemonset)["volumeMounts"]}
    assert {path: mounts[volume] for volume, path in volumes.items()} == HOST_PATHS[target][name]


@pytest.mark.parametrize("target", TARGETS)
def test_mps_root_matches_the_config(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    configs = [yaml.safe_load(text) for text in find(rendered[target], "ConfigMap")["data"].values()]
    roots = {config.get("flags", {}).get("mpsRoot") for config in configs} - {None}
    root = roots.pop() if roots else None
    mounts = {m["mountPath"] for m in container(_daemonset(rendered, target, PLUGIN))["volumeMounts"]}
    # Allocate hands workloads host paths under mpsRoot, so the plugin must see them at the same path.
    assert (root is not None) == (target == "overlays/mps")
    if root is not None:
        assert root in mounts and "/dev/shm" in mounts


@pytest.mark.parametrize("target", TARGETS)
def test_plugin_scheduling_conventions(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    daemonset = _daemonset(rendered, target, PLUGIN)
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-node-critical"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert daemonset["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    # Separate terms are ORed: either label puts the plugin on the node.
    assert [t["matchExpressions"] for t in terms] == [
        [{"key": "feature.node.kubernetes.io/pci-10de.present", "operator": "In", "values": ["true"]}],
        [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}],
    ]
    writer = _daemonset(rendered, target, LABEL_WRITER)["spec"]["template"]["spec"]
    assert writer["affinity"] == pod["affinity"] and writer["tolerations"] == pod["tolerations"]
    assert writer.get("priorityClassName") == "system-node-critical"  # labels gate scheduling: keep them running


@pytest.mark.parametrize("target", [*TARGETS, *DRA_TARGETS])
def test_images_are_pinned_by_digest(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    daemonsets = [obj for obj in rendered[target] if obj["kind"] == "DaemonSet"]
    assert len(daemonsets) == 2, "the plugin (device plugin or DRA) and the label writer"
    for daemonset in daemonsets:
        name, image = daemonset["metadata"]["name"], container(daemonset)["image"]
        assert re.fullmatch(r"[a-z0-9.\-/]+@sha256:[0-9a-f]{64}", image), f"{name}: {image} is not pinned by digest"


@pytest.mark.parametrize("target", TARGETS)
def test_only_the_scraper_reaches_the_metrics_port(rendered: dict[str, list[dict[str, Any]]], target: str) -> None:
    policy = find(rendered[target], "NetworkPolicy", "gpuslice-metrics")
    daemonset = _daemonset(rendered, target, PLUGIN)
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"].items() <= pod_labels.items(), "selects the plugin pods"
    assert spec["policyTypes"] == ["Ingress"]
    (rule,) = spec["ingress"]
    ports = {p["name"]: p["containerPort"] for p in container(daemonset)["ports"]}
    assert rule["ports"] == [{"port": "metrics", "protocol": "TCP"}] and "metrics" in ports
    (source,) = rule["from"]  # one peer that needs both selectors: never an allow-all
    assert source["namespaceSelector"]["matchLabels"] and source["podSelector"]["matchLabels"]
