"""Random values files within NVIDIA's keys: the chart renders objects that validate --strict, or refuses in one
line; it never fails in the middle of a template."""

from __future__ import annotations

from typing import Any

import helm_python
import kubernetes_validate
from hypothesis import given
from hypothesis import strategies as st

from tests.deploy.helm_chart import daemonsets, render

CONFIGS = {
    "whole": "version: v1\nflags:\n  migStrategy: none\n",
    "mig": "version: v1\nflags:\n  migStrategy: mixed\n",
    "mps": "version: v1\nsharing:\n  mps:\n    resources:\n      - name: nvidia.com/gpu\n        replicas: 2\n",
    "mps-null": "version: v1\nsharing:\n  mps: null\n",
    "cdi": "version: v1\nflags:\n  plugin:\n    deviceListStrategy: [cdi-cri, envvar]\n",
    "broken": "version: [v1\n",
}
TOP_LEVEL = {
    "compatWithCPUManager": st.none() | st.booleans(),
    "migStrategy": st.none() | st.sampled_from(["none", "single", "mixed", "dynamic"]),
    "failOnInitError": st.none() | st.booleans(),
    "deviceListStrategy": st.none() | st.sampled_from(["envvar", "volume-mounts", "cdi-cri", "envvar,cdi-annotations"]),
    "deviceIDStrategy": st.none() | st.sampled_from(["uuid", "index"]),
    "nvidiaDriverRoot": st.none() | st.sampled_from(["/", "/run/nvidia/driver", "/run/nvidia/driver/"]),
    "gdsEnabled": st.none() | st.booleans(),
    "logVerbosity": st.none() | st.integers(0, 10),
    "runtimeClassName": st.none() | st.just("nvidia"),
    "priorityClassName": st.sampled_from(["system-node-critical", ""]),
    "nodeSelector": st.dictionaries(st.sampled_from(["a.io/x", "pool"]), st.sampled_from(["gpu", "true"]), max_size=2),
    "updateStrategy": st.sampled_from([{"type": "RollingUpdate"}, {"type": "OnDelete"}, {}]),
}


@st.composite
def values_files(draw: st.DrawFn) -> dict[str, Any]:
    values: dict[str, Any] = {key: draw(strategy) for key, strategy in TOP_LEVEL.items() if draw(st.booleans())}
    names = draw(st.lists(st.sampled_from(sorted(CONFIGS)), unique=True, max_size=3))
    config: dict[str, Any] = {"map": {name: CONFIGS[name] for name in names}}
    if names and draw(st.booleans()):
        config["default"] = draw(st.sampled_from([*names, "missing"]))
    config["fallbackStrategies"] = draw(st.lists(st.sampled_from(["named", "single", "empty"]), unique=True))
    values["config"] = config
    values["gfd"] = {"enabled": draw(st.booleans()), "sleepInterval": draw(st.none() | st.sampled_from(["30s", 90]))}
    values["devicePlugin"] = {"enabled": draw(st.booleans())}
    values["dra"] = {"enabled": draw(st.booleans())}
    values["mps"] = {
        "root": draw(st.sampled_from(["/run/nvidia/mps", "/var/mps/"])),
        "enableHostPID": draw(st.booleans()),
    }
    return values


@given(values_files())
def test_fuzz_values_render_valid_objects_or_are_refused(values: dict[str, Any]) -> None:
    try:
        objects = render(values)
    except helm_python.HelmError as exc:
        message = str(exc)
        # A refusal of ours (validation.yaml) or of the schema, never an error inside a template.
        assert "validation.yaml" in message or "values don't meet the specifications" in message, message
        return
    version = "1.37.0"
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)
    for daemonset in daemonsets(objects).values():
        assert len(daemonset["spec"]["template"]["spec"]["containers"]) == 1
