"""Reading slices of the arrays of an ``.npz`` without reading the arrays whole.

A data set kept as one ``.npz`` whose arrays share a leading sample axis can be
larger than memory. An array stored uncompressed (``numpy.savez``) is mapped
(``numpy.memmap`` at its offset inside the zip); a compressed one
(``numpy.savez_compressed``) is read forward along axis 0, a slice at a time.
"""

from __future__ import annotations

import os
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from graph_dap.errors import InputError
from graph_dap.files import ARCHIVE_ERRORS

_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # a zip member's local file header, 30 bytes


@dataclass(frozen=True, slots=True)
class Member:
    """One array of an archive: its name (the key), dtype, shape and how it is stored."""

    key: str
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    fortran: bool
    offset: int | None  # where its data starts in the file, when stored uncompressed; None when compressed


def members(path: str | os.PathLike[str]) -> dict[str, Member]:
    """The arrays of ``path`` by key, from their headers only."""
    out: dict[str, Member] = {}
    try:
        with zipfile.ZipFile(path) as z, open(path, "rb") as raw:
            for info in z.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                with z.open(info) as f:
                    dtype, shape, fortran, header_len = _read_header(f, info.filename)
                offset = None
                if info.compress_type == zipfile.ZIP_STORED:
                    raw.seek(info.header_offset)
                    fields = _LOCAL_HEADER.unpack(raw.read(_LOCAL_HEADER.size))
                    name_len, extra_len = fields[-2], fields[-1]
                    offset = info.header_offset + _LOCAL_HEADER.size + name_len + extra_len + header_len
                out[info.filename[:-4]] = Member(info.filename[:-4], dtype, shape, fortran, offset)
    except ARCHIVE_ERRORS + (struct.error,) as e:
        raise InputError(f"cannot read {path} as an .npz archive: {e}") from None
    return out


def _read_header(f: IO[bytes], name: str) -> tuple[np.dtype[Any], tuple[int, ...], bool, int]:
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    elif version in ((2, 0), (3, 0)):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise ValueError(f"{name}: .npy format version {version} is not supported")
    if dtype.hasobject:
        raise ValueError(f"{name} holds Python objects, which graph-dap does not read")
    return dtype, tuple(shape), bool(fortran), f.tell()


class SliceReader:
    """Slices ``[start, stop)`` along ``axis`` of every array of one archive; forward reads are cheap."""

    def __init__(self, path: str | os.PathLike[str], axis: int = 0) -> None:
        self.path = Path(path)
        self.axis = axis
        self.members = members(path)
        self._zip: zipfile.ZipFile | None = None
        self._streams: dict[str, tuple[IO[bytes], int]] = {}  # key -> (open member, next sample index)
        self._whole: dict[str, np.ndarray] = {}

    def length(self) -> int:
        """The number of samples: the common size of every array along the axis."""
        sizes = {}
        for key, m in self.members.items():
            if len(m.shape) <= self.axis:
                raise InputError(f"{self.path}: array '{key}' has {len(m.shape)} dimensions, no sample axis {self.axis}")
            sizes[key] = m.shape[self.axis]
        if not sizes:
            raise InputError(f"{self.path} holds no arrays")
        if len(set(sizes.values())) > 1:
            listed = ", ".join(f"'{k}' {n}" for k, n in sizes.items())
            raise InputError(f"{self.path}: the arrays must have as many samples along axis {self.axis}, got {listed}")
        return next(iter(sizes.values()))

    def read(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """Samples ``start..stop-1`` of every array, the sample axis kept (size ``stop - start``)."""
        return {key: self._read(m, start, stop) for key, m in self.members.items()}

    def _read(self, m: Member, start: int, stop: int) -> np.ndarray:
        if m.offset is not None:
            mapped = np.memmap(self.path, m.dtype, "r", m.offset, m.shape, "F" if m.fortran else "C")
            index = [slice(None)] * len(m.shape)
            index[self.axis] = slice(start, stop)
            return np.array(mapped[tuple(index)])
        if self.axis != 0 or m.fortran:
            if m.key not in self._whole:  # compressed, and not contiguous per sample: read it once
                with np.load(self.path, allow_pickle=False) as z:
                    self._whole[m.key] = z[m.key]
            return np.take(self._whole[m.key], range(start, stop), axis=self.axis)
        return self._stream(m, start, stop)

    def _stream(self, m: Member, start: int, stop: int) -> np.ndarray:
        per = int(np.prod(m.shape[1:], dtype=np.int64)) * m.dtype.itemsize
        f, at = self._streams.get(m.key, (None, -1))
        if f is None or at > start:
            if f is not None:
                f.close()
            if self._zip is None:
                self._zip = zipfile.ZipFile(self.path)
            f = self._zip.open(m.key + ".npy")
            _read_header(f, m.key)
            at = 0
        if start > at:
            f.seek(f.tell() + (start - at) * per)  # ZipExtFile reads forward to get there
        data = f.read((stop - start) * per)
        if len(data) != (stop - start) * per:
            raise InputError(f"{self.path}: array '{m.key}' ends before sample {stop - 1}")
        self._streams[m.key] = (f, stop)
        return np.frombuffer(data, m.dtype).reshape((stop - start, *m.shape[1:])).copy()

    def close(self) -> None:
        for f, _ in self._streams.values():
            f.close()
        self._streams.clear()
        if self._zip is not None:
            self._zip.close()
            self._zip = None
        self._whole.clear()
