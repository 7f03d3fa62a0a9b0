"""Rendering and linting deploy/helm/gpuslice with Helm's own Go SDK (helm-python-sdk), as `helm install` would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python
import yaml

from tests.deploy.rendering import PROJECT_ROOT

CHART = PROJECT_ROOT / "deploy" / "helm" / "gpuslice"
VALUES_DIR = Path(__file__).resolve().parent / "helm_values"
RELEASE = "gpuslice"
NAMESPACE = "gpu-system"
# The chart's kubeVersion floor and the newest schemas the pinned kubernetes-validate ships; DRA's
# DeviceClasses exist per resource.k8s.io version (v1 from 1.34, v1beta2 in 1.33).
KUBERNETES_VERSIONS = ("1.33.0", "1.34.0", "1.37.0")
DRA_VERSIONS = {"v1": ("1.34.0", "1.37.0"), "v1beta2": ("1.33.0",)}

helm_python.disable_logging()


def values_file(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((VALUES_DIR / name).read_text()) or {}
    return loaded


def render(values: dict[str, Any] | None = None, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """Every object of an install with these values (NOTES.txt aside); a HelmError when the chart refuses."""
    manifests = helm_python.Chart.load(CHART).render(values or {}, name=RELEASE, namespace=namespace, is_install=True)
    objects: list[dict[str, Any]] = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        objects += [doc for doc in yaml.safe_load_all(text) if doc]
    return objects


def notes(values: dict[str, Any] | None = None) -> str:
    manifests = helm_python.Chart.load(CHART).render(values or {}, name=RELEASE, namespace=NAMESPACE, is_install=True)
    return next(text for path, text in manifests.items() if path.endswith("NOTES.txt"))


def refusal(values: dict[str, Any], namespace: str = NAMESPACE) -> str:
    """The message with which the chart refuses these values (the test fails if it renders)."""
    try:
        render(values, namespace)
    except helm_python.HelmError as exc:
        return str(exc)
    raise AssertionError(f"the chart rendered {values!r}; expected a refusal")


def lint_problems(values: dict[str, Any], kube_version: str) -> list[str]:
    """`helm lint --strict` findings of warning level or worse (an info such as "icon is recommended" is not)."""
    report = helm_python.lint(CHART, values, strict=True, namespace=NAMESPACE, kube_version=f"v{kube_version}")
    warning = 2
    found = [f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= warning]
    return found + list(report["errors"])


def daemonsets(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """DaemonSets by component (device-plugin, label-writer, dra-plugin)."""
    return {o["metadata"]["labels"]["app.kubernetes.io/component"]: o for o in objects if o["kind"] == "DaemonSet"}


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    """A container's environment by name: the value, or the valueFrom mapping."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def main_container(daemonset: dict[str, Any]) -> dict[str, Any]:
    containers = daemonset["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, f"{daemonset['metadata']['name']}: expected one container (no sidecar)"
    result: dict[str, Any] = containers[0]
    return result
