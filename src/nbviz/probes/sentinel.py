"""The non-finite sentinel: which layer first saw a NaN/Inf, and at which step.

It runs on every training step, not only on capture steps, and never makes the
host wait for the device: each watched output and each parameter gradient
contributes one sum (a sum is non-finite exactly when an element is, overflow
aside), or the sum of another when that one already tells
(:mod:`nbviz.probes.finite`). A step's sums are stacked into one row of a
preallocated device buffer (one op per step); the rows are folded into the
first bad step per slot, kept in a device tensor, every ``ROWS`` steps and
whenever the host reads it (at capture steps and on flush).
"""

from __future__ import annotations

import torch

#: Steps buffered on the device before they are folded into ``first_bad``.
ROWS = 32

_NEVER = torch.iinfo(torch.int64).max


class Sentinel:
    """Per slot, the first step counter at which a queued value was non-finite."""

    def __init__(self, n_slots: int, device: torch.device) -> None:
        self.n_slots = n_slots
        self.device = device
        self._first_bad = torch.full((n_slots,), -1, dtype=torch.int64, device=device)
        self._values: list[torch.Tensor] = []
        self._slots: list[int] = []
        self.reported: set[int] = set()
        # rows of stacked values, all for the same sequence of slots (``_key``)
        self._key: tuple[int, ...] | None = None
        self._buf: torch.Tensor | None = None
        self._rows: list[int] = []  # the step counter of each buffered row

    @property
    def first_bad(self) -> torch.Tensor:
        """Per slot, the first bad step counter, or -1 (folds what is buffered)."""
        self.fold()
        return self._first_bad

    def add(self, slot: int, value: torch.Tensor) -> None:
        """Queue one reduction (a 0-d tensor) for ``slot``."""
        self._values.append(value)
        self._slots.append(slot)

    def add_many(self, slots: list[int], values: list[torch.Tensor] | tuple) -> None:
        self._values.extend(values)
        self._slots.extend(slots)

    def commit(self, counter: int) -> None:
        """Store the queued values as the row of step counter ``counter`` (no host sync)."""
        values = self._values
        if not values:
            return
        key = tuple(self._slots)
        self._values, self._slots = [], []
        if key != self._key or self._buf is None or self._buf.device != values[0].device:
            # a new layout: the buffer takes the widest dtype of its values; a wider
            # value in a later row is rounded into it (a float64 too large for
            # float32 turns Inf: overflow aside, as for the sums)
            self.fold()
            dtype = torch.float32
            for v in values:
                dtype = torch.promote_types(dtype, v.dtype)
            if self._buf is None or len(key) != self._buf.shape[1] or self._buf.dtype != dtype:
                self._buf = torch.empty((ROWS, len(key)), dtype=dtype, device=values[0].device)
            self._key = key
        torch.stack(values, out=self._buf[len(self._rows)])
        self._rows.append(counter)
        if len(self._rows) == ROWS:
            self.fold()

    def fold(self) -> None:
        """Fold the buffered rows into ``first_bad`` (a handful of device ops)."""
        if not self._rows:
            return
        assert self._buf is not None and self._key is not None
        rows = self._buf[: len(self._rows)]
        device = self._first_bad.device
        counters = torch.tensor(self._rows, dtype=torch.int64, device=rows.device)
        never = torch.full((), _NEVER, dtype=torch.int64, device=rows.device)
        first = torch.where(torch.isfinite(rows), never, counters[:, None]).amin(dim=0)
        index = torch.tensor(self._key, dtype=torch.int64, device=device)
        per_slot = torch.full((self.n_slots,), _NEVER, dtype=torch.int64, device=device)
        per_slot.scatter_reduce_(0, index, first.to(device), "amin")
        fresh = (self._first_bad < 0) & (per_slot != _NEVER)
        self._first_bad = torch.where(fresh, per_slot, self._first_bad)
        self._rows.clear()
