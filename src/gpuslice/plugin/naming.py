"""Plugin socket names: `gpuslice-<resource name with '/' replaced by '-'>.sock`."""

from __future__ import annotations

SOCKET_PREFIX = "gpuslice-"


def socket_name(resource_name: str) -> str:
    """The socket file name (the Register endpoint) of a resource, e.g. gpuslice-nvidia.com-gpu.sock.

    A prefix of our own keeps our sockets apart from NVIDIA's (`nvidia-gpu.sock`) in the same
    directory, so cleanup only ever touches files this plugin created.
    """
    return f"{SOCKET_PREFIX}{resource_name.replace('/', '-')}.sock"
