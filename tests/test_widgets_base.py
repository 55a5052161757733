"""The widget base: bundle lookup, the array wire format, and StatusMessage's state."""

from __future__ import annotations

import numpy as np
import pytest
import traitlets
from ipywidgets.widgets.widget import _remove_buffers

from nbviz.widgets import base
from nbviz.widgets.base import (
    FrontendNotBuiltError,
    NbvizWidget,
    array_from_payload,
    array_trait_payload,
    esm,
)


def test_esm_names_the_fix_when_a_bundle_is_missing() -> None:
    with pytest.raises(FrontendNotBuiltError, match=r"front-end not built.*make js"):
        esm("no_such_widget")
    assert issubclass(FrontendNotBuiltError, FileNotFoundError)


def test_esm_points_into_the_static_folder() -> None:
    path = esm("status")
    assert path.parent == base.STATIC
    assert path.read_text().strip()


def test_payload_is_little_endian_c_contiguous_bytes() -> None:
    a = np.arange(6, dtype=">i4").reshape(2, 3).T  # big-endian and not C-contiguous
    p = array_trait_payload(a)
    assert p["dtype"] == "<i4"
    assert p["shape"] == [3, 2]
    assert isinstance(p["data"], bytes)
    assert p["data"] == np.ascontiguousarray(a, dtype="<i4").tobytes()
    np.testing.assert_array_equal(array_from_payload(p), a)


def test_payload_spells_one_byte_types_like_numpy() -> None:
    assert array_trait_payload(np.zeros(2, np.uint8))["dtype"] == "|u1"
    assert array_trait_payload(np.zeros(2, bool))["dtype"] == "|b1"


def test_float64_to_float32_is_explicit_and_checks_overflow() -> None:
    assert array_trait_payload(np.array([0.1]))["dtype"] == "<f8", "no silent narrowing"
    p = array_trait_payload(np.array([0.1, np.nan, -np.inf]), dtype="<f4")
    assert p["dtype"] == "<f4"
    with pytest.raises(ValueError, match=r"overflow float32"):
        array_trait_payload(np.array([1e39]), dtype="<f4")


def test_int64_to_int32_checks_the_range() -> None:
    assert array_trait_payload(np.array([1, -2], np.int64), dtype="<i4")["dtype"] == "<i4"
    with pytest.raises(ValueError, match=r"\[-5, 4294967296\] do not fit int32"):
        array_trait_payload(np.array([-5, 2**32], np.int64), dtype="<i4")


def test_float_to_int_needs_finite_integral_values() -> None:
    assert array_from_payload(array_trait_payload(np.array([3.0]), dtype="<i8")).tolist() == [3]
    with pytest.raises(ValueError, match="non-integral"):
        array_trait_payload(np.array([0.5]), dtype="<i8")
    with pytest.raises(ValueError, match="NaN or Inf"):
        array_trait_payload(np.array([np.nan]), dtype="<i8")


def test_int_to_float_must_be_exact() -> None:
    array_trait_payload(np.array([2**24]), dtype="<f4")
    with pytest.raises(ValueError, match=r"not exact in float32"):
        array_trait_payload(np.array([2**24 + 1]), dtype="<f4")


def test_types_without_a_js_typed_array_are_refused() -> None:
    with pytest.raises(TypeError, match="unsupported dtype <U1"):
        array_trait_payload(np.array(["a"]))
    with pytest.raises(TypeError, match=r"float16 has no JS typed array; pass dtype='<f4'"):
        array_trait_payload(np.zeros(2, np.float16))
    assert array_trait_payload(np.zeros(2, np.float16), dtype="<f4")["dtype"] == "<f4"
    with pytest.raises(TypeError, match="unsupported target dtype"):
        array_trait_payload(np.zeros(2), dtype="<c8")


def test_array_from_payload_accepts_buffers_from_the_browser() -> None:
    raw = np.array([1.5, 2.5], "<f4").tobytes()
    for data in (raw, bytearray(raw), memoryview(raw)):
        out = array_from_payload({"data": data, "dtype": "<f4", "shape": [2]})
        assert out.tolist() == [1.5, 2.5]
    with pytest.raises(ValueError, match=r"needs 12 bytes, got 8"):
        array_from_payload({"data": raw, "dtype": "<f4", "shape": [3]})
    with pytest.raises(ValueError, match="expected a dict with data, dtype and shape"):
        array_from_payload({"data": raw})


class _ArrayWidget(NbvizWidget):
    _esm = "export default { render() {} }"
    points = traitlets.Dict().tag(sync=True)


def test_bytes_inside_a_dict_trait_travel_as_binary_buffers() -> None:
    w = _ArrayWidget(points=array_trait_payload(np.ones((4, 2), np.float32)))
    state, paths, buffers = _remove_buffers(w.get_state())
    assert paths == [["points", "data"]]
    assert len(buffers[0]) == 4 * 2 * 4
    assert state["points"] == {"dtype": "<f4", "shape": [4, 2]}, "no bytes left in the JSON"


def test_status_message_state() -> None:
    from nbviz.widgets.status import StatusMessage

    w = StatusMessage("No predictions yet", kind="empty")
    state = w.get_state()
    assert state["message"] == "No predictions yet"
    assert state["kind"] == "empty"
    assert state["error"] == ""
    assert state["dismissed"] is False
    with pytest.raises(traitlets.TraitError):
        StatusMessage("x", kind="loud")
