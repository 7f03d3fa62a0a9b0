"""NVIDIA-compatible extras around a prepared plugin: Allocate pipeline, IMEX channels, CDI spec file, MPS daemons."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from gpuslice.allocation import AllocateOptions, ImexChannelMissing, nvidia_answer, select_imex_channels
from gpuslice.allocation.cdi import DEFAULT_CDI_DIR, CdiError, present_control_nodes
from gpuslice.allocation.cdi_specs import CdiSettings, CdiSpecUpkeep, SpecSet, build_specs
from gpuslice.config import Config
from gpuslice.gpu import Node
from gpuslice.mps import DEFAULT_CONTROL_COMMAND, CommandControl, MpsControl, MpsManager
from gpuslice.records import record
from gpuslice.sharing import SharingPlan

log = logging.getLogger("gpuslice.plugin")

PathCheck = Callable[[str], bool]


class CompatError(ValueError):
    """An IMEX channel, CDI spec or MPS setting that stops the plugin before it registers."""


def is_char_device(path: str) -> bool:
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


def assume_present(path: str) -> bool:
    """The fake backend's view of /dev: every node NVIDIA's plugin looks for is there."""
    return True


@record
class CompatOptions:
    """Where the extras live on this node; the CLI fills it from flags and env."""

    cdi_dir: str = DEFAULT_CDI_DIR
    mps_control_command: tuple[str, ...] = DEFAULT_CONTROL_COMMAND
    # NVIDIA checks the plugin container's own /dev (control nodes) and the dev root (IMEX channels).
    node_exists: PathCheck = os.path.exists
    char_device: PathCheck = is_char_device

    @classmethod
    def for_fake_backend(
        cls, cdi_dir: str = DEFAULT_CDI_DIR, mps_command: Sequence[str] = DEFAULT_CONTROL_COMMAND
    ) -> CompatOptions:
        return cls(cdi_dir, tuple(mps_command), assume_present, assume_present)

    @staticmethod
    def split_command(text: str | None) -> tuple[str, ...]:
        if not text:
            return DEFAULT_CONTROL_COMMAND
        import shlex  # only when --mps-control-command is given

        return tuple(shlex.split(text))


def allocate_options(
    config: Config, options: CompatOptions, nvidia_answers: bool = True
) -> tuple[AllocateOptions, tuple[str, ...]]:
    """The Allocate options of `config` on this node, and warnings (IMEX channels that are missing).

    `nvidia_answers`: NVIDIA's whole answer (device list strategies, CDI, MPS, IMEX, feature envs), as
    `gpuslice plugin` gives; False: gpuslice's plain one (NVIDIA_VISIBLE_DEVICES and device nodes).
    CompatError when a required IMEX channel is missing.
    """
    imex = config.imex
    try:
        channels, warnings = select_imex_channels(
            imex.channel_ids, imex.required, config.flags.dev_root, options.char_device
        )
    except ImexChannelMissing as exc:
        raise CompatError(f"imex.channelIDs: {exc}") from exc
    control = present_control_nodes(options.node_exists)
    allocate = AllocateOptions.from_config(
        config, imex_channels=channels, control_nodes=control, pipeline=(nvidia_answer,) if nvidia_answers else None
    )
    return allocate, warnings


def write_cdi_specs(upkeep: CdiSpecUpkeep, config: Config, settings: AllocateOptions, node: Node) -> tuple[Path, ...]:
    """With a cdi-* strategy, regenerate every CDI spec the answers name (NVIDIA does so at every start);
    without one, remove the specs this process wrote before."""
    try:
        if not settings.cdi_enabled:
            upkeep.write(SpecSet({}))
            return ()
        cdi = CdiSettings.from_config(config, settings.imex_channels, settings.control_nodes)
        spec_set = build_specs(node, cdi)
        for warning in spec_set.warnings:
            log.warning("CDI: %s", warning)
        written = upkeep.write(spec_set)
    except CdiError as exc:
        raise CompatError(f"--cdi-spec-dir {upkeep.directory}: {exc}") from exc
    for path in written:
        log.info("wrote CDI spec %s", path)
    return written


def mps_manager(
    config: Config, plan: SharingPlan, options: CompatOptions, control: MpsControl | None = None
) -> MpsManager | None:
    """An MPS manager for the plan's MPS resources (not started), or None when nothing is shared with MPS."""
    if not any(resource.sharing == "mps" for resource in plan.resources):
        return None
    root = config.flags.mps_root
    if not root:  # validate_startup refuses this first; kept for callers that skip it
        raise CompatError("using MPS requires --mps-root to be specified")
    return MpsManager(root, control or CommandControl(options.mps_control_command))
