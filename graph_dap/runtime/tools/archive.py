"""How each kind of value is stored in a dump's ``.npz`` (plain ``.npy`` members, no pickles) and read back.

- bfloat16, float8, int4 and uint4 (an ``.npy`` cannot name them): their bit patterns, as uint16 or
  uint8; the side file names the type.
- onnxruntime's strings (object arrays of ``str``): unicode arrays, read back as objects.
- A map (a dict, as onnxruntime returns skl2onnx's ZipMap items) and a sequence of maps with the
  same keys: a structured array of ``(key, value)`` records, one row per map; the side file names
  the type (``seq(map(int64,float32))``) and reading gives the list of dicts again, keys and numbers
  as onnxruntime gave them.
- Anything else an ``.npy`` cannot hold without pickling is not stored, with the reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graph_dap.runtime import dtypes
from graph_dap.runtime.tensor import element_type

__all__ = ["Encoded", "decode", "encode", "member_key", "special"]

#: (the array to write, the type the side file names, the bytes it holds) or the reason it cannot be stored.
Encoded = tuple[np.ndarray, str, int] | str


def member_key(name: str, index: int) -> str:
    """The archive key of a value: its name, unless the zip format or numpy would mangle it."""
    if name and "\0" not in name and not name.endswith(".npy"):
        return name
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:80]
    return f"__value_{index}_{safe}"


def _strings(a: np.ndarray) -> bool:
    """Whether an object array holds only text (onnxruntime's strings), which an .npy stores as unicode."""
    return all(isinstance(x, str) and not x.endswith("\0") for x in a.reshape(-1).tolist())


def _records(maps: list[dict[Any, Any]]) -> np.ndarray | None:
    """Maps with the same keys as one ``(key, value)`` record array, a row per map; None when they differ."""
    keys = list(maps[0])
    if not keys or any(list(m) != keys for m in maps):
        return None
    if all(isinstance(k, int) and not isinstance(k, bool) for k in keys):
        key_type: Any = np.int64
    elif all(isinstance(k, str) for k in keys):
        key_type = f"U{max(len(k) for k in keys)}"
    else:
        return None
    items = [v for m in maps for v in m.values()]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        return None
    # float64 holds onnxruntime's Python floats exactly (its float32 numbers, widened)
    records = np.zeros((len(maps), len(keys)), dtype=[("key", key_type), ("value", np.float64)])
    records["key"] = np.asarray(keys)
    records["value"] = np.asarray(items, dtype=np.float64).reshape(len(maps), len(keys))
    return records


def encode(value: Any) -> Encoded:
    """What goes in the archive for ``value``, or why nothing can."""
    if isinstance(value, dict) or (isinstance(value, list) and value and all(isinstance(m, dict) for m in value)):
        maps = [value] if isinstance(value, dict) else value
        records = _records(maps)
        if records is None:
            return f"a {element_type(value)} whose maps differ in keys or hold other than numbers"
        stored = records[0] if isinstance(value, dict) else records
        return stored, element_type(value), int(stored.nbytes)
    if isinstance(value, list):
        return "a sequence"
    if value is None:
        return "an optional without a value"
    a = np.asarray(value)
    if a.dtype.hasobject:
        if not _strings(a):
            return f"a {a.dtype} array (objects)"
        return (a.astype(str) if a.size else np.zeros(a.shape, "U1")), "object", int(a.nbytes)
    return dtypes.bits(a), str(a.dtype), int(a.nbytes)


def special(kind: str) -> bool:
    """Whether values the side file types as ``kind`` are stored as something else (see :func:`decode`)."""
    return dtypes.is_extra(kind) or kind == "object" or kind.startswith(("map(", "seq("))


def decode(a: np.ndarray, kind: str) -> Any:
    """The value stored as ``a``, of the type ``kind`` the side file names. ValueError when ``a`` is not what that type is stored as."""
    if kind.startswith(("map(", "seq(map(")):
        if a.dtype.names != ("key", "value"):
            raise ValueError(f"holds {a.dtype}, not the (key, value) records of a {kind}")
        rows = [a] if kind.startswith("map(") else list(a)
        maps = [{k.item(): float(v) for k, v in zip(row["key"], row["value"])} for row in rows]
        return maps[0] if kind.startswith("map(") else maps
    if kind == "object":
        if a.dtype.kind != "U":
            raise ValueError(f"holds {a.dtype}, not the unicode its strings are stored as")
        return a.astype(object)
    if a.dtype.kind != "u" or a.dtype.itemsize != dtypes.dtype_of(kind).itemsize:
        raise ValueError(f"holds {a.dtype}; its side file says {kind} bits (uint{8 * dtypes.dtype_of(kind).itemsize})")
    return dtypes.from_bits(a, kind)
