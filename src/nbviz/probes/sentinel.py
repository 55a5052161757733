"""The non-finite sentinel: which layer first saw a NaN/Inf, and at which step.

It runs on every training step, not only on capture steps, and never makes the
host wait for the device: each watched output and each parameter gradient
contributes one sum (a sum is non-finite exactly when an element is, overflow
aside), or the sum of another when that one already tells
(:mod:`nbviz.probes.finite`). Small tensors (biases, norms' scales) are summed
together, one segment sum for all of them; a parameter read for a layer's
check is summed with the others when the forward ends. A step's sums are only
queued when the step ends (no op at all); every ``ROWS`` steps, and whenever
the host reads it (at capture steps and on flush), the queued rows are stacked
and folded into the first bad step per slot, kept in a device tensor.
"""

from __future__ import annotations

import torch

from nbviz.probes import finite

#: Steps queued before they are folded into ``first_bad`` (in one stack).
ROWS = 32
#: Tensors of at most this many elements are summed together, in one op.
SMALL = 4096

_NEVER = torch.iinfo(torch.int64).max
_STRIDED = torch.strided

#: A committed step: (counter, slots of its values, values (0-d), slots of its
#: vectors' elements, vectors (1-d: one sum per element)).
Row = tuple[int, list[int], list[torch.Tensor], list[int], list[torch.Tensor]]


class Sentinel:
    """Per slot, the first step counter at which a queued value was non-finite."""

    def __init__(self, n_slots: int, device: torch.device) -> None:
        self.n_slots = n_slots
        self.device = device
        self._first_bad = torch.full((n_slots,), -1, dtype=torch.int64, device=device)
        self._values: list[torch.Tensor] = []
        self._slots: list[int] = []
        self._vectors: list[torch.Tensor] = []
        self._vector_slots: list[int] = []
        self._pending: list[tuple[int, torch.Tensor]] = []  # (slot, tensor) to sum
        self.reported: set[int] = set()
        self._rows: list[Row] = []  # committed steps not yet folded
        self._lengths: dict[tuple[int, ...], torch.Tensor] = {}  # segment lengths, cached
        self._layout: tuple[list[int], list[int]] = ([], [])  # the slots of the cached index
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

    def add_all(self, slot: int, values: tuple[torch.Tensor, ...]) -> None:
        """Queue several values for one ``slot`` (it is bad where any is): reductions,
        or parameters, summed at the next :meth:`resolve`."""
        for value in values:
            if type(value) is torch.Tensor:
                self._values.append(value)
                self._slots.append(slot)
            else:
                self._pending.append((slot, value))

    def resolve(self) -> None:
        """Sum the parameters queued by :meth:`add_all`, together."""
        if self._pending:
            pending, self._pending = self._pending, []
            self.add_sums([s for s, _ in pending], [p for _, p in pending])

    def add_sums(self, slots: list[int], tensors: list[torch.Tensor]) -> None:
        """Queue the sum of each tensor for its slot: the small ones in one op, each
        other tensor once however many slots it is for. Empty tensors tell nothing."""
        small_slots: list[int] = []
        small: list[torch.Tensor] = []
        sums: dict[int, torch.Tensor] = {}
        for slot, x in zip(slots, tensors):
            n = x.numel()
            if n <= SMALL:
                if not n:
                    continue
                if x.layout is _STRIDED:
                    small_slots.append(slot)
                    small.append(x)
                    continue
            value = sums.get(id(x))
            if value is None:
                value = sums[id(x)] = finite.checksum(x)
            self._values.append(value)
            self._slots.append(slot)
        if len(small) > 1:
            key = tuple(x.numel() for x in small)
            lengths = self._lengths.get(key)
            if lengths is None:
                if len(self._lengths) > 16:  # layouts that keep changing
                    self._lengths.clear()
                lengths = torch.tensor(key, device=small[0].device)
                self._lengths[key] = lengths
            try:
                self._vectors.append(finite.segment_sums(small, lengths))
            except RuntimeError:  # several devices, or a dtype a segment sum lacks
                self.add_many(small_slots, [finite.checksum(x) for x in small])
            else:
                self._vector_slots.extend(small_slots)
        elif small:
            self.add(small_slots[0], finite.checksum(small[0]))

    def commit(self, counter: int) -> None:
        """Close the row of step counter ``counter`` (no op on the device, no host sync)."""
        self.resolve()
        if not self._values and not self._vectors:
            return
        row = (counter, self._slots, self._values, self._vector_slots, self._vectors)
        self._rows.append(row)
        self._values, self._slots, self._vectors, self._vector_slots = [], [], [], []
        if len(self._rows) >= ROWS:
            self.fold()

    def fold(self) -> None:
        """Fold the committed rows into ``first_bad`` (a handful of device ops)."""
        rows, self._rows = self._rows, []
        if not rows:
            return
        device = self._first_bad.device
        # one flat vector: the rows' values, then their vectors (stack and cat promote
        # to the widest dtype: a float64 too large for float32 stays what it is)
        parts = [_joined(torch.stack, [v for r in rows for v in r[2]], device)]
        if any(r[4] for r in rows):
            parts.append(_joined(torch.cat, [v for r in rows for v in r[4]], device))
        flat = parts[0] if len(parts) == 1 else _joined(torch.cat, parts, device)
        layout = (rows[0][1], rows[0][3])
        if all(r[1] == layout[0] and r[3] == layout[1] for r in rows):
            # the common case, every step checked the same slots: one column per slot
            # value, the values of all rows first, then their vectors
            if layout != self._layout:
                self._layout = layout
                self._index = torch.tensor(layout[0] + layout[1], dtype=torch.int64, device=device)
            index = self._index
            counters = torch.tensor([r[0] for r in rows], dtype=torch.int64, device=device)
            n, k = len(rows), len(layout[0])
            scalars = flat[: n * k].view(n, k)
            bad = torch.where(torch.isfinite(scalars), _NEVER, counters[:, None]).amin(dim=0)
            if layout[1]:
                vectors = flat[n * k :].view(n, -1)
                bad_v = torch.where(torch.isfinite(vectors), _NEVER, counters[:, None])
                bad = torch.cat([bad, bad_v.amin(dim=0)])
        else:
            slots = [s for r in rows for s in r[1]] + [s for r in rows for s in r[3]]
            index = torch.tensor(slots, dtype=torch.int64, device=device)
            counters = torch.tensor(
                [r[0] for r in rows for _ in r[1]] + [r[0] for r in rows for _ in r[3]],
                dtype=torch.int64,
                device=device,
            )
            bad = torch.where(torch.isfinite(flat), _NEVER, counters)
        per_slot = torch.full((self.n_slots,), _NEVER, dtype=torch.int64, device=device)
        per_slot.scatter_reduce_(0, index, bad, "amin")
        fresh = (self._first_bad < 0) & (per_slot != _NEVER)
        self._first_bad = torch.where(fresh, per_slot, self._first_bad)


def _joined(op, tensors: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    """``op`` (stack or cat) of ``tensors``, on ``device``; an empty list: nothing."""
    if not tensors:
        return torch.zeros(0, device=device)
    try:
        return op(tensors).to(device)
    except RuntimeError:  # a model spread over several devices
        return op([t.to(device) for t in tensors])
