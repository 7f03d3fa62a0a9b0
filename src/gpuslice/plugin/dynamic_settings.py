"""What the plugin needs of dynamic MIG before it knows the plan uses it: settings, socket, MIG control.

The runtime itself (plugin.dynamic_runtime: geometry, checkpoint, pod-resources client) loads only for a
plan with dynamic placements, so a plugin without them starts without those modules.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from gpuslice.discovery import Backend, MigControl
from gpuslice.gpu import Node
from gpuslice.records import record
from gpuslice.wire import DEFAULT_POD_RESOURCES_SOCKET

POD_RESOURCES_SOCKET_ENV = "POD_RESOURCES_SOCKET"
RELEASE_POLL_S = 0.5  # while anything is held: a freed placement must come back within a second
# A held placement the kubelet has never listed is freed only after this long: the kubelet records a pod
# after Allocate returns, and a pod whose admission failed after our Allocate is never listed at all.
ADMISSION_GRACE_S = 30.0


def pod_resources_socket(flag: str | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The socket: `--pod-resources-socket`, else env POD_RESOURCES_SOCKET, else the kubelet default."""
    environ = os.environ if environ is None else environ
    return Path(flag or environ.get(POD_RESOURCES_SOCKET_ENV) or DEFAULT_POD_RESOURCES_SOCKET)


@record
class DynamicMigSettings:
    """Where the pieces live and how often to look; defaults are the production ones."""

    pod_resources_socket: Path
    checkpoint_path: Path
    poll_interval_s: float = RELEASE_POLL_S
    admission_grace_s: float = ADMISSION_GRACE_S


class DynamicMigUnavailable(ValueError):
    """The plan has dynamic placements but the backend cannot create MIG devices."""


def mig_control_for(backend: Backend, node: Node) -> MigControl:
    """The backend's MIG control; DynamicMigUnavailable when it has none."""
    control = backend.mig_control(node)
    if control is not None:
        return control
    raise DynamicMigUnavailable(
        f"flags.migStrategy=dynamic: the {backend.name} backend cannot create MIG devices; use --backend nvml or fake"
    )
