"""The one strategy dispatcher: a node and a config to the advertised resources, static or dynamic MIG."""

from __future__ import annotations

from collections.abc import Collection

from gpuslice.config import Config
from gpuslice.gpu import Node
from gpuslice.sharing.build import build_static_plan
from gpuslice.sharing.dynamic.plan import DYNAMIC, build_dynamic_plan
from gpuslice.sharing.model import SharingPlan


def is_dynamic(config: Config) -> bool:
    """True under `flags.migStrategy: dynamic` (a gpuslice extension: MIG instances carved on Allocate)."""
    return config.flags.mig_strategy == DYNAMIC


def build_resources(node: Node, config: Config, claimed: Collection[str] = ()) -> SharingPlan:
    """Every resource the node advertises under `config`, in a stable order; SharingError if impossible.

    Static MIG strategies (none, single, mixed) go through sharing.build; `dynamic` through the dynamic
    plan, where `claimed` names GPUs (UUIDs) whose instances are ours (the checkpoint's) and that stay
    dynamic though they now carry instances. Every caller builds its resources here.
    """
    if is_dynamic(config):
        return build_dynamic_plan(node, config, claimed)
    return build_static_plan(node, config)
