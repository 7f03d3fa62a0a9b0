"""The kustomization that docs/install.md tells a user to write pins every image of every overlay."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import helm_chart
from tests.deploy.rendering import DRA_TARGET, PROJECT_ROOT, TARGETS, render

INSTALL_DOC = PROJECT_ROOT / "docs" / "install.md"
MARKER = "# my-gpuslice/kustomization.yaml"
DOC_OVERLAY = "../gpuslice/deploy/overlays/per-node-config"
REGISTRY = "registry.test.internal/team/gpuslice"
DIGEST = "sha256:" + "5e" * 32


def documented_kustomization() -> str:
    """The YAML block of docs/install.md that starts with the marker, as written there."""
    blocks = re.findall(r"```yaml\n(.*?)```", INSTALL_DOC.read_text(), re.S)
    (block,) = [b for b in blocks if b.startswith(MARKER)]
    assert DOC_OVERLAY in block and "REGISTRY/gpuslice" in block and "sha256:<pushed digest>" in block
    return block


def _images(objects: list[dict[str, Any]]) -> dict[str, str]:
    found = {}
    for obj in objects:
        pod = obj.get("spec", {}).get("template", {}).get("spec", {})
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            found[f"{obj['metadata']['name']}/{container['name']}"] = container["image"]
    return found


@pytest.mark.parametrize("target", [*TARGETS, DRA_TARGET])
def test_the_documented_kustomization_pins_every_image(kubectl: str, tmp_path: Path, target: str) -> None:
    # The layout the doc assumes: this repository checked out as gpuslice/, next to the user's my-gpuslice/.
    (tmp_path / "gpuslice").symlink_to(PROJECT_ROOT, target_is_directory=True)
    mine = tmp_path / "my-gpuslice"
    mine.mkdir()
    text = documented_kustomization()
    text = text.replace(DOC_OVERLAY, f"../gpuslice/deploy/{target}")
    text = text.replace("REGISTRY/gpuslice", REGISTRY).replace("sha256:<pushed digest>", DIGEST)
    (mine / "kustomization.yaml").write_text(text)
    images = _images(render(kubectl, mine))
    assert images, "no DaemonSet rendered"
    assert {name: image for name, image in images.items() if image != f"{REGISTRY}@{DIGEST}"} == {}


def test_the_documented_values_file_installs() -> None:
    blocks = re.findall(r"```yaml\n(.*?)```", INSTALL_DOC.read_text(), re.S)
    (block,) = [b for b in blocks if b.startswith("# values.yaml")]
    text = block.replace("REGISTRY/gpuslice", REGISTRY).replace("sha256:<pushed digest>", DIGEST)
    objects = helm_chart.render(yaml.safe_load(text))
    found = helm_chart.daemonsets(objects)
    assert set(found) == {"device-plugin", "label-writer"}
    assert set(_images(objects).values()) == {f"{REGISTRY}@{DIGEST}"}
    env = helm_chart.env_of(helm_chart.main_container(found["device-plugin"]))
    assert env["DEFAULT_CONFIG"] == "default"
