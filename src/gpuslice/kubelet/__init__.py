"""A mock kubelet speaking the real device-plugin and pod-resources gRPC."""

from gpuslice.kubelet.errors import AdmissionError, RegistrationRefused
from gpuslice.kubelet.mock import KUBELET_SOCKET_NAME, MockKubelet, default_pod_resources_socket
from gpuslice.kubelet.names import is_extended_resource_name
from gpuslice.kubelet.views import Admission, GrantedDevices, PluginOptions, ResourceView

__all__ = [
    "KUBELET_SOCKET_NAME",
    "Admission",
    "AdmissionError",
    "GrantedDevices",
    "MockKubelet",
    "PluginOptions",
    "RegistrationRefused",
    "ResourceView",
    "default_pod_resources_socket",
    "is_extended_resource_name",
]
