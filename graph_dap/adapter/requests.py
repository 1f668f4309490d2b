"""Requests as handlers see them: validated argument access and the errors they raise.

Like debugpy's ``request("key", type)``: a missing or mistyped argument raises
:class:`InvalidRequest` instead of ``KeyError`` or ``TypeError``, and the one place that
dispatches requests turns it into a ``success: false`` response.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar, overload

T = TypeVar("T")


class RequestError(Exception):
    """A request that is answered with ``success: false`` and this message."""

    show_user = False


class InvalidRequest(RequestError):
    """The request breaks the protocol: missing or mistyped arguments, unknown ids."""


class CantHandle(RequestError):
    """A valid request that cannot be carried out now (not stopped, no session...)."""


class UserError(RequestError):
    """A request that failed for a reason the user must see (a bad launch argument)."""

    show_user = True


_MISSING: Any = object()

#: The integers an argument may hold: JavaScript's exact ones (and what the worker's msgpack carries).
MAX_INTEGER = 2**53 - 1

_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "a boolean", dict: "an object", list: "an array"}


@dataclass(frozen=True, slots=True)
class Request:
    """One incoming request: ``seq``, ``command`` and its ``arguments`` object."""

    seq: int
    command: str
    arguments: dict[str, Any]

    @overload
    def arg(self, key: str, kind: type[T]) -> T: ...
    @overload
    def arg(self, key: str, kind: type[T], default: None) -> T | None: ...
    @overload
    def arg(self, key: str, kind: type[T], default: T) -> T: ...

    def arg(self, key: str, kind: type[T], default: Any = _MISSING) -> Any:
        """``arguments[key]`` checked to be of ``kind``; ``default`` when absent (or null)."""
        return checked(self.arguments, key, kind, default, where="arguments")


def checked(obj: dict[str, Any], key: str, kind: type[T], default: Any = _MISSING, where: str = "") -> Any:
    """``obj[key]`` if it is a ``kind`` (bool is no int; an int is a float), else InvalidRequest."""
    value = obj.get(key)
    label = f"{where}.{key}" if where else key
    if value is None:
        if default is _MISSING:
            raise InvalidRequest(f"'{label}' is required")
        return default
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        _in_range(value, label)
        return float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidRequest(f"'{label}' must be {_TYPE_NAMES.get(kind, kind.__name__)}, got {type(value).__name__}")
    if isinstance(value, int) and not isinstance(value, bool):
        _in_range(value, label)
    return value


def _in_range(value: int, label: str) -> None:
    if not -MAX_INTEGER <= value <= MAX_INTEGER:
        raise InvalidRequest(f"'{label}' is out of range: integers must be within ±(2**53 - 1)")


def items_of(values: list[Any], kind: type[T], where: str) -> list[T]:
    """Each item of a list argument checked to be of ``kind``."""
    for i, v in enumerate(values):
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            raise InvalidRequest(f"'{where}[{i}]' must be {_TYPE_NAMES.get(kind, kind.__name__)}")
        if isinstance(v, int) and not isinstance(v, bool):
            _in_range(v, f"{where}[{i}]")
    return values
