"""The device plugin: gRPC servers per resource, registration, kubelet-restart watch, health loop."""

from gpuslice.plugin.manager import (
    AllocatorFactory,
    PluginExtension,
    PluginManager,
)
from gpuslice.plugin.naming import (
    SOCKET_PREFIX,
    socket_name,
)
from gpuslice.plugin.server import (
    PluginStartError,
    RegistrationError,
    ResourceServer,
)
from gpuslice.plugin.service import (
    NullObserver,
    PluginObserver,
    ResourceService,
)

__all__ = [
    "SOCKET_PREFIX",
    "AllocatorFactory",
    "NullObserver",
    "PluginExtension",
    "PluginManager",
    "PluginObserver",
    "PluginStartError",
    "RegistrationError",
    "ResourceServer",
    "ResourceService",
    "socket_name",
]
