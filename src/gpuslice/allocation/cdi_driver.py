"""The driver part of a CDI spec: read-only mounts of the driver's files and the OCI hooks that wire them up."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from gpuslice.records import record

if TYPE_CHECKING:
    from gpuslice.discovery.driver_files import DriverFiles

# NVIDIA's hook names (nvidia-cdi-hook subcommands), in the order current `nvidia-ctk cdi generate` specs carry them.
CREATE_SYMLINKS = "create-symlinks"
ENABLE_CUDA_COMPAT = "enable-cuda-compat"
UPDATE_LDCACHE = "update-ldcache"
DISABLE_DEVICE_NODE_MODIFICATION = "disable-device-node-modification"
HOOKS = (CREATE_SYMLINKS, ENABLE_CUDA_COMPAT, UPDATE_LDCACHE, DISABLE_DEVICE_NODE_MODIFICATION)
ALL_HOOKS = "all"
# Feature flags we honour; others are reported and ignored (NVIDIA's list grows with each toolkit release).
DISABLE_IPC = "disable-ipc-discoverer"
FEATURE_FLAGS = frozenset({DISABLE_IPC})
# Read-only bind mounts that cannot create device nodes or run set-uid programs of the host.
MOUNT_OPTIONS = ("ro", "nosuid", "nodev", "rbind", "rprivate")
LIBCUDA_DIR_ENV = "NVIDIA_CTK_LIBCUDA_DIR"


@record
class CdiDriverOptions:
    """Where the driver lives (on the host, and in this process's view) and what the spec may add."""

    driver_root: str = "/"  # host path of the driver's files (NVIDIA's --driver-root)
    container_driver_root: str = "/driver-root"  # where that root is mounted here (--container-driver-root)
    hook_path: str = "/usr/bin/nvidia-ctk"  # the hook binary on the host (--nvidia-cdi-hook-path)
    disabled_hooks: frozenset[str] = frozenset()  # hook names, or "all" (--cdi-disable-hooks)
    feature_flags: frozenset[str] = frozenset()  # --cdi-feature-flags

    def unknown_names(self) -> list[str]:
        """Warnings for hook names and feature flags that mean nothing to us (they are ignored)."""
        hooks = sorted(self.disabled_hooks - {*HOOKS, ALL_HOOKS})
        notes = [f"--cdi-disable-hooks: unknown hook {name!r} ignored" for name in hooks]
        flags = sorted(self.feature_flags - FEATURE_FLAGS)
        return notes + [f"--cdi-feature-flags: unknown feature flag {name!r} ignored" for name in flags]

    def hook_enabled(self, name: str) -> bool:
        return ALL_HOOKS not in self.disabled_hooks and name not in self.disabled_hooks

    def host_path(self, path: str) -> str:
        """A path inside the driver root, as the container runtime on the host sees it."""
        root = self.driver_root.rstrip("/")
        return root + path

    def roots(self) -> dict[str, str]:
        """Host path -> where this process sees it: what the spec checker may look under."""
        return {self.driver_root: self.container_driver_root}


def driver_edits(files: DriverFiles, options: CdiDriverOptions) -> dict[str, Any]:
    """Common containerEdits for the driver: one read-only mount per file (host path under the driver root,
    container path as inside the root), and the hooks, each unless disabled."""
    edits: dict[str, Any] = {}
    # The source is the file's real place in the root: a runtime following a link of the root on the
    # host would leave the root (var/run -> /run) and find nothing, or the host's own file.
    mounts = [
        {"hostPath": options.host_path(files.source(path)), "containerPath": path, "options": list(MOUNT_OPTIONS)}
        for path in files.files
    ]
    if mounts:
        edits["mounts"] = mounts
    hooks = list(_hooks(files, options))
    if hooks:
        edits["hooks"] = hooks
    libcuda_dir = files.libcuda_dir
    if libcuda_dir is not None and options.hook_enabled(ENABLE_CUDA_COMPAT):
        edits["env"] = [f"{LIBCUDA_DIR_ENV}={libcuda_dir}"]  # where enable-cuda-compat looks for the driver
    return edits


def _hooks(files: DriverFiles, options: CdiDriverOptions) -> Iterable[dict[str, Any]]:
    links = [f"{target}::{link}" for target, link in files.library_links]
    if links and options.hook_enabled(CREATE_SYMLINKS):
        yield _hook(options.hook_path, CREATE_SYMLINKS, [arg for link in links for arg in ("--link", link)])
    if files.version is not None and options.hook_enabled(ENABLE_CUDA_COMPAT):
        yield _hook(options.hook_path, ENABLE_CUDA_COMPAT, [f"--host-driver-version={files.version}"])
    if files.library_dirs and options.hook_enabled(UPDATE_LDCACHE):
        yield _hook(options.hook_path, UPDATE_LDCACHE, [a for d in files.library_dirs for a in ("--folder", d)])
    if files.libraries and options.hook_enabled(DISABLE_DEVICE_NODE_MODIFICATION):
        yield _hook(options.hook_path, DISABLE_DEVICE_NODE_MODIFICATION, [])


def _hook(path: str, name: str, args: list[str]) -> dict[str, Any]:
    # nvidia-ctk carries the hooks under its `hook` subcommand; nvidia-cdi-hook has them at the top level.
    program = PurePosixPath(path).name
    prefix = [program, "hook"] if program == "nvidia-ctk" else [program]
    args = [*prefix, name, *args]
    return {"hookName": "createContainer", "path": path, "args": args, "env": ["NVIDIA_CTK_DEBUG=false"]}
