"""The non-finite sentinel: which layer first saw a NaN/Inf, and at which step.

It runs on every training step, not only on capture steps, and never makes the
host wait for the device: each watched output and each parameter gradient
contributes one sum (a sum is non-finite exactly when an element is, overflow
aside), or the sum of another when that one already tells
(:mod:`nbviz.probes.finite`). A step's sums are only queued when the step ends
(no op at all); every ``ROWS`` steps, and whenever the host reads it (at capture
steps and on flush), the queued rows are stacked in one op and folded into the
first bad step per slot, kept in a device tensor.
"""

from __future__ import annotations

import torch

#: Steps queued before they are folded into ``first_bad`` (in one stack).
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
        # committed steps not yet folded: (counter, slots, values)
        self._rows: list[tuple[int, list[int], list[torch.Tensor]]] = []
        self._layout: list[int] = []  # the slots of the cached index
        self._index = torch.zeros(0, dtype=torch.int64, device=device)

    @property
    def first_bad(self) -> torch.Tensor:
        """Per slot, the first bad step counter, or -1 (folds what is queued)."""
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
        """Close the row of step counter ``counter`` (no op on the device, no host sync)."""
        if not self._values:
            return
        self._rows.append((counter, self._slots, self._values))
        self._values, self._slots = [], []
        if len(self._rows) >= ROWS:
            self.fold()

    def fold(self) -> None:
        """Fold the committed rows into ``first_bad`` (a handful of device ops)."""
        rows, self._rows = self._rows, []
        if not rows:
            return
        device = self._first_bad.device
        values = [v for _, _, vs in rows for v in vs]
        # one flat vector (stack promotes to the widest dtype: a float64 too large
        # for float32 stays what it is)
        try:
            flat = torch.stack(values).to(device)
        except RuntimeError:  # a model spread over several devices
            flat = torch.stack([v.to(device) for v in values])
        layout = rows[0][1]
        if all(slots == layout for _, slots, _ in rows):
            # the common case, every step checked the same slots: one row per step
            if layout != self._layout:
                self._layout = layout
                self._index = torch.tensor(layout, dtype=torch.int64, device=device)
            index = self._index
            counters = torch.tensor([c for c, _, _ in rows], dtype=torch.int64, device=device)
            bad = torch.where(torch.isfinite(flat.view(len(rows), -1)), _NEVER, counters[:, None])
            bad = bad.amin(dim=0)
        else:
            index = torch.tensor([s for _, slots, _ in rows for s in slots], device=device)
            counters = torch.tensor(
                [c for c, slots, _ in rows for _ in slots], dtype=torch.int64, device=device
            )
            bad = torch.where(torch.isfinite(flat), _NEVER, counters)
        per_slot = torch.full((self.n_slots,), _NEVER, dtype=torch.int64, device=device)
        per_slot.scatter_reduce_(0, index, bad, "amin")
        fresh = (self._first_bad < 0) & (per_slot != _NEVER)
        self._first_bad = torch.where(fresh, per_slot, self._first_bad)
