"""Arrays as bytes: the store's one array format.

An array is kept as three values: its raw C-contiguous little-endian bytes, the
numpy dtype string (``"<f4"``, ``"|u1"``, ``"|b1"``) and its shape as JSON
(``"[3, 4]"``). Only plain numeric and boolean dtypes are accepted in either
direction, so decoding a run that someone sent can never build objects or run
code (no pickle anywhere).
"""

from __future__ import annotations

import json
import math
import re

import numpy as np

from nbviz.store.errors import StoredValueError

__all__ = ["ALLOWED_KINDS", "from_blob", "to_blob"]

# b: bool, i: signed int, u: unsigned int, f: float, c: complex
ALLOWED_KINDS = frozenset("biufc")
_DTYPE_RE = re.compile(r"^[<>|=]?[biufc][0-9]{1,2}$")


def _check_dtype(dtype: np.dtype, where: str) -> None:
    if dtype.kind not in ALLOWED_KINDS or dtype.fields is not None or dtype.subdtype:
        raise TypeError(
            f"{where}: dtype {dtype.str!r} is not a plain numeric or bool dtype "
            f"(allowed kinds: bool, int, uint, float, complex)"
        )


def to_blob(a: np.ndarray) -> tuple[bytes, str, str]:
    """Encode an array as ``(little-endian C-order bytes, dtype string, shape JSON)``."""
    a = np.asarray(a)
    _check_dtype(a.dtype, "to_blob")
    little = a.dtype.newbyteorder("<") if a.dtype.byteorder not in ("<", "|") else a.dtype
    a = np.asarray(a, dtype=little, order="C")
    return a.tobytes(), a.dtype.str, json.dumps(list(a.shape))


def from_blob(data: bytes | memoryview, dtype: str, shape: str | list[int]) -> np.ndarray:
    """Decode what :func:`to_blob` wrote, without copying (the result is read-only).

    Raises :class:`~nbviz.store.errors.StoredValueError` (a ValueError) for a
    dtype that is not plain numeric/bool, a malformed shape, or bytes that do
    not hold an array of that shape: what a damaged or crafted run may hold.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise StoredValueError(f"from_blob: expected bytes, got a {type(data).__name__}")
    if not isinstance(dtype, str) or not _DTYPE_RE.match(dtype):
        raise StoredValueError(
            f"from_blob: dtype {dtype!r} is not a plain numeric or bool dtype string "
            f"such as '<f4', '<i8' or '|b1'"
        )
    try:
        dt = np.dtype(dtype)
        _check_dtype(dt, "from_blob")
    except TypeError as exc:
        raise StoredValueError(str(exc)) from None
    try:
        dims = json.loads(shape) if isinstance(shape, str) else list(shape)
    except (TypeError, ValueError):
        dims = None
    if not isinstance(dims, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims
    ):
        raise StoredValueError(f"from_blob: shape {shape!r} is not a list of non-negative ints")
    expected = math.prod(dims) * dt.itemsize
    if len(data) != expected:
        raise StoredValueError(
            f"from_blob: {len(data)} bytes do not hold an array of shape {dims} "
            f"and dtype {dtype} ({expected} bytes)"
        )
    return np.frombuffer(data, dtype=dt).reshape(tuple(dims))
