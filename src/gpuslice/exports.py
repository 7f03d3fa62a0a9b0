"""Package re-exports imported on first use, so a process loads only the modules it touches."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, homes: dict[str, tuple[str, ...]]) -> tuple[list[str], Callable[[str], Any]]:
    """`__all__` and a module `__getattr__` for `package`, which re-exports, per home module, these names.

    The package's `if TYPE_CHECKING:` block imports the same names (`from home import Name as Name`) for
    type checkers; `tests/house/test_lazy_exports.py` holds the two to the same names."""
    where = {name: home for home, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:  # noqa: N807  (the module hook's name)
        home = where.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # the import statement's machinery, not importlib.import_module: `-X importtime` (which the import
        # tests read) reports only what that machinery loads
        __import__(home)
        value = getattr(sys.modules[home], name)
        setattr(sys.modules[package], name, value)
        return value

    return sorted(where), __getattr__
