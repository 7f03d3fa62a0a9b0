"""A user's openb policy from `module:Name` or an installed entry point, checked and registered by its name."""

from __future__ import annotations

from collections.abc import Callable

from gpuslice.entrypoints import LoadError, load_object
from gpuslice.fgd.policies.base import OpenbPolicy, PolicyContext
from gpuslice.fgd.policies.checked import CheckedFactory

# Installed packages declare openb policies in this group, e.g. in pyproject.toml:
#   [project.entry-points."gpuslice.fgd.policies"]
#   my-fgd = "my_package.openb:MyFgd"
OPENB_POLICY_GROUP = "gpuslice.fgd.policies"
MAX_OPENB_POLICY_NAME = 64

Factory = Callable[[PolicyContext], OpenbPolicy]


class OpenbPolicyLoadError(LoadError):
    """A reference that does not load, or loads something that is not an openb policy class."""


def load_openb_policy(reference: str) -> tuple[str, Factory]:
    """(name, class) for a class taking a PolicyContext, with a class attribute `name` (1 to 64 characters,
    no ',' or ':') and the methods place(shape, memory) and bound(placement, shape)."""
    try:
        factory = load_object(reference, OPENB_POLICY_GROUP)
    except LoadError as exc:
        raise OpenbPolicyLoadError(str(exc)) from exc
    if not isinstance(factory, type):
        raise OpenbPolicyLoadError(f"{reference!r} is not a class (it is of type {type(factory).__name__})")
    name = getattr(factory, "name", None)
    if not isinstance(name, str) or not name or len(name) > MAX_OPENB_POLICY_NAME or any(c in name for c in ",:\n"):
        raise OpenbPolicyLoadError(
            f"{reference!r}: class attribute `name` must be 1 to {MAX_OPENB_POLICY_NAME} characters, no ','"
        )
    for method in ("place", "bound"):
        if not callable(getattr(factory, method, None)):
            raise OpenbPolicyLoadError(f"{reference!r}: needs a method {method} (see OpenbPolicy)")
    return name, factory


def register_openb_policy(reference: str, registry: dict[str, Factory]) -> str:
    """Load `reference` and add it to `registry` under its name, behind the guard that checks its answers
    (policies.checked); a name already taken by another class is refused, the same class again is a no-op."""
    name, factory = load_openb_policy(reference)
    known = registry.get(name)
    if known is not None and getattr(known, "wrapped", known) is not factory:
        raise OpenbPolicyLoadError(f"policy name {name!r} is taken by {getattr(known, '__qualname__', known)!r}")
    if known is None:
        registry[name] = CheckedFactory(factory, name)
    return name
