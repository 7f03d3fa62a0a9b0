"""Wire layer: the generated kubelet gRPC code (device plugin v1beta1, pod-resources v1, plugin registration, DRA)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuslice.exports import lazy_exports

if TYPE_CHECKING:  # the one list of the generated modules; at run time each is imported on first use
    from gpuslice.wire.generated.deviceplugin.v1beta1 import api_pb2 as deviceplugin_pb2
    from gpuslice.wire.generated.deviceplugin.v1beta1 import api_pb2_grpc as deviceplugin_grpc
    from gpuslice.wire.generated.dra.v1 import api_pb2 as dra_v1_pb2
    from gpuslice.wire.generated.dra.v1 import api_pb2_grpc as dra_v1_grpc
    from gpuslice.wire.generated.dra.v1beta1 import api_pb2 as dra_v1beta1_pb2
    from gpuslice.wire.generated.dra.v1beta1 import api_pb2_grpc as dra_v1beta1_grpc
    from gpuslice.wire.generated.drahealth.v1alpha1 import api_pb2 as drahealth_pb2
    from gpuslice.wire.generated.drahealth.v1alpha1 import api_pb2_grpc as drahealth_grpc
    from gpuslice.wire.generated.pluginregistration.v1 import api_pb2 as pluginregistration_pb2
    from gpuslice.wire.generated.pluginregistration.v1 import api_pb2_grpc as pluginregistration_grpc
    from gpuslice.wire.generated.podresources.v1 import api_pb2 as podresources_pb2
    from gpuslice.wire.generated.podresources.v1 import api_pb2_grpc as podresources_grpc

# Each generated module is imported on first use: a process loads only the APIs it speaks (the device
# plugin none of DRA's), and each costs start-up time to build its message classes.
_GENERATED, __getattr__ = lazy_exports(__name__)

API_VERSION = "v1beta1"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
DEFAULT_KUBELET_SOCKET = "/var/lib/kubelet/device-plugins/kubelet.sock"
DEFAULT_POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
SOCKET_PATH_MAX = 107  # a Unix socket path: sun_path holds 108 bytes including the terminating NUL
# The kubelet's own gRPC message limit, and the most any of our servers (device plugin, DRA) accepts in one
# request; a request for every device we may advertise is far smaller (see config.limits).
MAX_REQUEST_BYTES = 4 << 20


def server_options() -> list[tuple[str, int]]:
    """gRPC server options: the request size cap (gRPC refuses a larger message with RESOURCE_EXHAUSTED)."""
    return [("grpc.max_receive_message_length", MAX_REQUEST_BYTES)]


__all__ = [
    *_GENERATED,
    "API_VERSION",
    "DEFAULT_KUBELET_SOCKET",
    "DEFAULT_POD_RESOURCES_SOCKET",
    "HEALTHY",
    "MAX_REQUEST_BYTES",
    "SOCKET_PATH_MAX",
    "UNHEALTHY",
    "server_options",
]
