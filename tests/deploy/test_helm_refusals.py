"""The chart refuses what NVIDIA's refuses, and what values.schema.json rules out, with a one-line reason."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.helm_chart import refusal, render

TWO_CONFIGS = {"a": "version: v1\n", "b": "version: v1\n"}

# (values, namespace, words the refusal must contain)
REFUSALS: list[tuple[str, dict[str, Any], str, str]] = [
    ("the default namespace", {}, "default", "allowDefaultNamespace=true"),
    ("namespaceOverride default", {"namespaceOverride": "default"}, "gpu-system", "allowDefaultNamespace=true"),
    ("a release in default, objects elsewhere", {"namespaceOverride": "gpu"}, "default", "allowDefaultNamespace"),
    ("a namespace value", {"namespace": "gpu"}, "gpu-system", "--namespace"),
    (
        "config.name with config.map",
        {"config": {"name": "mine", "map": {"default": "version: v1\n"}}},
        "gpu-system",
        "config.name and config.map exclude each other",
    ),
    ("several configs and no default", {"config": {"map": TWO_CONFIGS}}, "gpu-system", "set config.default"),
    (
        "no fallback finds one",
        {"config": {"map": {"default": "version: v1\n", "b": "v: 1\n"}, "fallbackStrategies": ["single"]}},
        "gpu-system",
        "no way to choose one",
    ),
    (
        "a default that is no config",
        {"config": {"map": TWO_CONFIGS, "default": "c"}},
        "gpu-system",
        'config.default "c" is not a key of config.map (keys: a, b)',
    ),
    (
        "a config that is not YAML",
        {"config": {"map": {"default": "version: [v1\n"}}},
        "gpu-system",
        "config.map.default is not a YAML mapping",
    ),
    ("the latest tag", {"image": {"tag": "latest"}}, "gpu-system", "'latest' is refused"),
    ("the legacy DaemonSet API", {"legacyDaemonsetAPI": True}, "gpu-system", "gone since Kubernetes 1.16"),
    (
        "DRA with per-node configs",
        {"dra": {"enabled": True}, "config": {"name": "mine"}},
        "gpu-system",
        "does not read per-node configs",
    ),
    # values.schema.json: what `helm install` refuses before rendering.
    ("a misspelt key", {"gfd": {"enabeld": True}}, "gpu-system", "'enabeld' not allowed"),
    ("a misspelt top-level key", {"migStrategie": "mixed"}, "gpu-system", "'migStrategie' not allowed"),
    ("a wrong type", {"failOnInitError": "yes"}, "gpu-system", "failOnInitError"),
    ("an unknown MIG strategy", {"migStrategy": "full"}, "gpu-system", "migStrategy"),
    ("an unknown fallback", {"config": {"fallbackStrategies": ["first"]}}, "gpu-system", "fallbackStrategies"),
    ("a config that is not text", {"config": {"map": {"default": {"version": "v1"}}}}, "gpu-system", "map"),
    ("a malformed digest", {"image": {"digest": "sha256:abc"}}, "gpu-system", "digest"),
    ("a relative driver root", {"nvidiaDriverRoot": "run/nvidia"}, "gpu-system", "nvidiaDriverRoot"),
    (
        "a DRA API version",
        {"dra": {"enabled": True, "resourceApiVersion": "v1beta1"}},
        "gpu-system",
        "resourceApiVersion",
    ),
    ("a privileged metrics port", {"metrics": {"port": 80}}, "gpu-system", "port"),
]


@pytest.mark.parametrize(("values", "namespace", "reason"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_refused(values: dict[str, Any], namespace: str, reason: str) -> None:
    message = refusal(values, namespace)
    assert reason in message
    assert "goroutine" not in message and "panic" not in message


@pytest.mark.parametrize(
    ("values", "namespace"),
    [
        ({"allowDefaultNamespace": True}, "default"),
        ({"namespaceOverride": "gpu-operator"}, "gpu-system"),
        ({"config": {"map": TWO_CONFIGS, "default": "b"}}, "gpu-system"),
        ({"config": {"map": {"default": "version: v1\n", "b": "version: v1\n"}}}, "gpu-system"),  # named
        ({"config": {"map": {"only": "version: v1\n"}}}, "gpu-system"),  # single
        ({"config": {"map": TWO_CONFIGS, "fallbackStrategies": ["empty"]}}, "gpu-system"),
        ({"config": {"name": "mine"}}, "gpu-system"),
        ({"image": {"tag": "0.1.0"}}, "gpu-system"),
        ({"legacyDaemonsetAPI": None}, "gpu-system"),  # in every NVIDIA values file before v0.15
    ],
)
def test_the_near_misses_render(values: dict[str, Any], namespace: str) -> None:
    assert render(values, namespace)
