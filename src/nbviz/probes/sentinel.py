"""The non-finite sentinel: which layer first saw a NaN/Inf, and at which step.

It runs on every training step, not only on capture steps, and never makes the
host wait for the device: each watched output contributes one sum (a sum is
non-finite exactly when an element is, overflow aside), parameter gradients one
batched norm, and the first bad step per slot is kept in a device tensor that the
host reads at capture steps and on flush.
"""

from __future__ import annotations

import torch


class Sentinel:
    def __init__(self, n_slots: int, device: torch.device) -> None:
        self.n_slots = n_slots
        self.device = device
        self.first_bad = torch.full((n_slots,), -1, dtype=torch.int64, device=device)
        self._values: list[torch.Tensor] = []
        self._slots: list[int] = []
        self._index_cache: dict[tuple[int, ...], torch.Tensor] = {}
        self.reported: set[int] = set()

    def add(self, slot: int, value: torch.Tensor) -> None:
        """Queue one reduction (a 0-d tensor) for ``slot``."""
        self._values.append(value)
        self._slots.append(slot)

    def add_many(self, slots: list[int], values: list[torch.Tensor] | tuple) -> None:
        self._values.extend(values)
        self._slots.extend(slots)

    def commit(self, counter: int) -> None:
        """Fold the queued values into ``first_bad`` with the step counter ``counter``."""
        if not self._values:
            return
        values = torch.stack([v.to(self.device, torch.float32) for v in self._values])
        bad = ~torch.isfinite(values)
        key = tuple(self._slots)
        if key == tuple(range(self.n_slots)):
            slot_bad = bad
        else:
            index = self._index_cache.get(key)
            if index is None:
                if len(self._index_cache) > 16:
                    self._index_cache.clear()
                index = torch.tensor(key, dtype=torch.int64, device=self.device)
                self._index_cache[key] = index
            slot_bad = torch.zeros(self.n_slots, dtype=torch.int32, device=self.device)
            slot_bad = slot_bad.index_add_(0, index, bad.int()) > 0
        self.first_bad.masked_fill_(slot_bad & (self.first_bad < 0), counter)
        self._values.clear()
        self._slots.clear()
