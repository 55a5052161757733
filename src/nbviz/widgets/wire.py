"""The array wire format: numpy arrays as bytes + dtype + shape for synced traits.

Arrays travel to the browser as binary buffers, never JSON lists: put
``array_trait_payload(a)`` into a ``traitlets.Dict`` trait and decode it in JS
with ``decodeArray`` from ``js/lib/wire.js``. ipywidgets lifts ``bytes`` found
anywhere inside a trait's value out of the JSON message into binary buffers; the
browser gets them back as ``DataView`` objects at the same place.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["array_from_payload", "array_trait_payload", "floats_payload", "steps_payload"]

_KINDS = "biuf"


def _on_wire(dt: np.dtype) -> bool:
    """Whether JS has a typed array for ``dt`` (bool, (u)int8-64, float32/64)."""
    if dt.kind == "b":
        return True
    if dt.kind in "iu":
        return dt.itemsize in (1, 2, 4, 8)
    return dt.kind == "f" and dt.itemsize in (4, 8)


def _check_conversion(a: np.ndarray, target: np.dtype) -> np.ndarray:
    """Cast ``a`` to ``target`` only when no value changes silently."""
    src = a.dtype
    if src == target:
        return a
    if target.kind == "b" or src.kind == "b":
        if src.kind == "b" and target.kind in "iuf":
            return a.astype(target)
        raise TypeError(f"array_trait_payload: cannot convert {src} to {target}")
    if target.kind in "iu":
        if src.kind == "f":
            if a.size and not np.all(np.isfinite(a)):
                raise ValueError(
                    f"array_trait_payload: cannot convert {src} to {target}: array has NaN or Inf"
                )
            if a.size and not np.array_equal(a, np.trunc(a)):
                raise ValueError(
                    f"array_trait_payload: cannot convert {src} to {target}: "
                    "array has non-integral values"
                )
        info = np.iinfo(target)
        if a.size:
            lo, hi = a.min(), a.max()
            if lo < info.min or hi > info.max:
                raise ValueError(
                    f"array_trait_payload: values in [{lo}, {hi}] do not fit {target} "
                    f"(range [{info.min}, {info.max}])"
                )
        return a.astype(target)
    if target.kind == "f":
        finfo = np.finfo(target)
        if src.kind == "f":
            if a.size:
                finite = a[np.isfinite(a)]
                if finite.size and np.abs(finite).max() > finfo.max:
                    raise ValueError(
                        f"array_trait_payload: values up to {np.abs(finite).max():g} overflow "
                        f"{target} (max {finfo.max:g})"
                    )
            return a.astype(target)
        # integers: exact only up to 2**(mantissa bits + 1)
        limit = 2 ** (finfo.nmant + 1)
        if a.size:
            lo, hi = int(a.min()), int(a.max())
            if max(abs(lo), abs(hi)) > limit:
                raise ValueError(
                    f"array_trait_payload: integers in [{lo}, {hi}] are not exact in {target} "
                    f"(exact up to +-{limit})"
                )
        return a.astype(target)
    raise TypeError(f"array_trait_payload: cannot convert {src} to {target}")


def array_trait_payload(a: Any, dtype: Any = None) -> dict[str, Any]:
    """Pack an array for a synced trait: ``{"data": bytes, "dtype": "<f4", "shape": [...]}``.

    The bytes are C-contiguous and little-endian. With ``dtype`` the array is
    converted first, and a conversion that would change values silently is
    refused: float64 -> float32 checks for overflow, int64 -> int32 checks the
    range, float -> int needs finite integral values, int -> float needs values
    the float holds exactly. Precision lost in float64 -> float32 is the one
    accepted loss: asking for it is the explicit request.

    Parameters
    ----------
    a
        Anything ``numpy.asarray`` accepts; booleans, integers and floats only.
    dtype
        Wire dtype to send, e.g. ``"<f4"``; default: the array's own.
    """
    arr = np.asarray(a)
    if arr.dtype.kind not in _KINDS:
        raise TypeError(
            f"array_trait_payload: unsupported dtype {arr.dtype}; expected bool, integers or floats"
        )
    if dtype is not None:
        target = np.dtype(dtype)
        if not _on_wire(target):
            raise TypeError(
                f"array_trait_payload: unsupported target dtype {target}; expected bool, "
                "(u)int8-64, float32 or float64"
            )
        arr = _check_conversion(arr, target.newbyteorder("="))
    if not _on_wire(arr.dtype):
        raise TypeError(
            f"array_trait_payload: {arr.dtype} has no JS typed array; pass dtype='<f4' "
            "(or another supported dtype) to convert it"
        )
    arr = np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("<"), copy=False))
    return {"data": arr.tobytes(), "dtype": arr.dtype.str, "shape": list(arr.shape)}


def array_from_payload(payload: dict[str, Any]) -> np.ndarray:
    """Decode a payload made by ``array_trait_payload`` or JS ``encodeArray``.

    ``data`` may be bytes, bytearray or memoryview (what ipywidgets hands over for
    a buffer sent from the browser). The result is a read-only view of the bytes.
    """
    try:
        data, dtype, shape = payload["data"], payload["dtype"], payload["shape"]
    except (KeyError, TypeError) as exc:
        raise ValueError(
            f"array_from_payload: expected a dict with data, dtype and shape, got {payload!r:.80}"
        ) from exc
    dt = np.dtype(dtype)
    if dt.kind not in _KINDS:
        raise TypeError(f"array_from_payload: unsupported dtype {dtype!r}")
    shape = tuple(int(d) for d in shape)
    buf = memoryview(data).cast("B")
    expected = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    if buf.nbytes != expected:
        raise ValueError(
            f"array_from_payload: {dtype} array of shape {list(shape)} needs {expected} bytes, "
            f"got {buf.nbytes}"
        )
    return np.frombuffer(buf, dtype=dt).reshape(shape)


def steps_payload(values: Any) -> dict[str, Any]:
    """Steps as a binary payload: int32 when they fit (the usual case), else float64.

    JavaScript reads both as exact numbers; int64 would need BigInt handling.
    """
    a = np.asarray(values, dtype=np.int64)
    if len(a) == 0 or (a.min() >= -(2**31) and a.max() < 2**31):
        return array_trait_payload(a, dtype="<i4")
    return array_trait_payload(a, dtype="<f8")


def floats_payload(values: Any) -> dict[str, Any]:
    """Values as float64 (NaN and Inf kept): the payload of a series or a matrix of statistics."""
    return array_trait_payload(np.asarray(values, dtype=np.float64))
