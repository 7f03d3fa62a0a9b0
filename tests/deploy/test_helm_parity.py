"""The Helm chart and the kustomize install deploy the same DaemonSets, so the two install paths cannot drift."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.deploy.helm_chart import daemonsets, render, values_file
from tests.deploy.rendering import find

# What differs on purpose: Helm's own labels and the config checksum (kustomize hashes the ConfigMap's name
# instead), the image (a tag by default, a placeholder digest in the base), and NVIDIA's defaults for the pod
# knobs (a third affinity term for Tegra, the CriticalAddonsOnly toleration), which the chart keeps.
NVIDIA_AFFINITY_TERM = {
    "matchExpressions": [
        {"key": "feature.node.kubernetes.io/cpu-model.vendor_id", "operator": "In", "values": ["NVIDIA"]}
    ]
}
NVIDIA_TOLERATION = {"key": "CriticalAddonsOnly", "operator": "Exists"}


def _comparable(daemonset: dict[str, Any], chart: bool) -> dict[str, Any]:
    """The DaemonSet's spec with the deliberate differences taken out (asserted where they are taken)."""
    spec = copy.deepcopy(daemonset["spec"])
    spec.pop("selector")
    template = spec["template"]
    template.pop("metadata")
    pod = template["spec"]
    for container in pod["containers"]:
        container.pop("image")
        container.pop("imagePullPolicy", None)
        # Kustomize's patches append; only $(VAR) in env values would make the order matter, and none is used.
        container["env"] = sorted(container["env"], key=lambda entry: entry["name"])
    for volume in pod["volumes"]:
        if "configMap" in volume:
            volume["configMap"]["name"] = "<config>"
    if chart:
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        terms.remove(NVIDIA_AFFINITY_TERM)
        pod["tolerations"].remove(NVIDIA_TOLERATION)
    return spec


@pytest.mark.parametrize(
    ("target", "values", "components"),
    [
        ("base", {"gfd": {"enabled": True}}, ("device-plugin", "label-writer")),
        # The per-node overlay's configs, as config.map entries: the same keys and the same MIG privilege.
        ("overlays/per-node-config", "per-node", ("device-plugin", "label-writer")),
    ],
)
def test_the_chart_deploys_what_kustomize_deploys(
    rendered: dict[str, list[dict[str, Any]]], target: str, values: Any, components: tuple[str, ...]
) -> None:
    if values == "per-node":
        configmap = find(rendered[target], "ConfigMap", "gpuslice-config")
        values = {"config": {"map": configmap["data"]}, "gfd": {"enabled": True}}
    chart = daemonsets(render(values))
    for component in components:
        ours = find(rendered[target], "DaemonSet", f"gpuslice-{component}")
        assert _comparable(chart[component], chart=True) == _comparable(ours, chart=False), component


def test_the_nvidia_defaults_file_deploys_the_same_device_plugin(rendered: dict[str, list[dict[str, Any]]]) -> None:
    chart = daemonsets(render(values_file("nvidia-defaults.yaml")))["device-plugin"]
    ours = find(rendered["base"], "DaemonSet", "gpuslice-device-plugin")
    assert _comparable(chart, chart=True) == _comparable(ours, chart=False)
