"""``functools.cached_property`` without the lock Python 3.11 takes on every first use.

Python 3.12 dropped that lock; on 3.11 it costs about a third of a microsecond per cached
value, and the live path (a teammate's two policies) computes several per participant.
Like ``cached_property`` this is a non-data descriptor: once computed, the value sits in
the instance's ``__dict__`` and is read from there. Two threads computing the same value
at once both compute it, which is harmless for the pure values cached here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

Value = TypeVar("Value")


class cached_value(Generic[Value]):
    """Decorate a method of one argument: its value is computed on first access, then kept."""

    def __init__(self, compute: Callable[[Any], Value]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> cached_value[Value]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Value: ...

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.compute(instance)
        return value
