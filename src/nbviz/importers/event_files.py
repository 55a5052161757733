"""TensorBoard event files read safely: scalars, histograms and images, checked as data.

Records come from TensorBoard's own reader (``RawEventFileLoader``) and are
parsed with its ``Event`` protobuf; nothing here parses protobuf by hand. Two
things the reader does not do are added:

- Before the reader opens a file, its record framing is walked (each record's
  12-byte header: length and the length's masked CRC-32C) without reading the
  payloads, so that a length larger than what is left of the file, which the
  reader would try to allocate, is caught first.
- The reader stops quietly at a damaged record; here the records it returned
  are counted against the framing, so damage is reported, with its place.

Values are checked as they are read: steps are non-negative integers,
histogram edges finite and ordered, counts finite and non-negative, images
decoded only when their size is sane.
"""

from __future__ import annotations

import io
import os
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nbviz.extras import require

#: Largest image (pixels) decoded into a thumbnail.
MAX_IMAGE_PIXELS = 40_000_000
#: Most histogram buckets read from one value.
MAX_BUCKETS = 1_000_000
_HEADER = 12  # uint64 length + uint32 masked CRC of the length
_TRAILER = 4  # uint32 masked CRC of the payload


class EventFileError(ValueError):
    """An event file that cannot be read as TensorBoard data (names the file and where)."""


@dataclass
class Scalar:
    tag: str
    step: int
    wall_time: float
    value: float


@dataclass
class Histogram:
    tag: str
    step: int
    wall_time: float
    edges: np.ndarray  # float64, k + 1, non-decreasing
    counts: np.ndarray  # float64, k, >= 0


@dataclass
class Image:
    tag: str
    step: int
    wall_time: float
    pixels: np.ndarray  # uint8, H x W x C


@dataclass
class Frames:
    """What the record framing of a file says: how many records, and where it stops."""

    count: int
    valid_bytes: int
    size: int
    problem: str | None


def _tb(module: str) -> Any:
    return require(module, "tensorboard", "nbviz.from_tensorboard")


def is_event_file(path: Path) -> bool:
    """TensorBoard's rule: an event file has ``tfevents`` in its name."""
    return "tfevents" in path.name and path.is_file()


def scan_frames(path: Path) -> Frames:
    """Walk the record headers of ``path`` without reading payloads."""
    crc = _tb("tensorboard.compat.tensorflow_stub.pywrap_tensorflow").masked_crc32c
    size = path.stat().st_size
    count, offset = 0, 0
    with open(path, "rb") as f:
        while offset < size:
            header = f.read(_HEADER)
            if len(header) < _HEADER:
                return Frames(count, offset, size, f"an incomplete record header at byte {offset}")
            (length,) = struct.unpack("<Q", header[:8])
            (length_crc,) = struct.unpack("<I", header[8:])
            if crc(header[:8]) != length_crc:
                return Frames(count, offset, size, f"a corrupt record header at byte {offset}")
            end = offset + _HEADER + length + _TRAILER
            if end > size:
                return Frames(
                    count,
                    offset,
                    size,
                    f"a record at byte {offset} that claims {length} bytes, more than the "
                    f"{size - offset - _HEADER} left in the file",
                )
            f.seek(end)
            offset = end
            count += 1
    return Frames(count, offset, size, None)


def read_file(path: Path, *, strict: bool, notes: list[str]) -> Iterator[Any]:
    """The values of one event file, in file order (Scalar, Histogram, Image).

    ``strict``: damage raises :class:`EventFileError`; otherwise the records
    before it are read and a note says what was left out.
    """
    loader_mod = _tb("tensorboard.backend.event_processing.event_file_loader")
    event_pb2 = _tb("tensorboard.compat.proto.event_pb2")
    frames = scan_frames(path)
    if frames.count == 0 and frames.size:
        raise EventFileError(
            f"{path}: not a TensorBoard event file, or damaged from its start "
            f"({frames.problem or 'no record could be read'})"
        )
    source, scratch = path, None
    if frames.problem is not None:
        _damage(path, frames.problem, frames, strict, notes)
        scratch = _prefix_copy(path, frames.valid_bytes)  # the reader sees only whole records
        source = Path(scratch)
    try:
        records = list(loader_mod.RawEventFileLoader(str(source)).Load())
    finally:
        if scratch is not None:
            os.unlink(scratch)
    if len(records) < frames.count:
        where = sum(len(r) + _HEADER + _TRAILER for r in records)
        problem = f"record {len(records) + 1} (byte {where}) fails its checksum"
        _damage(path, problem, frames, strict, notes)
    metadata: dict[str, str] = {}  # tag -> plugin name, from its first value
    for i, record in enumerate(records):
        try:
            event = event_pb2.Event.FromString(record)
        except Exception as exc:  # protobuf's DecodeError and its relatives
            _bad(path, f"record {i + 1} is not a TensorBoard event ({exc})", strict, notes)
            continue
        if event.WhichOneof("what") != "summary":
            continue
        for value in event.summary.value:
            try:
                item = _value(value, int(event.step), float(event.wall_time), metadata)
            except (ValueError, TypeError, OverflowError) as exc:
                _bad(path, f"record {i + 1}, tag {value.tag!r}: {exc}", strict, notes)
                continue
            if item is not None:
                yield item


def _damage(path: Path, problem: str, frames: Frames, strict: bool, notes: list[str]) -> None:
    if strict:
        raise EventFileError(
            f"{path}: damaged event file: {problem} (size {frames.size} bytes); pass "
            "strict=False (or --lenient) to import the records before it"
        )
    notes.append(f"{path.name}: {problem}; the records before it were imported")


def _bad(path: Path, problem: str, strict: bool, notes: list[str]) -> None:
    if strict:
        raise EventFileError(
            f"{path}: {problem}; pass strict=False (or --lenient) to skip such values"
        )
    notes.append(f"{path.name}: {problem}; skipped")


def _prefix_copy(path: Path, nbytes: int) -> str:
    fd, name = tempfile.mkstemp(prefix="nbviz-tb-", suffix=".tfevents")
    with open(path, "rb") as src, os.fdopen(fd, "wb") as dst:
        left = nbytes
        while left:
            chunk = src.read(min(left, 1 << 20))
            if not chunk:
                break
            dst.write(chunk)
            left -= len(chunk)
    return name


def _value(value: Any, step: int, wall_time: float, metadata: dict[str, str]) -> Any:
    tag = str(value.tag)
    if value.HasField("metadata") and value.metadata.plugin_data.plugin_name:
        metadata.setdefault(tag, value.metadata.plugin_data.plugin_name)
    kind = value.WhichOneof("value")
    if kind not in ("simple_value", "histo", "image", "tensor"):
        return None  # audio, text, ... : not held by a run
    if step < 0:
        raise ValueError(f"step {step} is negative")
    if kind == "simple_value":
        return Scalar(tag, step, wall_time, float(value.simple_value))
    if kind == "histo":
        h = value.histo
        return _histogram(tag, step, wall_time, h.min, h.max, h.bucket_limit, h.bucket)
    if kind == "image":
        img = value.image
        return _image(tag, step, wall_time, img.width, img.height, img.encoded_image_string)
    plugin = metadata.get(tag)
    if plugin not in ("scalars", "histograms", "images"):
        return None
    tensor_util = _tb("tensorboard.util.tensor_util")
    arr = tensor_util.make_ndarray(value.tensor)
    if plugin == "scalars":
        if arr.size != 1 or arr.dtype.kind not in "biuf":
            raise ValueError(f"a scalar holds {arr.dtype} of shape {arr.shape}")
        return Scalar(tag, step, wall_time, float(arr.reshape(-1)[0]))
    if plugin == "histograms":
        return _bucket_histogram(tag, step, wall_time, arr)
    if arr.dtype.kind not in "SO" or arr.ndim != 1 or arr.size < 3:
        raise ValueError(f"an image summary holds {arr.dtype} of shape {arr.shape}")
    return _image(tag, step, wall_time, _int(arr[0]), _int(arr[1]), bytes(arr[2]))


def _histogram(
    tag: str, step: int, wall_time: float, lo: float, hi: float, limits: Any, buckets: Any
) -> Histogram | None:
    """A legacy ``HistogramProto``: TensorBoard's reading (its ``data_compat``), in float64.

    ``bucket_limit[i]`` is bucket i's right edge; empty buckets at both ends are
    dropped and the data's min and max close the outermost non-empty ones.
    """
    if len(buckets) > MAX_BUCKETS or len(limits) != len(buckets):
        raise ValueError(f"a histogram with {len(buckets)} buckets and {len(limits)} bucket limits")
    counts = np.asarray(buckets, dtype=np.float64)
    limits = np.asarray(limits, dtype=np.float64)
    _check_counts(counts)
    _check_edges(limits[np.isfinite(limits)])  # TF1 writes +-DBL_MAX, never NaN or disorder
    nonzero = np.flatnonzero(counts > 0)
    if not len(nonzero):
        return None  # an empty histogram: nothing to draw
    start, end = int(nonzero[0]), int(nonzero[-1])
    edges = np.concatenate([[lo], limits[start:end], [hi]])
    return Histogram(tag, step, wall_time, _check_edges(edges), counts[start : end + 1])


def _bucket_histogram(tag: str, step: int, wall_time: float, arr: np.ndarray) -> Histogram | None:
    """A tensor histogram (TF2 and TensorBoard's own summaries): rows ``[left, right, count]``."""
    if arr.size == 0:
        return None
    if arr.ndim != 2 or arr.shape[1] != 3 or arr.shape[0] > MAX_BUCKETS:
        raise ValueError(f"a histogram tensor of shape {arr.shape}, not (buckets, 3)")
    arr = arr.astype(np.float64)
    lefts, rights, counts = arr[:, 0], arr[:, 1], arr[:, 2]
    _check_counts(counts)
    if not np.allclose(lefts[1:], rights[:-1], rtol=1e-9, atol=0.0):
        raise ValueError("a histogram whose buckets do not meet edge to edge")
    if not (counts > 0).any():
        return None
    edges = np.concatenate([lefts[:1], rights])
    return Histogram(tag, step, wall_time, _check_edges(edges), counts)


def _check_counts(counts: np.ndarray) -> None:
    if not np.isfinite(counts).all() or (counts < 0).any():
        raise ValueError("a histogram with negative or non-finite counts")


def _check_edges(edges: np.ndarray) -> np.ndarray:
    if not np.isfinite(edges).all() or (np.diff(edges) < 0).any():
        raise ValueError("a histogram whose edges are not finite and increasing")
    return edges


def _int(value: Any) -> int:
    text = value.decode("ascii") if isinstance(value, bytes) else str(value)
    return int(text)


def _image(tag: str, step: int, wall_time: float, width: int, height: int, data: bytes) -> Image:
    """Decode an encoded image (PNG, JPEG, GIF, BMP, WebP) after checking its size."""
    from PIL import Image as PILImage

    if width < 0 or height < 0 or width * height > MAX_IMAGE_PIXELS:
        raise ValueError(f"an image of {width} x {height} pixels, over the limit")
    try:
        img = PILImage.open(io.BytesIO(data), formats=["PNG", "JPEG", "GIF", "BMP", "WEBP"])
    except Exception as exc:  # PIL's UnidentifiedImageError, DecompressionBombError, ...
        raise ValueError(f"an image that cannot be decoded ({exc})") from None
    w, h = img.size
    if w * h > MAX_IMAGE_PIXELS:
        raise ValueError(f"an image of {w} x {h} pixels, over the limit")
    try:
        img = img.convert("RGBA" if "A" in img.getbands() else "RGB")
    except Exception as exc:  # truncated or corrupt pixel data
        raise ValueError(f"an image that cannot be decoded ({exc})") from None
    return Image(tag, step, wall_time, np.asarray(img, dtype=np.uint8))
