"""The device plugin: gRPC servers per resource, registration, kubelet-restart watch, health loop."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuslice.exports import lazy_exports

if TYPE_CHECKING:
    from gpuslice.plugin.manager import AllocatorFactory as AllocatorFactory
    from gpuslice.plugin.manager import PluginExtension as PluginExtension
    from gpuslice.plugin.manager import PluginManager as PluginManager
    from gpuslice.plugin.naming import SOCKET_PREFIX as SOCKET_PREFIX
    from gpuslice.plugin.naming import socket_name as socket_name
    from gpuslice.plugin.server import PluginStartError as PluginStartError
    from gpuslice.plugin.server import RegistrationError as RegistrationError
    from gpuslice.plugin.server import ResourceServer as ResourceServer
    from gpuslice.plugin.service import NullObserver as NullObserver
    from gpuslice.plugin.service import PluginObserver as PluginObserver
    from gpuslice.plugin.service import ResourceService as ResourceService

__all__, __getattr__ = lazy_exports(
    __name__,
    {
        "gpuslice.plugin.manager": ("AllocatorFactory", "PluginExtension", "PluginManager"),
        "gpuslice.plugin.naming": ("SOCKET_PREFIX", "socket_name"),
        "gpuslice.plugin.server": ("PluginStartError", "RegistrationError", "ResourceServer"),
        "gpuslice.plugin.service": ("NullObserver", "PluginObserver", "ResourceService"),
    },
)
