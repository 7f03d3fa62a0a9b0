"""A user's placement policy from `module:Name` or an installed entry point, checked and registered."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from gpuslice.entrypoints import LoadError, load_object
from gpuslice.sim.core.placement import PlacementPolicy

# Installed packages declare policies in this group, e.g. in pyproject.toml:
#   [project.entry-points."gpuslice.sim.policies"]
#   worst-fit = "my_package.policies:WorstFit"
SIM_POLICY_GROUP = "gpuslice.sim.policies"
MAX_POLICY_NAME = 64


class PolicyLoadError(LoadError):
    """A policy reference that does not load, or loads something that is not a placement policy."""


def load_policy(reference: str) -> Callable[[], PlacementPolicy]:
    """The policy class (or factory) that `reference` names, after building one instance to check the protocol:
    a non-empty `name` (at most 64 characters, no ':' or ','), a bool `all_or_nothing` and a `place` method."""
    try:
        factory = load_object(reference, SIM_POLICY_GROUP)
    except LoadError as exc:
        raise PolicyLoadError(str(exc)) from exc
    if not callable(factory):
        raise PolicyLoadError(f"{reference!r} is not a policy class (it is of type {type(factory).__name__})")
    try:
        policy = factory()
    except Exception as exc:  # the user's constructor: say what failed instead of crashing
        raise PolicyLoadError(f"{reference!r}: building the policy with no arguments failed: {exc}") from exc
    name = getattr(policy, "name", None)
    if not isinstance(name, str) or not name or len(name) > MAX_POLICY_NAME or any(c in name for c in ":,\n"):
        raise PolicyLoadError(
            f"{reference!r}: `name` must be a text of 1 to {MAX_POLICY_NAME} characters without ':' or ','"
        )
    if not isinstance(getattr(policy, "all_or_nothing", None), bool):
        raise PolicyLoadError(f"{reference!r}: `all_or_nothing` must be True or False")
    place = getattr(policy, "place", None)
    if not callable(place) or len(inspect.signature(place).parameters) != 3:
        raise PolicyLoadError(f"{reference!r}: needs a method place(pods, job, state) (see PlacementPolicy)")
    return factory  # type: ignore[no-any-return]


def register_policy(factory: Callable[[], PlacementPolicy], registry: dict[str, Callable[[], PlacementPolicy]]) -> str:
    """Add `factory` to `registry` under its policy's name, behind the guard that checks its answers
    (policies.checked); refuse a name another policy already has (the same class again is a no-op)."""
    from gpuslice.sim.policies.checked import CheckedSimFactory

    name = factory().name
    known = registry.get(name)
    if known is not None and getattr(known, "wrapped", known) is not factory:
        raise PolicyLoadError(f"policy name {name!r} is taken by {getattr(known, '__qualname__', known)!r}")
    if known is None:
        registry[name] = CheckedSimFactory(factory, name)
    return name
