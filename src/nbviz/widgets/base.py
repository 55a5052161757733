"""What every nbviz widget shares: the built front-end, the base class, the array wire format.

A widget is one Python class here plus one ESM entry ``js/<name>.js``, which the
build bundles into ``src/nbviz/static/<name>.js``::

    class ConfusionMatrix(NbvizWidget):
        _esm = esm("confusion")

Arrays travel to the browser as binary buffers, never JSON lists: put
``array_trait_payload(a)`` into a ``traitlets.Dict`` trait and decode it in JS
with ``decodeArray`` from ``js/lib/wire.js``. ipywidgets lifts ``bytes`` found
anywhere inside a trait's value out of the JSON message into binary buffers; the
browser gets them back as ``DataView`` objects at the same place.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anywidget
import numpy as np
import traitlets

__all__ = [
    "STATIC",
    "FrontendNotBuiltError",
    "NbvizWidget",
    "array_from_payload",
    "array_trait_payload",
    "esm",
]

STATIC = Path(__file__).parent.parent / "static"
"""Where the build writes the bundled front-end (``src/nbviz/static``)."""


class FrontendNotBuiltError(FileNotFoundError):
    """A widget's JS bundle is missing from the installed package."""


def esm(name: str) -> Path:
    """Path of the bundled ESM for widget entry ``js/<name>.js``.

    Raises ``FrontendNotBuiltError`` when the bundle is missing, which happens in a
    source checkout before the front-end is built.
    """
    path = STATIC / f"{name}.js"
    if not path.is_file():
        raise FrontendNotBuiltError(
            f"nbviz front-end not built: {path} is missing "
            f"(bundle of js/{name}.js); run `make js` or reinstall nbviz"
        )
    return path


# Shared look of nbviz views; JupyterLab's theme variables with plain fallbacks
# so the same CSS works in Notebook 7, VS Code and a static HTML export.
_BASE_CSS = """
.nbviz {
  font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px);
  color: var(--jp-ui-font-color1, #1f1f1f);
}
.nbviz-message {
  display: flex;
  align-items: center;
  gap: 0.5em;
  padding: 0.5em 0.75em;
  border-radius: 4px;
  border-left: 4px solid var(--jp-border-color1, #bdbdbd);
  background: var(--jp-layout-color2, #f5f5f5);
  white-space: pre-wrap;
}
.nbviz-message-empty { color: var(--jp-ui-font-color2, #616161); font-style: italic; }
.nbviz-message-warning { border-left-color: var(--jp-warn-color0, #e65100); }
.nbviz-message-error {
  border-left-color: var(--jp-error-color0, #c62828);
  color: var(--jp-error-color0, #b71c1c);
}
.nbviz-message-text { flex: 1; }
.nbviz-dismiss {
  border: none;
  background: transparent;
  color: inherit;
  cursor: pointer;
  font-size: 1.1em;
  line-height: 1;
}
"""


class NbvizWidget(anywidget.AnyWidget):
    """Base of every nbviz view.

    ``error`` holds a readable message the view shows in place of its content
    (for example "this run has no predictions for split 'val'"); empty means
    no error. Subclasses set ``_esm = esm("<name>")`` and may extend the shared
    style with ``_css = NbvizWidget._css + "..."``.
    """

    _css = _BASE_CSS
    error = traitlets.Unicode("", help="Readable error shown instead of the view.").tag(sync=True)

    def save_html(self, path: str | Path, **kwargs: Any) -> Any:
        """Write this view as one self-contained HTML file that opens offline, no kernel.

        The page embeds the front-end and the data, and plays back what the
        kernel would answer for a sampled set of steps and selections; see
        :func:`nbviz.widgets.export.offline_page` for the options (``title``,
        ``max_steps``, ``max_bytes``). Returns a ``PageInfo`` (path, size, notes).
        """
        from nbviz.widgets.export import save_html

        return save_html(self, path, **kwargs)


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
