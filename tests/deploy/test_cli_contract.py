"""The manifests call the real CLI: every argument and environment variable is one the command declares."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import click
import pytest

from gpuslice.cli.main import SUBCOMMANDS
from gpuslice.plugin.serving_probe import SERVING_PROBE_TIMEOUT_S
from tests.deploy.rendering import TARGETS, container, find

DAEMONSETS = ("gpuslice-device-plugin", "gpuslice-label-writer")
# Environment read by the NVIDIA container runtime when it creates the container, not by gpuslice.
RUNTIME_ENV = {
    "NVIDIA_VISIBLE_DEVICES": "which GPUs (and so which driver files) the runtime mounts",
    "NVIDIA_DRIVER_CAPABILITIES": "which driver libraries and binaries the runtime mounts",
    "NVIDIA_MIG_MONITOR_DEVICES": "asks the runtime for the MIG monitor capability device",
}
FIELD_VALUES = {"spec.nodeName": "node-1", "metadata.namespace": "gpuslice-system"}


def _command(subcommand: str) -> click.Command:
    target = SUBCOMMANDS[subcommand][0]
    module_name, attribute = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            pytest.skip(f"{module_name} is not written yet, so `gpuslice {subcommand}` cannot be checked")
        raise
    command = getattr(module, attribute)
    assert isinstance(command, click.Command)
    return command


def _declared_envvars(command: click.Command) -> set[str]:
    names: set[str] = set()
    for param in command.params:
        envvar = getattr(param, "envvar", None)
        if isinstance(envvar, str):
            names.add(envvar)
        elif envvar:
            names.update(envvar)
    return names


def _pod_view(objects: list[dict[str, Any]], daemonset: dict[str, Any], root: Path) -> tuple[list[str], dict[str, str]]:
    """Args and env as the container sees them; ConfigMap mounts become real files under `root`."""
    spec, box = daemonset["spec"]["template"]["spec"], container(daemonset)
    moved: dict[str, str] = {}
    for mount in box["volumeMounts"]:
        volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
        if "configMap" in volume:
            data = find(objects, "ConfigMap", volume["configMap"]["name"])["data"]
            local = root / mount["name"]
            local.mkdir()
            for key, text in data.items():
                (local / key).write_text(text)
            moved[mount["mountPath"].rstrip("/") + "/"] = f"{local}/"
    env: dict[str, str] = {}
    for entry in box.get("env", []):
        value = entry["value"] if "value" in entry else FIELD_VALUES[entry["valueFrom"]["fieldRef"]["fieldPath"]]
        for mount_path, local_path in moved.items():
            value = local_path if value == mount_path.rstrip("/") else value.replace(mount_path, local_path)
        env[entry["name"]] = value
    # The kubelet expands $(VAR) in args from the container's env.
    args = [re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), arg) for arg in box["args"]]
    return args, env


@pytest.mark.parametrize("name", DAEMONSETS)
@pytest.mark.parametrize("target", TARGETS)
def test_args_and_env_match_the_cli(
    rendered: dict[str, list[dict[str, Any]]], target: str, name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    objects = rendered[target]
    daemonset = find(objects, "DaemonSet", name)
    assert "command" not in container(daemonset), "the image's entrypoint is `gpuslice`; set args only"
    args, env = _pod_view(objects, daemonset, tmp_path)
    subcommand, options = args[0], args[1:]
    command = _command(subcommand)
    declared = _declared_envvars(command)
    problems = [
        f"reads no {variable} (it declares {', '.join(sorted(declared))})"
        for variable in sorted(set(env) - declared - set(RUNTIME_ENV))
    ]
    for variable in declared:
        monkeypatch.delenv(variable, raising=False)
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    try:
        context = command.make_context(subcommand, list(options))
    except click.ClickException as exc:
        problems.append(f"refuses `{' '.join(args)}`: {exc.format_message()}")
    else:
        for param in command.params:
            envvars = {param.envvar} if isinstance(param.envvar, str) else set(param.envvar or ())
            if envvars & set(env) and context.params[param.name or ""] is None:
                problems.append(f"ignores {', '.join(sorted(envvars & set(env)))} for {param.name}")
    assert problems == [], f"deploy/{target} {name}: `gpuslice {subcommand}` " + "; ".join(problems)


@pytest.mark.parametrize("target", TARGETS)
def test_metrics_port_argument_matches_the_container_port(
    rendered: dict[str, list[dict[str, Any]]], target: str
) -> None:
    box = container(find(rendered[target], "DaemonSet", "gpuslice-device-plugin"))
    args = box["args"]
    port = int(args[args.index("--metrics-port") + 1])
    assert {p["name"]: p["containerPort"] for p in box["ports"]} == {"metrics": port}
    for probe in ("readinessProbe", "livenessProbe"):
        assert box[probe]["httpGet"]["port"] == "metrics"
        # /healthz waits up to SERVING_PROBE_TIMEOUT_S for each gRPC server; the kubelet's default is 1 s.
        assert box[probe].get("timeoutSeconds", 1) > SERVING_PROBE_TIMEOUT_S
