"""Reading a run's write-ahead log as SQLite does, to tell when part of it is lost.

A run is an SQLite database in WAL mode: recent commits live in ``run.sqlite-wal``
until a checkpoint copies them into ``run.sqlite``. SQLite reads the log frame by
frame and stops, without a word, at the first frame whose salts or cumulative
checksum do not match: whatever follows is ignored. A log cut short (a copy
that stopped, a disk that filled) therefore loses commits silently. This
module reads the log the same way (the format is SQLite's documented WAL
format: a 32-byte header, then frames of a 24-byte header and one page) and
says what SQLite will not: how much of it cannot be read, and, where the
shared-memory index (``run.sqlite-shm``) still records how many frames were
committed, how many of them are gone.

Checksums are computed with numpy: SQLite's checksum is a linear recurrence
(``s0 += x0 + s1; s1 += x1 + s0`` over pairs of 32-bit words, modulo 2**32),
so a frame's checksum is a matrix power applied to the previous one plus a
weighted sum of its words, which numpy computes for many frames at once.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

__all__ = ["WalScan", "lost_commits", "scan_wal"]

_MAGIC = (0x377F0682, 0x377F0683)  # little- and big-endian checksums
_VERSION = 3007000
_HEADER = 32
_FRAME_HEADER = 24
_CHUNK_FRAMES = 256  # frames whose checksums are computed in one numpy pass


@dataclass(frozen=True)
class WalScan:
    """What a write-ahead log holds, read as SQLite's recovery reads it.

    ``committed`` frames are the valid ones up to the last commit frame: what
    a reader sees. ``unreadable_bytes`` is what follows them in the file and
    belongs to the same log generation (same salts) or is a frame cut short:
    writes that cannot be read (an uncommitted tail after a crash, or a log
    cut short). ``header_ok`` is False when the header itself is damaged, and
    then nothing in the log is read.
    """

    size: int
    header_ok: bool
    page_size: int = 0
    salts: tuple[int, int] = (0, 0)
    committed: int = 0
    valid: int = 0
    unreadable_bytes: int = 0

    @property
    def frame_size(self) -> int:
        return self.page_size + _FRAME_HEADER


@lru_cache(maxsize=8)
def _powers(n: int) -> np.ndarray:
    """``A**j`` modulo 2**32 for j = 0..n-1, A = [[1, 1], [1, 2]] (the checksum's step)."""
    out = np.empty((n, 2, 2), dtype=np.uint64)
    a, b, c, d = 1, 0, 0, 1
    mask = 0xFFFFFFFF
    for j in range(n):
        out[j] = ((a, b), (c, d))
        a, b, c, d = (a + c) & mask, (b + d) & mask, (a + 2 * c) & mask, (b + 2 * d) & mask
    return out


def _checksum(state: tuple[int, int], words: np.ndarray) -> tuple[int, int]:
    """SQLite's cumulative checksum of ``words`` (uint32 pairs) from ``state``."""
    s0, s1 = state
    w = words.astype(np.uint64)
    for x0, x1 in w.reshape(-1, 2).tolist():
        s0 = (s0 + x0 + s1) & 0xFFFFFFFF
        s1 = (s1 + x1 + s0) & 0xFFFFFFFF
    return s0, s1


def _frame_sums(words: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per frame: ``A**n`` and the part of the checksum its words add, for frames of n pairs.

    ``words`` is ``(frames, 2 * n)`` uint32 (frame header's first 8 bytes, then
    the page). The checksum after a frame is ``A**n @ before + add``.
    """
    n = words.shape[1] // 2
    powers = _powers(n + 1)
    w = words.astype(np.uint64)
    x0, x1 = w[:, 0::2], w[:, 1::2]
    b0, b1 = x0, x0 + x1
    p = powers[n - 1 :: -1][:n]  # A**(n-1-k) for pair k
    add0 = (b0 * p[:, 0, 0] + b1 * p[:, 0, 1]).sum(axis=1) & 0xFFFFFFFF
    add1 = (b0 * p[:, 1, 0] + b1 * p[:, 1, 1]).sum(axis=1) & 0xFFFFFFFF
    return powers[n], add0, add1


def scan_wal(wal: Path | str) -> WalScan | None:
    """Read ``wal`` as SQLite's recovery would; None when there is no log file."""
    wal = Path(wal)
    try:
        with open(wal, "rb") as f:
            data = f.read()
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return None
    size = len(data)
    if size < _HEADER:
        return WalScan(size=size, header_ok=size == 0)
    magic, version, page_size, _, salt1, salt2, ck1, ck2 = struct.unpack(">8I", data[:_HEADER])
    big = magic == _MAGIC[1]
    order = ">u4" if big else "<u4"
    header_words = np.frombuffer(data[:24], dtype=order)
    ok = (
        magic in _MAGIC
        and version == _VERSION
        and page_size >= 512
        and page_size & (page_size - 1) == 0
        and page_size <= 65536
        and _checksum((0, 0), header_words) == (ck1, ck2)
    )
    if not ok:
        return WalScan(size=size, header_ok=False)
    frame = _FRAME_HEADER + page_size
    whole = (size - _HEADER) // frame
    state = (ck1, ck2)
    valid = committed = 0
    stopped = False
    for start in range(0, whole, _CHUNK_FRAMES):
        count = min(_CHUNK_FRAMES, whole - start)
        base = _HEADER + start * frame
        block = np.frombuffer(data, dtype=np.uint8, count=count * frame, offset=base)
        block = block.reshape(count, frame)
        heads = block[:, :_FRAME_HEADER].copy().view(">u4")  # (count, 6), big-endian fields
        body = np.concatenate([block[:, :8], block[:, _FRAME_HEADER:]], axis=1)
        a, add0, add1 = _frame_sums(body.copy().view(order))
        a00, a01, a10, a11 = (int(x) for x in a.reshape(-1))
        for i in range(count):
            pgno, commit, s1, s2, c1, c2 = (int(x) for x in heads[i])
            if pgno == 0 or (s1, s2) != (salt1, salt2):
                stopped = True
                break
            s0, s1_ = state
            nxt = (
                (a00 * s0 + a01 * s1_ + int(add0[i])) & 0xFFFFFFFF,
                (a10 * s0 + a11 * s1_ + int(add1[i])) & 0xFFFFFFFF,
            )
            if nxt != (c1, c2):
                stopped = True
                break
            state = nxt
            valid += 1
            if commit:
                committed = valid
        if stopped:
            break
    end = _HEADER + committed * frame
    unreadable = 0
    # after the last commit: frames of this generation (same salts) or a cut-off frame
    offset = end
    while offset + frame <= size:
        s1, s2 = struct.unpack(">II", data[offset + 8 : offset + 16])
        if (s1, s2) != (salt1, salt2):
            break  # an older generation's frame: SQLite never read it either
        unreadable += frame
        offset += frame
    if offset == _HEADER + whole * frame and size > offset:
        unreadable += size - offset  # a frame cut short
    return WalScan(
        size=size,
        header_ok=True,
        page_size=page_size,
        salts=(salt1, salt2),
        committed=committed,
        valid=valid,
        unreadable_bytes=unreadable,
    )


def lost_commits(db: Path | str) -> str | None:
    """What of ``db``'s write-ahead log cannot be read, said for a person; None if nothing.

    With a shared-memory index (a run open somewhere, or left by a process that
    died), the index says how many frames were committed; it is read before
    the log, so that a writer still committing (in this process or another)
    only ever makes the log longer than the index says, never shorter: a live
    run is not taken for a damaged one, and a log as long as its index is not
    read at all. Without an index (a copy), the log is read as SQLite's
    recovery reads it.
    """
    db = Path(db)
    wal, shm = Path(f"{db}-wal"), Path(f"{db}-shm")
    try:
        with open(shm, "rb") as f:
            index: bytes | None = f.read(96)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        index = None
    if index is not None:
        return _shorter_than_its_index(wal, index)
    scan = scan_wal(wal)
    if scan is None or scan.size == 0:
        return None
    if not scan.header_ok:
        return (
            f"{wal.name} has a damaged header, so none of its {scan.size:,} bytes can be "
            "read: the commits it held are missing from the run"
        )
    if scan.unreadable_bytes:
        return (
            f"{wal.name} ends in {scan.unreadable_bytes:,} bytes that cannot be read after its "
            f"last complete commit ({scan.committed:,} frames are read): the log was cut short "
            "or damaged, or the process writing it stopped in the middle of a write; what "
            "those bytes held is missing from the run"
        )
    return None


def _shorter_than_its_index(wal: Path, index: bytes) -> str | None:
    """The loss when ``wal`` holds fewer frames than its shared-memory ``index`` records."""
    try:
        with open(wal, "rb") as f:
            header = f.read(_HEADER)
        size = wal.stat().st_size
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return None
    if len(header) < _HEADER:
        return None  # a log being started, or reset, by a live writer
    page_size = struct.unpack(">I", header[8:12])[0]
    indexed = _indexed_frames(index, struct.unpack(">II", header[16:24]))
    if indexed is None or size >= _HEADER + indexed * (_FRAME_HEADER + page_size):
        return None  # consistent; anything past it is a write in progress
    scan = scan_wal(wal)
    committed = scan.committed if scan is not None else 0
    lost = indexed - committed
    return (
        f"{wal.name} holds {committed:,} of the {indexed:,} frames committed to it "
        f"({lost:,} pages of recent writes, about {lost * page_size:,} bytes, are "
        "lost): the log was cut short or damaged after it was written"
    )


def _indexed_frames(head: bytes | None, salts: tuple[int, int]) -> int | None:
    """Frames the shared-memory index header ``head`` says were committed to the log.

    None when there is no index, it is not initialised, its two header copies
    differ (being written) or it describes another log generation (salts).
    The index is in the machine's byte order, except the salts, which are the
    log header's bytes copied as they are (big-endian).
    """
    if head is None or len(head) < 96 or head[:48] != head[48:96]:
        return None
    order = "<" if sys.byteorder == "little" else ">"
    version = struct.unpack(f"{order}I", head[0:4])[0]
    mx_frame = struct.unpack(f"{order}I", head[16:20])[0]
    if version != _VERSION or not head[12] or struct.unpack(">II", head[32:40]) != salts:
        return None
    return mx_frame
