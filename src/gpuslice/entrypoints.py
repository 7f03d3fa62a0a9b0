"""Load a user's class from `module:Name` or from an installed package's entry point, with errors that say why."""

from __future__ import annotations

import importlib
from typing import Any

MAX_REFERENCE = 200  # characters in a `module:Name` reference


class LoadError(ValueError):
    """A reference that names nothing loadable; the message quotes it and gives the reason."""


def installed(group: str) -> list[str]:
    """Names of the entry points installed packages declare in `group`, sorted."""
    from importlib.metadata import entry_points  # package metadata costs ~15 ms: only when a name is looked up

    return sorted({point.name for point in entry_points(group=group)})


def load_object(reference: str, group: str) -> Any:
    """`package.module:Attr` (Attr may be dotted) imported; a bare name is looked up in the entry-point `group`."""
    text = reference.strip()
    if not text or len(text) > MAX_REFERENCE:
        raise LoadError(f"{reference[:60]!r}: give module:Name (1 to {MAX_REFERENCE} characters)")
    module_name, sep, attribute = text.partition(":")
    if not sep:
        from importlib.metadata import entry_points

        points = [point for point in entry_points(group=group) if point.name == text]
        if not points:
            known = ", ".join(installed(group)) or "none installed"
            raise LoadError(f"{text!r} is neither module:Name nor an installed {group} entry point ({known})")
        try:
            return points[0].load()
        except Exception as exc:  # a broken package: report it, do not crash the command
            raise LoadError(f"entry point {text!r} ({points[0].value}) failed to load: {exc}") from exc
    if not module_name or not attribute:
        raise LoadError(f"{text!r}: give module:Name, e.g. my_policies:WorstFit")
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise LoadError(f"{text!r}: cannot import module {module_name!r}: {exc}") from exc
    except Exception as exc:  # the user's module fails while it runs: one line, not its traceback
        raise LoadError(f"{text!r}: importing module {module_name!r} raised {type(exc).__name__}: {exc}") from None
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except Exception:  # AttributeError, or a module __getattr__ that raises anything
            raise LoadError(f"{text!r}: module {module_name!r} has no {attribute!r}") from None
    return value
