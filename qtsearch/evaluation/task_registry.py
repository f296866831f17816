"""One registry for a family of tasks: each task is a class in a module of one package,
registered with `@registry.register`; `discover()` imports the package so they all register,
`names()` lists them in table order and `resolve()` turns --tasks into classes. Evaluation tasks
and relevance tasks use it, so adding a task touches one file."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

from qtsearch.core.errors import UsageError


class Named(Protocol):
    name: str
    group: str


T = TypeVar("T", bound=Named)


class Registry(Generic[T]):
    """Task classes by lower-cased name, filled by importing the modules of `package`; tables
    show them by group, in `group_order`; `what` is a task in messages ("relevance task")."""

    def __init__(self, package: str, group_order: Sequence[str], what: str = "task"):
        self.package = package
        self.group_order = tuple(group_order)
        self.what = what
        self.tasks: dict[str, type[T]] = {}

    def register(self, cls: type[T]) -> type[T]:
        """Class decorator: make a task available by its name (case-insensitive)."""
        self.tasks[cls.name.lower()] = cls
        return cls

    def discover(self) -> dict[str, type[T]]:
        """Import every module of the package so their tasks register themselves."""
        pkg = importlib.import_module(self.package)
        for info in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{self.package}.{info.name}")
        return self.tasks

    def names(self) -> list[str]:
        """All task names in table order (group order, then registration order)."""
        def rank(cls: type[T]) -> int:
            order = self.group_order
            return order.index(cls.group) if cls.group in order else len(order)

        return [cls.name for cls in sorted(self.discover().values(), key=rank)]  # stable sort

    def resolve(self, specs: Sequence[str]) -> list[type[T]]:
        """Task classes for names, group names and "all" (comma-separated allowed), in table
        order, each once; an unknown name is a UsageError listing the valid ones."""
        tasks = self.discover()
        groups = {cls.group for cls in tasks.values()}
        chosen: set[str] = set()
        for raw in (part.strip() for spec in specs for part in spec.split(",")):
            key = raw.lower()
            if key == "all":
                chosen.update(tasks)
            elif key in groups:
                chosen.update(k for k, c in tasks.items() if c.group == key)
            elif key in tasks:
                chosen.add(key)
            elif key:
                raise UsageError(f"unknown {self.what} {raw!r}; choose from all, "
                                 f"{', '.join(sorted(groups))}, {', '.join(self.names())}")
        if not chosen:
            raise UsageError(f"no {self.what} chosen (--tasks)")
        return [tasks[n.lower()] for n in self.names() if n.lower() in chosen]
