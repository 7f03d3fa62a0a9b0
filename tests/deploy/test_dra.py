"""The DRA overlay and the example claim templates: valid for 1.34 and newer, and selecting what they say."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from gpuslice.cli.dra_cmd import dra
from gpuslice.kubelet.dra_cel import compile_selector, device_view
from tests.deploy.rendering import DEPLOY, DRA_TARGET, container, find, render

KUBERNETES_VERSIONS = ("1.34.0", "1.37.0")  # DRA's GA release and the newest kubernetes-validate knows
DRIVER = "gpu.gpuslice.io"
EXAMPLES = DEPLOY / "overlays" / "dra" / "examples" / "claim-templates.yaml"


@pytest.fixture(scope="module")
def objects(kubectl: str) -> list[dict[str, Any]]:
    return render(kubectl, DRA_TARGET)


def _examples() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(EXAMPLES.read_text()) if doc]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_and_example_validates(objects: list[dict[str, Any]], version: str) -> None:
    for obj in [*objects, *_examples()]:
        kubernetes_validate.validate(obj, version, strict=True)


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
