"""Names a module exports without importing them: each is imported from its own module the
first time it is read, so that importing the package (the CLI, before it has parsed anything)
loads none of the engine."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_names(module: str, where: Mapping[str, str]) -> Callable[[str], object]:
    """A module-level `__getattr__` for `module` that imports each name of `where` (name →
    the module that defines it) on first use."""

    def __getattr__(name: str) -> object:
        if name in where:
            return getattr(importlib.import_module(where[name]), name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
