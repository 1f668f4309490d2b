"""Frozen dataclasses to plain data and back, for msgpack: the codec of :mod:`graph_dap.worker.protocol`.

:func:`encode` turns a dataclass into a map of its fields (nested dataclasses too,
enums as their values; tuples stay tuples, which msgpack writes as arrays).
:func:`decode` makes a value of a type form again (a dataclass, ``tuple[X, ...]``,
``dict[str, X]``, ``X | None``, an enum, ``str``, ``int``, ``float``, ``bool``,
``bytes``, ``Any``), checking every field on the way: a wrong value raises
:class:`~graph_dap.errors.ProtocolError` naming the field (``StopInfo.node.index:
expected an integer, got str '3'``). The code for each type is made once, on first use.

No numpy: the adapter imports it.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import types
import typing
from collections.abc import Callable
from typing import Any

from graph_dap.errors import ProtocolError

__all__ = ["decode", "encode"]

Encoder = Callable[[Any], Any]
Decoder = Callable[[Any], Any]
_ENCODERS: dict[type, Encoder] = {}
_DECODERS: dict[Any, Decoder] = {}


def encode(value: Any, kind: Any = None) -> Any:
    """Plain data for msgpack: a dataclass as a map of its fields, an enum as its value.

    ``kind``: the type form ``value`` is declared as (faster: only what needs it is
    looked into; ``Any`` is plain data as it is). Without it, lists and maps are looked into.
    """
    if kind is not None:
        return _typed_encoder(kind)(value)
    cls = type(value)
    encoder = _ENCODERS.get(cls)
    if encoder is not None:
        return encoder(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _dataclass_encoder(cls)(value)
    if isinstance(value, tuple | list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.value
    return value


def decode(kind: Any, data: Any, where: str = "") -> Any:
    """``data`` as a ``kind`` (a type form), every field checked; raises ProtocolError saying what is wrong where."""
    try:
        return _decoder(kind)(data)
    except _Mismatch as wrong:
        place = (where or type_name(kind)) + "".join(reversed(wrong.path))
        raise ProtocolError(f"{place}: {wrong.problem}") from None


# -- encoding --------------------------------------------------------------------------------


def _identity(value: Any) -> Any:
    return value


def _dataclass_encoder(cls: type) -> Encoder:
    found = _ENCODERS.get(cls)
    if found is not None:
        return found
    _ENCODERS[cls] = lambda value: {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}  # while made
    hints = typing.get_type_hints(cls)
    parts = [(f.name, _field_encoder(hints[f.name])) for f in dataclasses.fields(cls)]
    plain = tuple(name for name, enc in parts if enc is _identity)
    special = [(name, enc) for name, enc in parts if enc is not _identity]
    get_plain = operator.attrgetter(*plain) if len(plain) > 1 else None

    def encoder(value: Any) -> dict[str, Any]:
        if get_plain is not None:
            out = dict(zip(plain, get_plain(value)))
        else:
            out = {name: getattr(value, name) for name in plain}
        for name, enc in special:
            out[name] = enc(getattr(value, name))
        return out

    _ENCODERS[cls] = encoder
    return encoder


_TYPED: dict[Any, Encoder] = {}


def _typed_encoder(kind: Any) -> Encoder:
    found = _TYPED.get(kind)
    if found is None:
        found = _TYPED[kind] = _field_encoder(kind)
    return found


def _field_encoder(kind: Any) -> Encoder:
    """How to encode a value declared as ``kind``: nothing to do for plain data (``Any`` is plain data)."""
    if kind in (str, int, float, bool, bytes, type(None)) or kind is Any:
        return _identity
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return lambda value: value.value if isinstance(value, kind) else kind(value).value  # a str enum's word as its member
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return lambda value: _dataclass_encoder(kind)(value)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is tuple:
        items = [_field_encoder(a) for a in args if a is not Ellipsis]
        if all(e is _identity for e in items):
            return _identity
        if len(args) == 2 and args[1] is Ellipsis:
            item = items[0]
            return lambda value: [item(v) for v in value]
        return lambda value: [e(v) for e, v in zip(items, value)]
    if origin is dict and _field_encoder(args[1]) is _identity:
        return _identity
    if origin is typing.Union or origin is types.UnionType:
        options = [_field_encoder(a) for a in args]
        if all(e is _identity for e in options):
            return _identity
    return encode  # unions of dataclasses, maps of them: look at the value


# -- decoding --------------------------------------------------------------------------------


class _Mismatch(Exception):
    """A value that is not what its type says; ``path`` grows as it goes up (``.node``, ``[3]``)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[str] = []


def _expected(expected: str, data: Any) -> _Mismatch:
    return _Mismatch(f"expected {expected}, got {_value_name(data)}")


def _value_name(data: Any) -> str:
    if data is None:
        return "null"
    text = repr(data)
    return f"{type(data).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _decoder(kind: Any) -> Decoder:
    found = _DECODERS.get(kind)
    if found is None:
        found = _DECODERS[kind] = _make_decoder(kind)
    return found


_EXACT = {str: "a string", bool: "a boolean", bytes: "bytes"}


def _as_is(kind: Any) -> frozenset[type] | None:
    """The Python types a value of ``kind`` may have to be taken as it is (None: it must be looked into)."""
    if kind in (str, bool, bytes, int, float, type(None)):
        return frozenset((kind,))
    origin = typing.get_origin(kind)
    if origin is typing.Union or origin is types.UnionType:
        sets = [_as_is(a) for a in typing.get_args(kind)]
        if all(t is not None for t in sets):
            return frozenset().union(*sets)  # type: ignore[arg-type]
    return None


def _make_decoder(kind: Any) -> Decoder:
    if kind is Any:
        return _identity
    if kind is type(None):

        def none(data: Any) -> None:
            if data is not None:
                raise _expected("null", data)

        return none
    if kind in _EXACT:
        what = _EXACT[kind]

        def exact(data: Any) -> Any:
            if type(data) is not kind:
                raise _expected(what, data)
            return data

        return exact
    if kind is int:

        def integer(data: Any) -> int:
            if type(data) is not int:
                raise _expected("an integer", data)
            return data

        return integer
    if kind is float:

        def number(data: Any) -> float:
            if type(data) is float:
                return data
            if type(data) is not int:
                raise _expected("a number", data)
            return float(data)

        return number
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return _enum_decoder(kind)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _dataclass_decoder(kind)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Union or origin is types.UnionType:
        return _union_decoder(args)
    if origin is tuple:
        return _tuple_decoder(args)
    if origin is dict:
        return _dict_decoder(args)
    raise TypeError(f"the worker protocol cannot carry {kind!r}")


def _enum_decoder(kind: type[enum.Enum]) -> Decoder:
    choices = ", ".join(repr(m.value) for m in kind)

    def member(data: Any) -> enum.Enum:
        try:
            return kind(data)
        except ValueError:
            raise _expected(f"one of {choices}", data) from None

    return member


def _union_decoder(args: tuple[Any, ...]) -> Decoder:
    optional = type(None) in args
    options = [_decoder(a) for a in args if a is not type(None)]
    if len(options) == 1:  # X | None: X's own message says what is wrong
        only = options[0]
        return lambda data: None if data is None else only(data)
    expected = " or ".join(type_name(a) for a in args)  # "str or dict[str, Any] or null"
    as_is = _as_is(typing.Union[args])  # noqa: UP007 - a union made of a tuple of types

    def union(data: Any) -> Any:
        if as_is is not None and type(data) in as_is:
            return data
        if data is None and optional:
            return None
        for option in options:
            try:
                return option(data)
            except _Mismatch:
                continue
        raise _expected(expected, data)

    return union


def _tuple_decoder(args: tuple[Any, ...]) -> Decoder:
    if len(args) == 2 and args[1] is Ellipsis:
        item = _decoder(args[0])
        same = _as_is(args[0])

        def items(data: Any) -> tuple[Any, ...]:
            if type(data) not in (list, tuple):
                raise _expected("an array", data)
            if item is _identity or (same is not None and all(type(v) in same for v in data)):
                return tuple(data)
            out = []
            for i, v in enumerate(data):
                try:
                    out.append(item(v))
                except _Mismatch as wrong:
                    wrong.path.append(f"[{i}]")
                    raise
            return tuple(out)

        return items
    parts = [_decoder(a) for a in args]
    sames = [_as_is(a) for a in args]
    simple = all(t is not None for t in sames)
    first, second = (sames + [None, None])[:2] if len(args) == 2 and simple else (None, None)

    def fixed(data: Any) -> tuple[Any, ...]:
        if type(data) not in (list, tuple) or len(data) != len(parts):
            raise _expected(f"an array of {len(parts)}", data)
        if first is not None and second is not None:  # a pair, the usual case: ("min", "-3.2")
            if type(data[0]) in first and type(data[1]) in second:
                return tuple(data)
        elif simple and all(type(v) in t for v, t in zip(data, sames)):  # type: ignore[operator]
            return tuple(data)
        out = []
        for i, (part, v) in enumerate(zip(parts, data)):
            try:
                out.append(part(v))
            except _Mismatch as wrong:
                wrong.path.append(f"[{i}]")
                raise
        return tuple(out)

    return fixed


def _dict_decoder(args: tuple[Any, ...]) -> Decoder:
    keys, values = _decoder(args[0]), _decoder(args[1])

    def mapping(data: Any) -> dict[Any, Any]:
        if type(data) is not dict:
            raise _expected("a map", data)
        if keys is _identity and values is _identity:
            return data
        out = {}
        for k, v in data.items():
            try:
                out[keys(k)] = values(v)
            except _Mismatch as wrong:
                wrong.path.append(f"[{k!r}]")
                raise
        return out

    return mapping


def _dataclass_decoder(cls: type) -> Decoder:
    fields = [f for f in dataclasses.fields(cls) if f.init]
    required = [f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    decoders: dict[str, tuple[Decoder, frozenset[type] | None]] = {}

    def make(data: Any) -> Any:
        if type(data) is not dict:
            raise _expected(f"a map of {cls.__name__}", data)
        if not decoders and fields:  # made on first use: a class may name one defined after it
            hints = typing.get_type_hints(cls)
            decoders.update({f.name: (_decoder(hints[f.name]), _as_is(hints[f.name])) for f in fields})
        kwargs = {}
        for name, value in data.items():
            found = decoders.get(name)
            if found is None:
                have = ", ".join(f.name for f in fields) or "none"
                raise _Mismatch(f"unknown field {name!r} (the fields of {cls.__name__}: {have})")
            field_decoder, same = found
            if same is not None and type(value) in same:
                kwargs[name] = value
                continue
            try:
                kwargs[name] = field_decoder(value)
            except _Mismatch as wrong:
                wrong.path.append(f".{name}")
                raise
        if len(kwargs) < len(fields):
            missing = [n for n in required if n not in kwargs]
            if missing:
                raise _Mismatch(f"missing field {missing[0]!r} of {cls.__name__}")
        return cls(**kwargs)

    return make


def type_name(kind: Any) -> str:
    """``tuple[Summary, ...]``, ``str | None``: a type form as it is written."""
    if kind is type(None):
        return "null"
    if kind is Any:
        return "Any"
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is None:
        return getattr(kind, "__name__", str(kind))
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(type_name(a) for a in args)
    return f"{origin.__name__}[{', '.join('...' if a is Ellipsis else type_name(a) for a in args)}]"
