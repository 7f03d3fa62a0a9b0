"""The one in-process plugin for tests and benchmarks: a PluginApp built from a node spec and config text."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuslice.discovery import Backend, FakeBackend, MigControl, NodeSpec, load_node_spec, parse_node_spec
from gpuslice.gpu import Node
from gpuslice.kubelet import MockKubelet
from gpuslice.plugin.app import AppOptions, PluginApp

WAIT_S = 10.0
_CONFIG_FILES = itertools.count()
TEST_WORKERS = 8


def plugin_options(workdir: Path, config: str = "", kubelet: MockKubelet | None = None, **fields: Any) -> AppOptions:
    """Options of a fake-backend plugin whose config file is `config` (written to `workdir`), registering
    with `kubelet` when given; plain answers (gpuslice's pipeline) and TEST_WORKERS unless `fields` say."""
    config_file = workdir / f"config-{next(_CONFIG_FILES)}.yaml"  # one per app: a test may start several
    config_file.write_text(config)
    defaults: dict[str, Any] = {
        "backend": "fake",
        "config_file": str(config_file),
        "kubelet_socket": str(kubelet.socket_path) if kubelet is not None else None,
        "socket_dir": None if kubelet is not None else str(workdir),
        "pod_resources_socket": str(kubelet.pod_resources_socket) if kubelet is not None else None,
        "mig_checkpoint": str(workdir / "mig-checkpoint"),
        "cdi_spec_dir": str(workdir / "cdi"),
        "nvidia_answers": False,
        "workers": TEST_WORKERS,
    }
    return AppOptions(**(defaults | fields))


class ControlledFakeBackend(FakeBackend):
    """A fake backend whose MIG control is one the test holds (and keeps across plugin restarts)."""

    def __init__(self, spec: NodeSpec, control: MigControl) -> None:
        super().__init__(spec)
        self.control = control

    def mig_control(self, node: Node) -> MigControl | None:
        return self.control


def fake_backend(
    spec: str | Mapping[str, Any] = "preset:h100x4",
    workdir: Path | None = None,
    health_events: Path | None = None,
    mig_control: MigControl | None = None,
) -> FakeBackend:
    """A fake backend from a preset ref, a node-spec mapping, or YAML text (written to `workdir`); with
    `mig_control`, that control creates its MIG devices."""
    if isinstance(spec, Mapping):
        node_spec = parse_node_spec(dict(spec), source="<test>")
    elif "\n" in spec and workdir is not None:  # YAML text: from a file, so relative paths resolve
        path = workdir / "node.yaml"
        path.write_text(spec)
        node_spec = load_node_spec(str(path))
    else:
        node_spec = load_node_spec(spec)
    if health_events is not None:
        node_spec = dataclasses.replace(node_spec, health_events=health_events)
    if mig_control is not None:
        return ControlledFakeBackend(node_spec, mig_control)
    return FakeBackend(node_spec)


def build_app(
    workdir: Path,
    config: str = "",
    kubelet: MockKubelet | None = None,
    *,
    backend: Backend | str | Mapping[str, Any] = "preset:h100x4",
    **fields: Any,
) -> PluginApp:
    """A PluginApp (not started) over `backend` (a Backend, or what fake_backend takes)."""
    chosen = backend if isinstance(backend, Backend) else fake_backend(backend, workdir)
    app_fields = ("mps_control", "metrics", "observer", "on_reload", "allocator_factory")
    extra = {key: fields.pop(key) for key in app_fields if key in fields}
    return PluginApp(plugin_options(workdir, config, kubelet, **fields), backend=chosen, **extra)


def wait_listed(app: PluginApp, kubelet: MockKubelet, timeout: float = WAIT_S) -> bool:
    """True once the kubelet lists every advertised resource with all its devices allocatable."""
    return all(
        kubelet.wait_for(resource=r.name, allocatable=len(r.devices), timeout=timeout) for r in app.plan.resources
    )
