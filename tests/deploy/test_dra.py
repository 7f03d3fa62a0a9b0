"""The DRA overlays and their example claims: each valid for its Kubernetes versions, selecting what they say."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from gpuslice.cli.dra_cmd import dra
from gpuslice.kubelet.dra_cel import compile_selector, device_view
from tests.deploy.rendering import DEPLOY, DRA_TARGET, DRA_TARGETS, container, find, render

DRIVER = "gpu.gpuslice.io"
V1BETA1_TARGET = "overlays/dra-v1beta1"
RESOURCE_VERSION = {DRA_TARGET: "resource.k8s.io/v1", V1BETA1_TARGET: "resource.k8s.io/v1beta1"}
VERSIONED = [(target, version) for target, versions in DRA_TARGETS.items() for version in versions]


@pytest.fixture(scope="module")
def objects(kubectl: str) -> list[dict[str, Any]]:
    return render(kubectl, DRA_TARGET)


def _examples(target: str = DRA_TARGET) -> list[dict[str, Any]]:
    text = (DEPLOY / target / "examples" / "claim-templates.yaml").read_text()
    return [doc for doc in yaml.safe_load_all(text) if doc]


@pytest.mark.parametrize(("target", "version"), VERSIONED)
def test_every_object_and_example_validates_for_its_versions(
    rendered: dict[str, list[dict[str, Any]]], target: str, version: str
) -> None:
    for obj in [*rendered[target], *_examples(target)]:
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("target", DRA_TARGETS)
def test_resource_objects_are_in_the_version_the_overlay_is_for(
    rendered: dict[str, list[dict[str, Any]]], target: str
) -> None:
    resource = [o for o in [*rendered[target], *_examples(target)] if o["apiVersion"].startswith("resource.k8s.io/")]
    assert {o["kind"] for o in resource} == {"DeviceClass", "ResourceClaimTemplate"}
    assert {o["apiVersion"] for o in resource} == {RESOURCE_VERSION[target]}


def test_a_v1_overlay_is_refused_by_1_33() -> None:
    """The reason for two overlays: 1.33 has no resource.k8s.io/v1 (the validator knows it, so the check can fail)."""
    (first, *_) = _examples(DRA_TARGET)
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate(first, "1.33.0", strict=True)


def _flat(request: dict[str, Any]) -> dict[str, Any]:
    """A v1 request in the v1beta1 shape: `exactly`'s fields on the request itself."""
    flat = {key: value for key, value in request.items() if key != "exactly"}
    return {**flat, **request.get("exactly", {})}


def test_both_overlays_ship_the_same_classes_and_claims(rendered: dict[str, list[dict[str, Any]]]) -> None:
    def classes(target: str) -> dict[str, Any]:
        return {o["metadata"]["name"]: o["spec"] for o in rendered[target] if o["kind"] == "DeviceClass"}

    assert classes(DRA_TARGET) == classes(V1BETA1_TARGET)
    v1 = {t["metadata"]["name"]: t["spec"]["spec"]["devices"] for t in _examples(DRA_TARGET)}
    beta = {t["metadata"]["name"]: t["spec"]["spec"]["devices"] for t in _examples(V1BETA1_TARGET)}
    assert v1.keys() == beta.keys()
    for name, devices in v1.items():
        assert [_flat(r) for r in devices["requests"]] == beta[name]["requests"], name
        assert devices.get("config") == beta[name].get("config"), name


def test_the_device_plugin_is_replaced_not_joined(objects: list[dict[str, Any]]) -> None:
    daemonsets = {o["metadata"]["name"] for o in objects if o["kind"] == "DaemonSet"}
    assert daemonsets == {"gpuslice-dra-plugin", "gpuslice-label-writer"}
    plugin = container(find(objects, "DaemonSet", "gpuslice-dra-plugin"))
    assert plugin["args"][0] == "dra"
    mounts = {m["mountPath"] for m in plugin["volumeMounts"]}
    assert {"/var/lib/kubelet/plugins_registry", f"/var/lib/kubelet/plugins/{DRIVER}", "/var/run/cdi"} <= mounts
    assert plugin["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_rbac_writes_slices_and_only_reads_claims(objects: list[dict[str, Any]]) -> None:
    rules = {
        rule["resources"][0]: set(rule["verbs"])
        for rule in find(objects, "ClusterRole", "gpuslice-dra-plugin")["rules"]
    }
    assert {"create", "update", "delete"} <= rules["resourceslices"]
    assert rules["resourceclaims"] == {"get", "list", "watch"}


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The devices `gpuslice dra` publishes for a node with whole GPUs and a MIG GPU (the overlay's config)."""
    spec = tmp_path_factory.mktemp("node") / "node.yaml"
    spec.write_text(
        "name: node-a\ngpus:\n"
        '  - {model: NVIDIA H100 80GB HBM3, count: 1, memory_mib: 81559, compute_capability: "9.0"}\n'
        '  - {model: NVIDIA H100 80GB HBM3, count: 1, memory_mib: 81559, compute_capability: "9.0",'
        " mig: [1g.10gb, 3g.40gb]}\n"
    )
    config = DEPLOY / "overlays" / "dra" / "config.yaml"
    result = CliRunner().invoke(
        dra, ["--backend", "fake", "--node-spec", str(spec), "--config-file", str(config), "--print-resource-slices"]
    )
    assert result.exit_code == 0, result.output
    return [device for s in yaml.safe_load_all(result.stdout) if s for device in s["spec"]["devices"]]


def _selected(selectors: list[dict[str, Any]], devices: list[dict[str, Any]]) -> set[str]:
    checks = [compile_selector(s["cel"]["expression"]) for s in selectors]
    return {d["name"] for d in devices if all(check(device_view(DRIVER, d)) for check in checks)}


def test_device_classes_select_gpus_and_mig_devices(
    objects: list[dict[str, Any]], published: list[dict[str, Any]]
) -> None:
    gpu = find(objects, "DeviceClass", "gpu.gpuslice.io")["spec"]["selectors"]
    mig = find(objects, "DeviceClass", "mig.gpuslice.io")["spec"]["selectors"]
    assert _selected(gpu, published) == {"gpu-0"}
    assert _selected(mig, published) == {"gpu-1-mig-3g40gb-9-0", "gpu-1-mig-1g10gb-19-4"}


def test_the_mig_example_selects_only_1g_10gb(objects: list[dict[str, Any]], published: list[dict[str, Any]]) -> None:
    template = next(t for t in _examples() if t["metadata"]["name"] == "mig-1g-10gb")
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    selectors = find(objects, "DeviceClass", "mig.gpuslice.io")["spec"]["selectors"] + request["exactly"]["selectors"]
    assert _selected(selectors, published) == {"gpu-1-mig-1g10gb-19-4"}


def test_the_mps_example_decodes_as_our_config() -> None:
    from gpuslice.dra.opaque import decode_parameters

    template = next(t for t in _examples() if t["metadata"]["name"] == "shared-gpu-mps")
    (config,) = template["spec"]["spec"]["devices"]["config"]
    assert config["opaque"]["driver"] == DRIVER
    decoded = decode_parameters(config["opaque"]["parameters"])
    assert decoded.sharing is not None and decoded.sharing.mps.default_active_thread_percentage == 25


def test_the_daemonset_uses_only_flags_the_command_has(objects: list[dict[str, Any]]) -> None:
    plugin = container(find(objects, "DaemonSet", "gpuslice-dra-plugin"))
    help_text = CliRunner().invoke(dra, ["--help"]).output
    flags = [arg for arg in plugin["args"][1:] if arg.startswith("--")]
    assert flags and all(flag in help_text for flag in flags)
    envs = {env["name"] for env in plugin["env"]}
    assert {"NODE_NAME", "DRIVER_NAME", "CONFIG_FILE"} <= envs  # read by `gpuslice dra` (envvar= in its options)


@pytest.mark.parametrize("target", sorted(DRA_TARGETS))
def test_the_metrics_port_is_probed_scraped_and_fenced_on_the_dra_plugin(
    rendered: dict[str, list[dict[str, Any]]], target: str
) -> None:
    objects = rendered[target]
    daemonset = find(objects, "DaemonSet", "gpuslice-dra-plugin")
    plugin = container(daemonset)
    port = int(plugin["args"][plugin["args"].index("--metrics-port") + 1])
    assert {p["name"]: p["containerPort"] for p in plugin["ports"]} == {"metrics": port}
    assert plugin["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert plugin["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    pods = daemonset["spec"]["template"]["metadata"]["labels"]
    service = find(objects, "Service", "gpuslice-metrics")
    assert service["spec"]["selector"].items() <= pods.items()
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(port, "metrics")]
    policy = find(objects, "NetworkPolicy", "gpuslice-metrics")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pods.items()
