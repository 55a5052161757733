"""What a user hands nbviz, checked where it enters: steps, text, ids, class indices.

Every check names the call, the argument and the value, and says what is
expected: bad input is refused at the call, where the user can still fix it,
never accepted and then lost in the writer thread or refused by a view.

The limits come from what the views and the store can hold exactly:

- steps and sample ids: integers in ``0..2**53 - 1`` (:data:`MAX_STEP`), the
  integers a float64 holds exactly: the views draw steps on float64 axes and
  send ids to the browser, where numbers are float64;
- class indices (labels, predicted classes): ``0..2**31 - 1``
  (:data:`MAX_CLASS`), the int32 the views' class arrays travel as;
- text (names, splits, layers, sample text, class names, config): strings
  SQLite can store and the browser can show, i.e. encodable as UTF-8 (a lone
  surrogate such as ``"\\ud800"`` is not).
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "MAX_CLASS",
    "MAX_STEP",
    "check_class_index",
    "check_class_names",
    "check_ids",
    "check_labels",
    "check_split",
    "check_step",
    "check_text",
    "jsonable",
    "to_numpy",
]

MAX_STEP = 2**53 - 1
MAX_CLASS = 2**31 - 1
_STEP_LIMIT = f"2**53 - 1 = {MAX_STEP:,}"
_WHY_STEP = "the views draw steps on float64 axes, exact up to there"
_SINGULAR = {"labels": "label", "predicted classes": "predicted class"}


def to_numpy(value: Any, what: str) -> np.ndarray:
    """A numpy array from a numpy array, torch tensor or sequence (detached, on the host)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu()
        if str(value.dtype) in ("torch.bfloat16", "torch.float16"):
            value = value.float()
        return value.numpy()
    try:
        return np.asarray(value)
    except Exception as exc:  # noqa: BLE001 - any conversion failure means bad input
        raise TypeError(f"{what}: expected an array or tensor, got {type(value).__name__}") from exc


def check_step(step: Any, what: str, arg: str = "step") -> int:
    """A step: an integer in ``0..MAX_STEP`` (a Python, numpy or 0-d tensor integer)."""
    if isinstance(step, bool) or not isinstance(step, numbers.Integral):
        if hasattr(step, "item") and getattr(step, "ndim", 1) == 0:
            step = step.item()
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise TypeError(f"{what}: {arg} must be an integer, got {_short(step)}")
    step = int(step)
    if step < 0:
        raise ValueError(f"{what}: {arg} must be >= 0, got {step}")
    if step > MAX_STEP:
        raise ValueError(f"{what}: {arg} must be at most {_STEP_LIMIT} ({_WHY_STEP}), got {step}")
    return step


def check_text(value: Any, what: str, arg: str, *, empty: bool = False) -> str:
    """A string that can be stored and shown: UTF-8 encodable (and non-empty unless ``empty``)."""
    if not isinstance(value, str):
        raise TypeError(f"{what}: {arg} must be a string, got {_short(value)}")
    if not value and not empty:
        raise ValueError(f"{what}: {arg} must be a non-empty string, got ''")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"{what}: {arg} {_short(value)} holds {value[exc.start]!r} at index "
                f"{exc.start}, a lone surrogate that cannot be stored as UTF-8 text "
                "(decode the bytes it came from with errors='replace')"
            ) from None
    return value


def check_split(split: Any, what: str) -> str:
    """A split's name: a non-empty string that can be stored."""
    if not isinstance(split, str) or not split:
        raise TypeError(f"{what}: split must be a non-empty string, got {_short(split)}")
    return check_text(split, what, "split")


def check_class_names(class_names: Any, current: Sequence[str] | None) -> list[str]:
    """Class names as strings; a run that has names already may only get as many or more."""
    if isinstance(class_names, str) or not isinstance(class_names, Iterable):
        raise TypeError(f"class_names must be a list of strings, got {_short(class_names)}")
    names = [str(c) for c in class_names]
    for i, name in enumerate(names):
        check_text(name, "class_names", f"class_names[{i}]", empty=True)
    if len(names) > MAX_CLASS:
        raise ValueError(f"class_names: at most {MAX_CLASS:,} classes, got {len(names):,}")
    if current is not None and names != list(current) and len(names) < len(current):
        raise ValueError(
            f"class_names: the run already has {len(current)} classes; got {len(names)}"
        )
    return names


def jsonable(value: dict[str, Any], what: str) -> dict[str, Any]:
    """``value`` as JSON would give it back: numpy numbers as numbers, paths as text,
    anything else JSON cannot hold as its ``repr``; text checked as :func:`check_text`."""
    try:
        out = json.loads(json.dumps(value, default=_json_default, allow_nan=True))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what}: values must be JSON-serialisable ({exc})") from exc
    _check_json_text(out, what, what)
    return out


def _check_json_text(value: Any, what: str, where: str) -> None:
    if isinstance(value, str):
        check_text(value, what, where, empty=True)
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text(key, what, f"a key of {where}", empty=True)
            _check_json_text(item, what, f"{where}[{key!r}]")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_json_text(item, what, f"{where}[{i}]")


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return repr(value)


def _integers(arr: np.ndarray, what: str, arg: str, kind: str) -> np.ndarray:
    """``arr`` as int64 if it holds finite whole numbers in int64's range, else a clear error."""
    if arr.dtype.kind in "iu":
        if arr.size and arr.dtype.kind == "u" and int(arr.max()) > 2**63 - 1:
            raise ValueError(f"{what}: {arg} must be at most {_limit(kind)}, got {int(arr.max())}")
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        finite = np.isfinite(arr)
        if not finite.all():
            bad = arr[~finite][0]
            raise ValueError(f"{what}: {arg} must be finite {kind}, got {bad}")
        if not np.all(arr == np.round(arr)):
            bad = arr[arr != np.round(arr)][0]
            raise TypeError(f"{what}: {arg} must be whole numbers ({kind}), got {bad}")
        if arr.size and float(np.abs(arr).max()) > 2**63 - 1:
            big = arr[np.abs(arr) > 2**63 - 1][0]
            raise ValueError(f"{what}: {arg} must be at most {_limit(kind)}, got {big:g}")
        return arr.astype(np.int64)
    raise TypeError(f"{what}: {arg} must be {kind}, got dtype {arr.dtype}")


def _limit(kind: str) -> str:
    return f"{MAX_CLASS:,}" if kind == "class indices" else _STEP_LIMIT


def _bounded(arr: np.ndarray, what: str, arg: str, shown: str, top: int, why: str) -> None:
    """ValueError unless every value of ``arr`` is in ``0..top`` (``shown``, for ``why``)."""
    if not arr.size:
        return
    must = arg if " must be " in arg else f"{arg} must be"
    if arr.min() < 0:
        raise ValueError(f"{what}: {must} >= 0, got {int(arr.min())}")
    if arr.max() > top:
        raise ValueError(f"{what}: {must} at most {shown} ({why}), got {int(arr.max())}")


def check_ids(ids: Any, n: int, what: str) -> np.ndarray:
    """Sample ids: ``0..n-1`` when None, else ``n`` unique integers in ``0..MAX_STEP``."""
    if ids is None:
        return np.arange(n, dtype=np.int64)
    arr = to_numpy(ids, f"{what}: ids").reshape(-1)
    if arr.shape[0] != n:
        raise ValueError(f"{what}: ids has {arr.shape[0]} items but there are {n} samples")
    if arr.dtype.kind not in "iuf":
        raise TypeError(
            f"{what}: ids must be integers, got dtype {arr.dtype}; map string keys to "
            "integers (and log the names as text samples)"
        )
    arr = _integers(arr, what, "ids", "integers")
    _bounded(
        arr,
        what,
        "ids",
        _STEP_LIMIT,
        MAX_STEP,
        "ids reach the browser as float64 numbers, exact up to there",
    )
    uniq, counts = np.unique(arr, return_counts=True)
    if uniq.shape[0] != n:
        dup = uniq[counts > 1][:5].tolist()
        raise ValueError(f"{what}: ids are not unique; repeated: {dup}")
    return arr


def check_class_index(
    values: Any, n: int, n_classes: int | None, what: str, arg: str
) -> np.ndarray:
    """Class indices (labels, predicted classes): ``n`` integers in ``0..n_classes - 1``.

    Without class names the bound is :data:`MAX_CLASS`.
    """
    arr = to_numpy(values, f"{what}: {arg}").reshape(-1)
    if arr.shape[0] != n:
        raise ValueError(f"{what}: {arg} has {arr.shape[0]} items but there are {n} samples")
    arr = _integers(arr, what, arg, "class indices")
    _bounded(
        arr,
        what,
        f"{arg} must be class indices",
        f"{MAX_CLASS:,}",
        MAX_CLASS,
        "the views hold classes as int32",
    )
    if n_classes is not None and n and arr.max() >= n_classes:
        bad = int(arr.max())
        raise ValueError(
            f"{what}: {_SINGULAR.get(arg, arg)} {bad} is out of range for "
            f"{n_classes} classes (0..{n_classes - 1})"
        )
    return arr


def check_labels(labels: Any, n: int, n_classes: int | None, what: str) -> np.ndarray:
    """Labels: ``n`` class indices (see :func:`check_class_index`)."""
    return check_class_index(labels, n, n_classes, what, "labels")


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a repr that fails still needs naming
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
