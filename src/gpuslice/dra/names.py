"""DRA names: driver names, socket paths, registration strings, device names, CDI kinds (one place for each)."""

from __future__ import annotations

import re
from pathlib import Path

from gpuslice.gpu import Gpu, MigProfile

DEFAULT_DRIVER = "gpu.gpuslice.io"
NVIDIA_DRIVER = "gpu.nvidia.com"  # accepted so that gpuslice can replace NVIDIA's DRA driver without new classes
PLUGIN_TYPE = "DRAPlugin"
# List order matters: a 1.34+ kubelet takes the first entry it supports, a 1.32 kubelet looks for v1beta1.
# The optional health service is named last, as the Kubernetes helper library does.
DRA_SUPPORTED_VERSIONS = ("v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth")
DEFAULT_KUBELET_ROOT = "/var/lib/kubelet"
REGISTRY_DIR_NAME = "plugins_registry"
PLUGINS_DIR_NAME = "plugins"
DRA_SOCKET_NAME = "dra.sock"
CHECKPOINT_NAME = "checkpoint.json"
CLAIM_CDI_CLASS = "claim"
DRIVER_NAME_MAX = 63  # ResourceSlice.spec.driver: a DNS subdomain of at most 63 characters

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+")
_NOT_LABEL = re.compile(r"[^a-z0-9]")


class DriverNameError(ValueError):
    """A driver name the kubelet or the API server would refuse."""


def check_driver_name(name: str) -> str:
    """The name back when it is a lower-case DNS subdomain with a dot and at most 63 characters."""
    if len(name) > DRIVER_NAME_MAX:
        raise DriverNameError(f"driver name {name!r} is longer than {DRIVER_NAME_MAX} characters")
    if not _DNS_SUBDOMAIN.fullmatch(name):
        raise DriverNameError(
            f"driver name {name!r} must be a lower-case DNS subdomain with a domain you own, e.g. {DEFAULT_DRIVER}"
        )
    return name


def registration_socket(registry_dir: str | Path, driver: str) -> Path:
    """`<plugins_registry>/<driver>-reg.sock`: where the kubelet's plugin watcher finds us."""
    return Path(registry_dir) / f"{driver}-reg.sock"


def plugin_dir(plugins_dir: str | Path, driver: str) -> Path:
    """`<plugins>/<driver>`: the DRA socket and our checkpoint live here."""
    return Path(plugins_dir) / driver


def cdi_kind(driver: str) -> str:
    """`k8s.<driver>/claim`: NVIDIA's kind for gpu.nvidia.com (k8s.gpu.nvidia.com/claim), ours likewise."""
    return f"k8s.{driver}/{CLAIM_CDI_CLASS}"


def gpu_device_name(gpu: Gpu) -> str:
    """`gpu-<minor>`, NVIDIA's name for a whole GPU."""
    return f"gpu-{gpu.device_minor}"


def mig_device_name(gpu: Gpu, profile: MigProfile, start: int) -> str:
    """`gpu-<minor>-mig-<profile without dots>-<GI profile id>-<start>`, e.g. gpu-0-mig-1g10gb-19-0."""
    short = _NOT_LABEL.sub("", profile.name.lower())
    return f"gpu-{gpu.device_minor}-mig-{short}-{profile.profile_id}-{start}"


def replica_device_name(base: str, replica: int) -> str:
    """A time-sliced replica of a device: `<device>-ts-<n>`."""
    return f"{base}-ts-{replica}"


def counter_set_name(gpu: Gpu) -> str:
    """The shared counters of one GPU's MIG geometry: `gpu-<minor>-counter-set`."""
    return f"gpu-{gpu.device_minor}-counter-set"
