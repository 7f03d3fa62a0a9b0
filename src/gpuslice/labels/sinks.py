"""Where labels go: NFD's features.d file (atomic), a stream, or a NodeFeature object (YAML or the API)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol, TextIO

import yaml

from gpuslice.fsutil.atomic import atomic_write_text
from gpuslice.labels.nodefeature import NodeFeatureStore, Outcome, apply_node_feature, node_feature_object

DEFAULT_OUTPUT_FILE = "/etc/kubernetes/node-feature-discovery/features.d/gfd"


class LabelSink(Protocol):
    """Publishes a label set; `withdraw` takes published labels back when a periodic labeller exits."""

    description: str

    def write(self, labels: Mapping[str, str]) -> None: ...

    def withdraw(self) -> None: ...


def format_features(labels: Mapping[str, str]) -> str:
    """NFD local-source format: one `key=value` line per label (sorted, so the file is reproducible)."""
    return "".join(f"{key}={labels[key]}\n" for key in sorted(labels))


def parse_features(text: str) -> dict[str, str]:
    """The inverse of format_features (used by tests and by anyone reading a features.d file)."""
    labels = {}
    for line in text.splitlines():
        if line.strip():
            key, _, value = line.partition("=")
            labels[key] = value
    return labels


class FeatureFileSink:
    """NFD's `local` source file, replaced atomically on every write; removed on withdraw (as GFD does)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.description = f"features file {self.path}"

    def write(self, labels: Mapping[str, str]) -> None:
        atomic_write_text(self.path, format_features(labels))

    def withdraw(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class StreamSink:
    """`key=value` lines on a stream (`--output-file -`); one block per labelling pass."""

    def __init__(self, stream: TextIO, description: str = "standard output") -> None:
        self.stream = stream
        self.description = description

    def write(self, labels: Mapping[str, str]) -> None:
        self.stream.write(format_features(labels))
        self.stream.flush()

    def withdraw(self) -> None:
        return None


def node_feature_yaml(labels: Mapping[str, str], node_name: str, namespace: str) -> str:
    return yaml.safe_dump(node_feature_object(labels, node_name, namespace), sort_keys=False)


class NodeFeatureYamlSink:
    """The NodeFeature object as YAML, to a file (atomically) or to a stream as `---` separated documents."""

    def __init__(self, node_name: str, namespace: str, *, path: str | Path | None = None, stream: TextIO | None = None):
        if (path is None) == (stream is None):
            raise ValueError("NodeFeatureYamlSink needs exactly one of path or stream")
        self.node_name = node_name
        self.namespace = namespace
        self.path = Path(path) if path is not None else None
        self.stream = stream
        self.description = f"NodeFeature YAML to {self.path or 'standard output'}"

    def write(self, labels: Mapping[str, str]) -> None:
        text = node_feature_yaml(labels, self.node_name, self.namespace)
        if self.path is not None:
            atomic_write_text(self.path, text)
        elif self.stream is not None:
            self.stream.write("---\n" + text)
            self.stream.flush()

    def withdraw(self) -> None:
        return None  # GFD leaves NodeFeature output in place on exit


class NodeFeatureApiSink:
    """Creates or updates `nvidia-features-for-<node>` through a NodeFeatureStore (the API server)."""

    def __init__(self, store: NodeFeatureStore, node_name: str, namespace: str) -> None:
        self.store = store
        self.node_name = node_name
        self.namespace = namespace
        self.description = f"NodeFeature {namespace}/nvidia-features-for-{node_name}"
        self.last_outcome: Outcome | None = None

    def write(self, labels: Mapping[str, str]) -> None:
        self.last_outcome = apply_node_feature(self.store, node_feature_object(labels, self.node_name, self.namespace))

    def withdraw(self) -> None:
        return None
