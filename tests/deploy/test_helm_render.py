"""The Helm chart renders every values file with real Helm, lints clean and validates --strict."""

from __future__ import annotations

import re
from typing import Any

import kubernetes_validate
import pytest

from tests.deploy.helm_chart import (
    DRA_VERSIONS,
    KUBERNETES_VERSIONS,
    VALUES_DIR,
    daemonsets,
    lint_problems,
    notes,
    render,
    values_file,
)

VALUES_FILES = sorted(path.name for path in VALUES_DIR.glob("*.yaml"))
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def _versions(values: dict[str, Any]) -> tuple[str, ...]:
    dra = values.get("dra") or {}
    return DRA_VERSIONS[dra.get("resourceApiVersion", "v1")] if dra.get("enabled") else KUBERNETES_VERSIONS


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {name: render(values_file(name)) for name in VALUES_FILES}


def test_the_matrix_covers_the_cases() -> None:
    assert {
        "defaults.yaml",
        "nvidia-defaults.yaml",
        "named-configs.yaml",
        "every-flag.yaml",
        "device-plugin-off.yaml",
        "pod-knobs.yaml",
        "dra.yaml",
    } <= set(VALUES_FILES)


@pytest.mark.parametrize("name", VALUES_FILES)
def test_lints_clean(name: str) -> None:
    values = values_file(name)
    for version in _versions(values):
        assert lint_problems(values, version) == [], f"{name} on {version}"


@pytest.mark.parametrize("name", VALUES_FILES)
def test_every_object_validates_strictly(rendered: dict[str, list[dict[str, Any]]], name: str) -> None:
    problems = []
    for version in _versions(values_file(name)):
        for obj in rendered[name]:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                where = ".".join(str(part) for part in exc.path)
                problems.append(f"{version} {obj['kind']}/{obj['metadata']['name']}: {where}: {exc.message}")
    assert problems == []


@pytest.mark.parametrize("name", VALUES_FILES)
def test_every_namespaced_object_is_in_the_release_namespace(
    rendered: dict[str, list[dict[str, Any]]], name: str
) -> None:
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "DeviceClass"}
    for obj in rendered[name]:
        assert obj["metadata"].get("namespace") == (None if obj["kind"] in cluster_scoped else "gpu-system"), obj


@pytest.mark.parametrize("name", VALUES_FILES)
def test_every_container_runs_the_one_image(rendered: dict[str, list[dict[str, Any]]], name: str) -> None:
    values = values_file(name)
    image = values.get("image", {})
    repository = image.get("repository", "registry.example.com/gpuslice")
    expected = f"{repository}@{image['digest']}" if image.get("digest") else f"{repository}:0.1.0"
    for daemonset in daemonsets(rendered[name]).values():
        pod = daemonset["spec"]["template"]["spec"]
        for container in pod["containers"] + pod.get("initContainers", []):
            assert container["image"] == expected
            assert container["imagePullPolicy"] == image.get("pullPolicy", "IfNotPresent")


def test_a_digest_pins_the_image_and_a_tag_names_it() -> None:
    digest = "sha256:" + "ab" * 32
    for values, expected in [
        ({"image": {"digest": digest}}, f"registry.example.com/gpuslice@{digest}"),
        ({"image": {"digest": digest, "tag": "0.1.0"}}, f"registry.example.com/gpuslice@{digest}"),
        ({"image": {"tag": "0.2.0-rc1"}}, "registry.example.com/gpuslice:0.2.0-rc1"),
        ({}, "registry.example.com/gpuslice:0.1.0"),
    ]:
        objects = render({**values, "gfd": {"enabled": True}})
        images = {
            c["image"] for ds in daemonsets(objects).values() for c in ds["spec"]["template"]["spec"]["containers"]
        }
        assert images == {expected}
        assert (DIGEST.search(expected) is not None) == ("digest" in values.get("image", {}))


@pytest.mark.parametrize(
    ("name", "components"),
    [
        ("defaults.yaml", {"device-plugin"}),
        ("nvidia-defaults.yaml", {"device-plugin"}),
        ("named-configs.yaml", {"device-plugin", "label-writer"}),
        ("device-plugin-off.yaml", {"label-writer"}),
        ("dra.yaml", {"dra-plugin", "label-writer"}),
        ("dra-v1beta2.yaml", {"dra-plugin"}),
    ],
)
def test_what_runs(rendered: dict[str, list[dict[str, Any]]], name: str, components: set[str]) -> None:
    assert set(daemonsets(rendered[name])) == components
    kinds = {o["kind"] for o in rendered[name]}
    # The metrics Service and NetworkPolicy belong to the kubelet plugin (device plugin or DRA); DeviceClasses to DRA.
    served = components & {"device-plugin", "dra-plugin"}
    assert ("Service" in kinds) == bool(served)
    assert ("NetworkPolicy" in kinds) == bool(served)
    for kind in ("Service", "NetworkPolicy"):
        for obj in (o for o in rendered[name] if o["kind"] == kind):
            selector = obj["spec"]["selector"] if kind == "Service" else obj["spec"]["podSelector"]["matchLabels"]
            assert {selector["app.kubernetes.io/component"]} == served
    assert ("DeviceClass" in kinds) == ("dra-plugin" in components)


def test_notes_say_what_was_installed_and_how_to_check() -> None:
    text = notes({"gfd": {"enabled": True}})
    assert "gpuslice-device-plugin" in text and "gpuslice-label-writer" in text
    assert "kubectl -n gpu-system get daemonsets,pods" in text
    dra = notes({"dra": {"enabled": True}})
    assert "gpuslice-dra-plugin" in dra and "kubectl get resourceslices" in dra
    assert "device-plugin.config=<key>" in notes(values_file("named-configs.yaml"))
