"""Package re-exports imported on first use, for the few packages where that saves measured start-up time."""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str) -> tuple[list[str], Callable[[str], Any]]:
    """`__all__` and a module `__getattr__` for `package`, read from its `if TYPE_CHECKING:` block.

    That block is the one list of what the package exports: `from home import Name as Alias` lines, which
    type checkers read as they are and which the `__getattr__` imports on first use (`home.Name` may be a
    submodule). Plain imports are the rule for a package `__init__` (docs/architecture.md); this is for a
    package whose eager import costs the plugin's start 5 ms or more."""
    module = sys.modules[package]
    where = _type_checking_imports(module.__file__ or "")

    def __getattr__(name: str) -> Any:  # noqa: N807  (the module hook's name)
        found = where.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        home, attribute = found
        # the import statement's machinery, not importlib.import_module: `-X importtime` (which the import
        # tests read) reports only what that machinery loads
        __import__(home)
        value = getattr(sys.modules[home], attribute, None)
        if value is None:
            __import__(f"{home}.{attribute}")
            value = sys.modules[f"{home}.{attribute}"]
        setattr(module, name, value)
        return value

    return sorted(where), __getattr__


def _type_checking_imports(path: str) -> dict[str, tuple[str, str]]:
    """Alias -> (home module, name) for each `from home import name as alias` under `if TYPE_CHECKING:`."""
    with open(path, encoding="utf-8") as source:
        tree = ast.parse(source.read(), path)
    where: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if not isinstance(statement, ast.ImportFrom) or not statement.module:
                    raise ImportError(f"{path}: only `from module import name as name` belongs in TYPE_CHECKING")
                for alias in statement.names:
                    where[alias.asname or alias.name] = (statement.module, alias.name)
    return where
