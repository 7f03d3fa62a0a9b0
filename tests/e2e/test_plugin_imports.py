"""The plugin's start-up path imports only what the plugin needs: no numpy, plotting, simulator, NVML or
cluster client until something uses them (each costs start-up time, and start-up time is GPUs unallocatable)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gpuslice.kubelet import MockKubelet
from gpuslice.kubelet.dra_mock import MockDraKubelet
from tests.support.process import clean_env, finish

WAIT_S = 20.0
# top-level modules (or gpuslice packages) the device plugin must not load on its way to serving
NOT_ON_PLUGIN_PATH = (
    "numpy",
    "matplotlib",
    "pynvml",
    "lightkube",
    "rich",
    "gpuslice.sim",
    "gpuslice.fgd",
    "gpuslice.demo",
    "gpuslice.advise",
    "gpuslice.labels",
    "gpuslice.dra",
    "gpuslice.kubelet",
)
# a plugin given no config file or node-spec file parses no YAML and validates nothing: its settings are
# the dataclass defaults, and pydantic (the file schema) loads only with a file or a flag to validate
NOT_ON_DEFAULT_PLUGIN_PATH = (
    *NOT_ON_PLUGIN_PATH,
    "yaml",
    "pydantic",
    "pydantic_core",
    "gpuslice.config.schema",
    "gpuslice.nodeconfig",  # per-node configs are off without --config-file-srcdir
    "prometheus_client",  # the metrics are plain counters until a metrics port or the config watcher exports them
    # the modules of what this plan does not use: dynamic MIG's runtime, the NVML and host-path backends
    "gpuslice.plugin.dynamic_runtime",
    "gpuslice.plugin.pod_resources_watch",
    "gpuslice.sharing.dynamic.runtime",  # sharing.dynamic loads each module on first use: the plan only
    "gpuslice.sharing.dynamic.geometry",
    "gpuslice.sharing.dynamic.checkpoint",
    "gpuslice.fsutil.checkpoint",
    "gpuslice.discovery.driver_files",  # the CDI specs' driver-file search: only where specs are written
    "gpuslice.discovery.nvml.backend",
    "gpuslice.discovery.hostpath",
    # the generated code of the APIs only DRA speaks (gpuslice.wire imports each on first use)
    "gpuslice.wire.generated.dra",
    "gpuslice.wire.generated.drahealth",
    "gpuslice.wire.generated.pluginregistration",
)
NOT_ON_HELP_PATH = (*NOT_ON_PLUGIN_PATH, "grpc", "google.protobuf", "pydantic", "yaml", "gpuslice.plugin")


def offending(modules: list[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden))


def modules_after(statement: str) -> list[str]:
    code = f"import json, sys; {statement}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=clean_env())
    modules: list[str] = json.loads(done.stdout)
    return modules


@pytest.mark.parametrize(
    ("statement", "forbidden"),
    [
        ("import gpuslice.cli.main", NOT_ON_HELP_PATH),
        ("import gpuslice.cli.plugin_cmd", NOT_ON_DEFAULT_PLUGIN_PATH),
        ("import gpuslice.cli.kubelet_cmd", NOT_ON_PLUGIN_PATH[:-1]),
        # `gpuslice dra` shares NVIDIA's flags with the plugin (cli.nvidia_options), not the plugin's modules
        ("import gpuslice.cli.dra_cmd", ("gpuslice.plugin", "gpuslice.cli.plugin_cmd", "gpuslice.kubelet")),
    ],
)
def test_importing_a_command_loads_nothing_it_does_not_need(statement: str, forbidden: tuple[str, ...]) -> None:
    modules = modules_after(statement)
    assert statement.split()[-1] in modules  # the check can see what it looks for
    assert offending(modules, forbidden) == []


# Every gpuslice dataclass the plugin command loads, lacking a docstring of its own, as "module.Class".
UNDOCUMENTED_DATACLASSES = """
import dataclasses, json, sys
import gpuslice.cli.plugin_cmd
found = []
for name, module in sorted(sys.modules.items()):
    if not name.startswith("gpuslice"):
        continue
    for value in vars(module).values():
        if dataclasses.is_dataclass(value) and isinstance(value, type) and value.__module__ == name:
            doc = value.__dict__.get("__doc__") or ""
            if doc.startswith(value.__name__ + "("):  # dataclass() wrote it from the signature
                found.append(name + "." + value.__qualname__)
print(json.dumps(found))
"""


def test_every_dataclass_on_the_plugin_path_has_a_docstring() -> None:
    """dataclass() gives a class without a docstring one computed with inspect.signature, which costs more
    than building the class itself; the plugin's start creates ~70 of them."""
    done = subprocess.run(
        [sys.executable, "-c", UNDOCUMENTED_DATACLASSES], capture_output=True, text=True, check=True, env=clean_env()
    )
    assert json.loads(done.stdout) == []


def test_a_running_plugin_imported_nothing_it_does_not_need(workdir: Path) -> None:
    """Everything the process imported from its start to serving the kubelet (registered, devices listed),
    lazy imports included; the first topology-aware preferred allocation may load numpy later."""
    with MockKubelet(workdir, checkpoint_enabled=False) as kubelet:
        args = ["--backend", "fake", "--node-spec", "preset:h100x4", "--kubelet-socket", str(kubelet.socket_path)]
        process = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "gpuslice", "plugin", *args],
            env=clean_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert kubelet.wait_for(resource="nvidia.com/gpu", registered=True, allocatable=4, timeout=WAIT_S)
        finally:
            code, err = finish(process, signal.SIGTERM)
    assert code == 0, err[-2000:]
    imported = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", err, flags=re.MULTILINE)
    assert "gpuslice.plugin.server" in imported
    assert offending(imported, NOT_ON_DEFAULT_PLUGIN_PATH) == []


# a valid config file is read by the direct reader (config.direct): the schema's pydantic models, whose
# building is most of what a file used to add to a start, load only to word an error
NOT_ON_CONFIG_FILE_PLUGIN_PATH = (
    *NOT_ON_PLUGIN_PATH,
    "pydantic",
    "pydantic_core",
    "gpuslice.config.schema",
    "tempfile",  # fsutil.atomic names its temp files itself: tempfile brings shutil, bz2, lzma and random
    "gpuslice.sharing.dynamic.runtime",  # no dynamic MIG in the file: its runtime, geometry and checkpoint
    "gpuslice.sharing.dynamic.geometry",
    "gpuslice.sharing.dynamic.checkpoint",
    "gpuslice.discovery.driver_files",  # no cdi-* device list strategy in the file
)
CONFIG_FILE = """\
version: v1
flags: {migStrategy: none, plugin: {deviceListStrategy: [envvar], passDeviceSpecs: false}, gfd: {sleepInterval: 60s}}
sharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 2}]}}
"""


# the same settings in block style, as a ConfigMap's file usually is: read without PyYAML (fsutil.plain_yaml)
BLOCK_CONFIG_FILE = """\
version: v1
flags:
  migStrategy: none
  plugin:
    deviceListStrategy: [envvar]
    passDeviceSpecs: false
  gfd:
    sleepInterval: 60s
sharing:
  timeSlicing:
    resources:
      - name: nvidia.com/gpu
        replicas: 2
"""


def imported_by_a_start_with(workdir: Path, text: str) -> list[str]:
    """The modules a real plugin start with this config file loads, up to serving its GPUs."""
    config = workdir / "config.yaml"
    config.write_text(text)
    with MockKubelet(workdir, checkpoint_enabled=False) as kubelet:
        args = ["--backend", "fake", "--node-spec", "preset:h100x4", "--kubelet-socket", str(kubelet.socket_path)]
        process = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "gpuslice", "plugin", *args, "--config-file", str(config)],
            env=clean_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert kubelet.wait_for(resource="nvidia.com/gpu", registered=True, allocatable=8, timeout=WAIT_S)
        finally:
            code, err = finish(process, signal.SIGTERM)
    assert code == 0, err[-2000:]
    return re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", err, flags=re.MULTILINE)


def test_a_plugin_with_a_valid_config_file_never_loads_pydantic(workdir: Path) -> None:
    imported = imported_by_a_start_with(workdir, CONFIG_FILE)
    assert "yaml" in imported and "gpuslice.config.direct" in imported  # flow style: PyYAML reads it
    assert offending(imported, NOT_ON_CONFIG_FILE_PLUGIN_PATH) == []


def test_a_plugin_with_a_plain_block_config_file_never_loads_pyyaml(workdir: Path) -> None:
    imported = imported_by_a_start_with(workdir, BLOCK_CONFIG_FILE)
    assert "gpuslice.fsutil.plain_yaml" in imported and "gpuslice.config.direct" in imported
    assert offending(imported, (*NOT_ON_CONFIG_FILE_PLUGIN_PATH, "yaml")) == []


# `gpuslice dra` registers with the kubelet before it needs the API client (made on the first API call, on
# the publisher's thread), the Prometheus client (the counters' registry is made by a scrape) or a
# claim's opaque-config models (pydantic, loaded by the first config of ours)
NOT_ON_DRA_START_PATH = ("pydantic", "pydantic_core", "gpuslice.dra.opaque", "lightkube", "httpx2", "prometheus_client")
# nor the API client's package (gpuslice.kube: the publisher's first sync loads it, after registration), the
# MPS daemon lifecycle (gpuslice.mps: a node with an MPS root, or an MPS claim, loads it) or shutil (with
# bz2 and lzma: only removing an MPS claim's directory needs it)
NOT_BEFORE_DRA_REGISTRATION = (*NOT_ON_DRA_START_PATH, "gpuslice.kube", "gpuslice.mps", "shutil")
DRA_BUILT = """
from pathlib import Path
from gpuslice.dra.app import DraApp
from gpuslice.dra.kube import LightkubeResourceApi
api = LightkubeResourceApi("http://127.0.0.1:1")
"""
REGISTRATION_MARK = "-- the registration socket is served --"
# `gpuslice dra` as its console script runs it, writing REGISTRATION_MARK to stderr once the registration
# socket is served: under -X importtime every import of the start (the main thread's) is above the mark,
# and the publisher's, whose thread starts after it, below.
DRA_MARKED = f"""
import sys
from gpuslice.dra.kubelet_plugin import KubeletPlugin
serve_registration = KubeletPlugin._serve_registration
def marked(self):
    serve_registration(self)
    print({REGISTRATION_MARK!r}, file=sys.stderr, flush=True)
KubeletPlugin._serve_registration = marked
from gpuslice.cli.main import main
sys.argv[0] = "gpuslice"
main()
"""
IMPORTED = r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$"


def test_a_dra_start_loads_no_api_client_and_no_opaque_models_before_a_call() -> None:
    modules = modules_after(f"exec({DRA_BUILT!r})")
    assert "gpuslice.dra.app" in modules and "gpuslice.dra.claims" in modules and "gpuslice.dra.mps" in modules
    assert offending(modules, NOT_BEFORE_DRA_REGISTRATION) == []


def test_a_dra_process_registers_before_its_api_client_and_never_loads_pydantic(workdir: Path) -> None:
    """Registering needs no API client, MPS lifecycle, Prometheus client or opaque-config models, and publishing
    no opaque-config models: gpuslice.kube loads with the first sync, after registration, the Prometheus client
    with the first scrape (the metrics port is served from the start, as a DaemonSet runs it), pydantic with
    a claim's first config."""
    config = workdir / "config.yaml"
    config.write_text(CONFIG_FILE)
    with MockDraKubelet(workdir / "dra", "imports-node") as kubelet:
        args = ["dra", "--backend", "fake", "--node-spec", "preset:h100x4", "--node-name", "imports-node"]
        args += ["--driver-name", "gpu.gpuslice.io", "--config-file", str(config), "--kube-api-server", kubelet.api_url]
        args += ["--plugins-registry", str(kubelet.registry_dir), "--plugins-dir", str(kubelet.plugins_dir)]
        args += ["--cdi-spec-dir", str(workdir / "cdi"), "--metrics-port", "0", "--metrics-address", "127.0.0.1"]
        process = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-c", DRA_MARKED, *args],
            env=clean_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert kubelet.watcher.wait_registered("gpu.gpuslice.io", timeout=WAIT_S)
            assert kubelet.wait_for_slices("gpu.gpuslice.io", min_devices=4, timeout=WAIT_S)
        finally:
            code, err = finish(process, signal.SIGTERM)
    assert code == 0, err[-2000:]
    before, mark, after = err.partition(REGISTRATION_MARK)
    assert mark, err[-2000:]
    started = re.findall(IMPORTED, before, flags=re.MULTILINE)
    published = re.findall(IMPORTED, after, flags=re.MULTILINE)
    assert "gpuslice.dra.claims" in started and "yaml" in started and "gpuslice.config.direct" in started
    assert "gpuslice.dra.metrics" in started and "gpuslice.node.metrics_server" in started
    assert "gpuslice.kube" in published and "lightkube" in published  # it published through the client
    assert offending(started, NOT_BEFORE_DRA_REGISTRATION) == []
    assert offending(started + published, ("pydantic", "pydantic_core", "gpuslice.dra.opaque")) == []
