"""Every CDI spec the plugin's answers name (GPUs with the driver, IMEX channels, gdrcopy/GDS/MOFED), kept on disk."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuslice.allocation.cdi import (
    ALL_DEVICES,
    CDI_VENDOR,
    CONTROL_NODES,
    FEATURE_ENVS,
    GPU_SPEC_FILE,
    IMEX_SPEC_FILE,
    CdiError,
    IdStrategy,
    build_spec,
    check_spec,
    device_node,
    gpu_spec,
    imex_spec,
    write_spec,
)
from gpuslice.allocation.cdi_driver import DISABLE_IPC, MOUNT_OPTIONS, CdiDriverOptions, driver_edits
from gpuslice.allocation.cdi_validate import edits_host_problems
from gpuslice.config import Config
from gpuslice.gpu import Node
from gpuslice.records import record

if TYPE_CHECKING:
    from gpuslice.discovery.driver_files import DriverFiles

FEATURES = ("gdrcopy", "gds", "mofed")


def feature_kind(feature: str) -> str:
    return f"{CDI_VENDOR}/{feature}"


def feature_spec_file(feature: str) -> str:
    return f"{CDI_VENDOR}-{feature}.json"


@record
class CdiSettings:
    """What the CDI specs depend on, resolved from the config (flags > env > file) and the IMEX check."""

    id_strategy: IdStrategy = "uuid"
    dev_root: str = "/"  # host dev root (NVIDIA's nvidiaDevRoot)
    imex_channels: tuple[int, ...] = ()
    features: frozenset[str] = frozenset()  # of FEATURES
    mps: bool = False
    driver: CdiDriverOptions = field(default_factory=CdiDriverOptions)
    control_nodes: tuple[str, ...] = CONTROL_NODES  # those that exist in the plugin's container

    @classmethod
    def from_config(
        cls, config: Config, imex_channels: Iterable[int] = (), control_nodes: Iterable[str] = CONTROL_NODES
    ) -> CdiSettings:
        flags = config.flags
        enabled = {"gdrcopy": flags.gdrcopy_enabled, "gds": flags.gds_enabled, "mofed": flags.mofed_enabled}
        driver = CdiDriverOptions(
            driver_root=flags.nvidia_driver_root,
            container_driver_root=flags.plugin.container_driver_root,
            hook_path=flags.plugin.nvidia_ctk_path,
            disabled_hooks=frozenset(config.gpuslice.cdi_disabled_hooks),
            feature_flags=frozenset(config.gpuslice.cdi_feature_flags),
        )
        return cls(
            id_strategy=flags.plugin.device_id_strategy,
            dev_root=flags.dev_root,
            imex_channels=tuple(imex_channels),
            features=frozenset(name for name, on in enabled.items() if on),
            mps=config.sharing.strategy == "mps",
            driver=driver,
            control_nodes=tuple(control_nodes),
        )

    @property
    def container_dev_root(self) -> str:
        """Where this process sees the dev root: under the mounted driver root when the two roots are one."""
        if self.dev_root.rstrip("/") == self.driver.driver_root.rstrip("/"):
            return self.driver.container_driver_root
        return self.dev_root


@record
class SpecSet:
    """The specs to write (file name -> spec) and what discovery warned about."""

    specs: Mapping[str, Mapping[str, Any]]
    driver: DriverFiles | None = None
    warnings: tuple[str, ...] = ()


def build_specs(node: Node, settings: CdiSettings, driver: DriverFiles | None = None) -> SpecSet:
    """Every spec for `node`; the driver's files are discovered under the container driver root unless given.

    A missing or partial driver root gives one warning listing what was not found, and a spec with what
    was found: the device nodes always, the libraries only when the driver version is known.
    """
    warnings = settings.driver.unknown_names()
    specs: dict[str, Mapping[str, Any]] = {}
    if node.gpus:
        if driver is None:
            # imported here: the driver-file search loads only where CDI specs are written, after Register
            from gpuslice.discovery.driver_files import discover_driver_files

            driver = discover_driver_files(
                settings.driver.container_driver_root,
                node.driver_version or None,
                ipc=DISABLE_IPC not in settings.driver.feature_flags,
                mps_pipe=settings.mps,
            )
        warnings += [f"driver root {settings.driver.container_driver_root}: {note}" for note in driver.notes]
        missing = driver.warning()
        if missing is not None:
            warnings.append(f"{missing}; CDI containers may not start CUDA without them")
        common = driver_edits(driver, settings.driver)
        # What a runtime would not find on the host (a source through a link out of the root, no hook program)
        warnings += edits_host_problems(common, settings.driver.roots(), "CDI driver edits", device_nodes=False)
        specs[GPU_SPEC_FILE] = gpu_spec(node, settings.id_strategy, settings.dev_root, common, settings.control_nodes)
    if settings.imex_channels:
        specs[IMEX_SPEC_FILE] = imex_spec(settings.imex_channels, settings.dev_root)
    for feature in FEATURES:
        if feature in settings.features:
            spec, warning = _feature_spec(feature, settings)
            specs[feature_spec_file(feature)] = spec
            if warning is not None:
                warnings.append(warning)
    return SpecSet(specs, driver, tuple(warnings))


def _feature_spec(feature: str, settings: CdiSettings) -> tuple[dict[str, Any], str | None]:
    """Device `all` of a GPUDirect feature: its env (as in NVIDIA's answer), device nodes and files found."""
    from gpuslice.discovery.driver_files import discover_feature_files  # as in build_specs

    found = discover_feature_files(feature, settings.container_dev_root, settings.driver.container_driver_root)
    edits: dict[str, Any] = {"env": [f"{FEATURE_ENVS[feature]}=enabled"]}
    if found.device_nodes:
        edits["deviceNodes"] = [device_node(p, settings.dev_root) for p in found.device_nodes]
    if found.files:
        edits["mounts"] = [
            {"hostPath": settings.driver.host_path(found.source(p)), "containerPath": p, "options": list(MOUNT_OPTIONS)}
            for p in found.files
        ]
    warning = None
    if not found.device_nodes:
        warning = f"{feature}Enabled: no {feature} device node under {settings.container_dev_root}/dev"
    spec = build_spec(feature_kind(feature), [{"name": ALL_DEVICES, "containerEdits": edits}])
    return spec, warning


class CdiSpecUpkeep:
    """Keeps the plugin's spec files in one directory: writes a SpecSet, removes what it wrote on shutdown.

    Every spec is checked before any file is written, so a bad set leaves the previous files as they
    were; each file is replaced atomically. A file of ours that the new set no longer has (a feature
    turned off on reload) is removed. Files this process did not write are never removed.
    """

    def __init__(self, directory: str | Path) -> None:  # mutable state: a plain class (no compiled methods)
        self.directory = directory
        self.written: set[Path] = set()

    def write(self, spec_set: SpecSet) -> tuple[Path, ...]:
        for spec in spec_set.specs.values():
            check_spec(spec)
        paths = tuple(write_spec(self.directory, name, spec) for name, spec in spec_set.specs.items())
        for stale in self.written - set(paths):
            _remove(stale)
        self.written = set(paths)
        return paths

    def remove(self) -> None:
        """Remove the spec files this process wrote (idempotent)."""
        for path in sorted(self.written):
            _remove(path)
        self.written = set()


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise CdiError(f"cannot remove CDI spec {path}: {exc.strerror or exc}") from exc
