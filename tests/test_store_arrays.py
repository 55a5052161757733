"""Arrays <-> bytes: the store's one array format."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nbviz.store import from_blob, to_blob
from nbviz.store.errors import StoredValueError


@pytest.mark.parametrize(
    "dtype", ["<f4", "<f8", "<f2", "<i8", "<i4", "|i1", "|u1", "<u2", "|b1", "<c8"]
)
def test_round_trip_keeps_values_dtype_and_shape(dtype: str) -> None:
    a = (np.arange(24) % 7).astype(dtype).reshape(2, 3, 4)
    data, dt, shape = to_blob(a)
    assert dt == np.dtype(dtype).str
    assert json.loads(shape) == [2, 3, 4]
    b = from_blob(data, dt, shape)
    assert b.dtype == a.dtype and b.shape == a.shape
    np.testing.assert_array_equal(a, b)


def test_big_endian_and_strided_input_is_stored_little_endian_c_order() -> None:
    a = np.arange(12, dtype=">f4").reshape(3, 4).T
    data, dt, shape = to_blob(a)
    assert dt == "<f4" and shape == "[4, 3]"
    assert data == np.ascontiguousarray(a, dtype="<f4").tobytes()
    np.testing.assert_array_equal(from_blob(data, dt, shape), a)


def test_from_blob_does_not_copy_and_is_read_only() -> None:
    data, dt, shape = to_blob(np.ones(1000, dtype=np.float32))
    b = from_blob(data, dt, shape)
    assert not b.flags.writeable
    assert not b.flags.owndata


def test_empty_and_zero_dimensional_arrays_round_trip() -> None:
    empty = from_blob(*to_blob(np.zeros((0, 5), dtype=np.float32)))
    assert empty.shape == (0, 5)
    scalar = from_blob(*to_blob(np.array(3.5)))
    assert scalar.shape == () and scalar == 3.5


def test_nan_and_inf_survive() -> None:
    a = np.array([np.nan, np.inf, -np.inf, 1.0])
    np.testing.assert_array_equal(from_blob(*to_blob(a)), a)


@pytest.mark.parametrize("bad", ["|O", "O", "<U4", "|S3", "|V8", "i4,f8", "[('a', 'O')]", "<M8[s]"])
def test_from_blob_rejects_anything_but_plain_numeric_dtypes(bad: str) -> None:
    with pytest.raises(StoredValueError, match="not a plain numeric or bool dtype"):
        from_blob(b"\0" * 8, bad, "[1]")


def test_to_blob_rejects_object_and_structured_arrays() -> None:
    with pytest.raises(TypeError, match="'\\|O'"):
        to_blob(np.array([{"a": 1}], dtype=object))
    with pytest.raises(TypeError, match="not a plain numeric"):
        to_blob(np.zeros(2, dtype=[("a", "<f4")]))


def test_from_blob_rejects_a_shape_that_does_not_match_the_bytes() -> None:
    with pytest.raises(ValueError, match="12 bytes do not hold an array of shape \\[2, 2\\]"):
        from_blob(b"\0" * 12, "<f4", "[2, 2]")
    with pytest.raises(ValueError, match="not a list of non-negative ints"):
        from_blob(b"\0" * 4, "<f4", '{"a": 1}')
