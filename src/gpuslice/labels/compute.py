"""The whole label set for a node: NVIDIA's catalogue, our extensions, the timestamp (pure)."""

from __future__ import annotations

from gpuslice.config import Config, effective_sharing
from gpuslice.gpu import Node
from gpuslice.labels.dynamic_profiles import dynamic_mig_labels
from gpuslice.labels.isolation import gpuslice_labels
from gpuslice.labels.names import NVIDIA_PREFIX, TIMESTAMP_LABEL, validate_labels
from gpuslice.labels.nvidia import nvidia_labels
from gpuslice.records import record


@record
class LabelSet:
    """Labels (key -> value) plus the warnings a labeller should log."""

    labels: dict[str, str]
    warnings: tuple[str, ...] = ()


def compute_label_set(
    node: Node, config: Config, timestamp: int | None, *, machine_type: str | None = None
) -> LabelSet:
    """Labels for `node` under `config`; raises LabelError where gpu-feature-discovery fails too.

    `timestamp` (Unix seconds) becomes `nvidia.com/gfd.timestamp` unless it is None or the config sets
    `flags.gfd.noTimestamp`. `machine_type` overrides the node's own (read from `--machine-type-file`).
    """
    sharing = effective_sharing(config)
    machine = node.machine_type if machine_type is None else machine_type
    labels, warnings = nvidia_labels(node, config, sharing, machine)
    ours, our_warnings = gpuslice_labels(node, config)
    labels.update(ours)
    labels.update(dynamic_mig_labels(node, config))
    warnings.extend(our_warnings)
    if timestamp is not None and not config.flags.gfd.no_timestamp:
        labels[TIMESTAMP_LABEL] = str(timestamp)
    # Our own labels are checked as they are built; NVIDIA's are kept as NVIDIA would write them, with a warning.
    warnings.extend(f"{problem} (Kubernetes will refuse it)" for problem in validate_labels(labels))
    return LabelSet(dict(sorted(labels.items())), tuple(dict.fromkeys(warnings)))


def compute_labels(
    node: Node, config: Config, timestamp: int | None, *, machine_type: str | None = None
) -> dict[str, str]:
    """Just the labels of compute_label_set (sorted by key)."""
    return compute_label_set(node, config, timestamp, machine_type=machine_type).labels


def nvidia_only(labels: dict[str, str]) -> dict[str, str]:
    """The subset gpu-feature-discovery itself would write (handy when comparing with a GFD node)."""
    return {key: value for key, value in labels.items() if key.startswith(NVIDIA_PREFIX)}
