"""One registry for a family of tasks: each task is a class in a module of one package,
registered with `@registry.register`; `discover()` imports the package so they all register.
Evaluation tasks and relevance tasks use it, so adding a task touches one file."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Generic, Protocol, TypeVar


class Named(Protocol):
    name: str


T = TypeVar("T", bound=Named)


class Registry(Generic[T]):
    """Task classes by lower-cased name, filled by importing the modules of `package`."""

    def __init__(self, package: str):
        self.package = package
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
