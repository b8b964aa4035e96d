"""A typed registry of named plug-ins (placement policies, later backends and optimisers).

``@PLACEMENT.register("fgd", aliases=("fragmentation",))`` adds a factory; duplicates are
rejected at import time; an unknown name is answered with the list of valid ones. Third
parties plug in with ``module:attr`` names, resolved through :func:`importlib.import_module`.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from cotenant.errors import CotenantError, InputError, UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """Names (and aliases) to factories of ``T``."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}
        self._aliases: dict[str, str] = {}

    def register(
        self, name: str, *, aliases: tuple[str, ...] = ()
    ) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator registering a factory under ``name`` and its aliases."""

        def add(factory: Callable[..., T]) -> Callable[..., T]:
            for key in (name, *aliases):
                if key in self._factories or key in self._aliases:
                    raise CotenantError(f"{self.kind} {key!r} is registered twice")
            self._factories[name] = factory
            for alias in aliases:
                self._aliases[alias] = name
            return factory

        return add

    def canonical(self, name: str) -> str:
        """The registered name behind ``name`` (which may be an alias)."""
        key = name.strip().lower()
        if key in self._factories:
            return key
        if key in self._aliases:
            return self._aliases[key]
        raise UnknownNameError(self.kind, name, self._factories)

    def get(self, name: str) -> Callable[..., T]:
        """The callable registered as ``name`` (or alias), uncalled."""
        return self._factories[self.canonical(name)]

    def create(self, name: str, **kwargs: object) -> T:
        """Build the plug-in called ``name`` (a registered name, alias, or ``module:attr``)."""
        if ":" in name:
            module_name, _, attr = name.partition(":")
            try:
                factory = getattr(importlib.import_module(module_name), attr)
            except (ImportError, AttributeError, ValueError) as exc:  # ValueError: ":" alone
                raise UnknownNameError(self.kind, name, self._factories) from exc
            if not callable(factory):
                raise InputError(name, f"is a {type(factory).__name__}, not a {self.kind} "
                                 "factory", hint="name a class or function as module:attr")
            try:
                inspect.signature(factory).bind(**kwargs)
            except TypeError as exc:  # its parameters are not the ones passed
                raise InputError(name, f"cannot build a {self.kind} with "
                                 f"{sorted(kwargs) or 'no arguments'}: {exc}") from exc
            except ValueError:  # no signature to read (some builtins): let the call tell
                pass
            result: T = factory(**kwargs)
            return result
        return self._factories[self.canonical(name)](**kwargs)

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._factories)

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (
            name.lower() in self._factories or name.lower() in self._aliases
        )
