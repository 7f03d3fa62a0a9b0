"""Node labels compatible with gpu-feature-discovery, our isolation labels, and their sinks."""

from gpuslice.labels.compute import LabelSet, compute_label_set, compute_labels, nvidia_only
from gpuslice.labels.names import GPUSLICE_PREFIX, NVIDIA_PREFIX, TIMESTAMP_LABEL, sanitise, validate_labels
from gpuslice.labels.nodefeature import (
    InMemoryNodeFeatureStore,
    NodeFeatureError,
    NodeFeatureStore,
    apply_node_feature,
    node_feature_name,
    node_feature_object,
)
from gpuslice.labels.nvidia import LabelError, choose_model
from gpuslice.labels.sinks import (
    DEFAULT_OUTPUT_FILE,
    FeatureFileSink,
    LabelSink,
    NodeFeatureApiSink,
    NodeFeatureYamlSink,
    StreamSink,
    format_features,
    parse_features,
)

__all__ = [
    "DEFAULT_OUTPUT_FILE",
    "GPUSLICE_PREFIX",
    "NVIDIA_PREFIX",
    "TIMESTAMP_LABEL",
    "FeatureFileSink",
    "InMemoryNodeFeatureStore",
    "LabelError",
    "LabelSet",
    "LabelSink",
    "NodeFeatureApiSink",
    "NodeFeatureError",
    "NodeFeatureStore",
    "NodeFeatureYamlSink",
    "StreamSink",
    "apply_node_feature",
    "choose_model",
    "compute_label_set",
    "compute_labels",
    "format_features",
    "node_feature_name",
    "node_feature_object",
    "nvidia_only",
    "parse_features",
    "sanitise",
    "validate_labels",
]
