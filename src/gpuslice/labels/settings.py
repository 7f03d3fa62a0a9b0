"""Building a labeller's settings from options, environment and the config file (flag > env > file > default)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO

from gpuslice.config import GFD_FLAGS, Config, apply_overrides, load_config, overrides_from_env
from gpuslice.discovery import Backend, make_fake_backend
from gpuslice.labels.kube import in_cluster
from gpuslice.labels.loop import LabellerSettings
from gpuslice.labels.nodefeature import NodeFeatureStore
from gpuslice.labels.sinks import FeatureFileSink, LabelSink, NodeFeatureApiSink, NodeFeatureYamlSink, StreamSink

NodeFeatureMode = Literal["yaml", "apply"]
STDOUT_NAMES = ("", "-")  # NVIDIA: an empty outputFile means stdout; we accept "-" too


class BackendFactory(Protocol):
    """Builds the discovery backend (the CLI passes discovery.select.make_backend)."""

    def __call__(
        self, kind: str, node_spec_ref: str | None, driver_root: str, fail_on_init_error: bool, *, node_name: str | None
    ) -> Backend: ...


@dataclass
class LabelOptions:
    """What the `labels` command was given; `flag_overrides` holds only flags set on the command line."""

    backend: str = "fake"
    node_spec: str | None = None
    config_file: str | None = None
    flag_overrides: dict[str, Any] = field(default_factory=dict)  # dotted config key -> value
    node_feature: NodeFeatureMode | None = None
    node_name: str | None = None
    namespace: str = "default"
    environ: Mapping[str, str] = field(default_factory=dict)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    running_in_cluster: bool | None = None  # None: detect
    store_factory: Callable[[], NodeFeatureStore] | None = None  # None: the Kubernetes API (lightkube)
    backend_factory: BackendFactory = make_fake_backend  # the CLI passes make_backend


def effective_config(options: LabelOptions) -> tuple[Config, tuple[str, ...]]:
    """The config file with environment and then command-line values applied on top."""
    loaded = load_config(options.config_file)
    overrides = {**overrides_from_env(GFD_FLAGS, options.environ), **options.flag_overrides}
    return apply_overrides(loaded.config, overrides, loaded.source), loaded.warnings


def read_machine_type_file(path: str) -> tuple[str, str | None]:
    """The content of `machineTypeFile`, or ('unknown', why) when it cannot be read (GFD's behaviour)."""
    try:
        text = Path(path).read_text().strip()
    except OSError as exc:
        return "unknown", f"Error getting machine type from {path}: {exc.strerror or exc}"
    return (text or "unknown"), None


def load_settings(options: LabelOptions) -> LabellerSettings:
    """Config, backend and sink for one run (called again on every reload)."""
    config, config_warnings = effective_config(options)
    warnings = list(config_warnings)
    flags = config.flags
    backend = options.backend_factory(
        options.backend,
        options.node_spec,
        flags.nvidia_driver_root,
        flags.fail_on_init_error,
        node_name=options.node_name,
    )
    machine_type = None
    # The backend reports the machine type (the node spec's, or DMI's); an explicitly set file wins.
    if "machine_type_file" in flags.gfd.explicit:
        machine_type, problem = read_machine_type_file(flags.gfd.machine_type_file)
        if problem:
            warnings.append(problem)
    node_name = options.node_name or backend.discover().name
    sink = choose_sink(config, options, node_name)
    return LabellerSettings(config, backend.discover, sink, machine_type, tuple(warnings), backend.close)


def choose_sink(config: Config, options: LabelOptions, node_name: str) -> LabelSink:
    """File, stdout, NodeFeature YAML or the NodeFeature API, from `--node-feature` and useNodeFeatureAPI.

    With neither set, the API is used inside a cluster unless an output file was given explicitly, and the
    features file otherwise (NVIDIA defaults to the API since v0.19; outside a cluster there is none).
    """
    gfd = config.flags.gfd
    output_explicit = "output_file" in gfd.explicit
    if options.node_feature == "yaml":
        if output_explicit and gfd.output_file not in STDOUT_NAMES:
            return NodeFeatureYamlSink(node_name, options.namespace, path=gfd.output_file)
        return NodeFeatureYamlSink(node_name, options.namespace, stream=options.stdout)
    use_api = config.flags.use_node_feature_api
    if options.node_feature == "apply":
        use_api = True
    if use_api is None:
        detected = in_cluster(options.environ) if options.running_in_cluster is None else options.running_in_cluster
        use_api = detected and not output_explicit
    if use_api:
        store = options.store_factory() if options.store_factory is not None else _kubernetes_store()
        return NodeFeatureApiSink(store, node_name, options.namespace)
    if gfd.output_file in STDOUT_NAMES:
        return StreamSink(options.stdout)
    return FeatureFileSink(gfd.output_file)


def _kubernetes_store() -> NodeFeatureStore:
    from gpuslice.labels.kube import LightkubeNodeFeatureStore

    return LightkubeNodeFeatureStore()
