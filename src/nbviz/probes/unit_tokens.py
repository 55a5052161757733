"""Each unit's top-activating tokens over a language model's evaluation pass.

For a layer whose output is ``(batch, tokens, features)`` (a transformer block's, an
MLP's hidden units), each feature is a unit: over every position of the pass that counts
(padding excluded: a target equal to ``ignore_index``, or a dict batch's mask False
there) the ``k`` positions where the unit was most active are kept, with the input token
ids around each. Everything is reduced on the device inside the forward hook: per batch
each sample's peak per unit, the ``k`` samples with the highest peaks (only they can hold
the batch's top ``k``), one ``topk`` over those samples' positions and one over the ``2k``
candidates kept so far, so memory and the host copy are ``units x k`` per layer whatever
the pass's length. The
layers' units together are bounded (``max_units``): layers are taken in the order their
outputs first arrive, whole, while they fit (a layer asked for by name is always taken).
The hooks are temporary: :meth:`TopTokens.attach` returns handles the caller removes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from nbviz.probes.outputs import find_tensor

__all__ = ["LayerTopTokens", "TopTokens"]


@dataclass
class LayerTopTokens:
    """One layer's result (see :mod:`nbviz.recording.unit_tokens` for how it is stored)."""

    name: str
    rows: np.ndarray  # int64 [units, k]: the sample's row in the pass, -1: none
    positions: np.ndarray  # int32 [units, k]
    values: np.ndarray  # float32 [units, k]; NaN where none
    contexts: np.ndarray  # int32 [units, k, before + 1 + after]; -1 outside the sample


class _Best:
    """The running top ``k`` of one layer, units first: values, rows, positions, contexts."""

    def __init__(self) -> None:
        self.values: torch.Tensor | None = None  # [units, k]
        self.rows: torch.Tensor | None = None
        self.positions: torch.Tensor | None = None
        self.contexts: torch.Tensor | None = None  # [units, k, width]
        self.skipped = False  # a batch whose output did not match its tokens

    def merge(self, part: tuple[torch.Tensor, ...], k: int) -> None:
        if self.values is None:
            self.values, self.rows, self.positions, self.contexts = part
            return
        if part[0].shape[0] != self.values.shape[0]:
            self.skipped = True
            return
        values = torch.cat([self.values, part[0]], dim=1)
        top = values.topk(min(k, values.shape[1]), dim=1)
        pick = top.indices
        self.values = top.values
        self.rows = torch.cat([self.rows, part[1]], dim=1).gather(1, pick)  # type: ignore[list-item]
        self.positions = torch.cat([self.positions, part[2]], dim=1).gather(1, pick)  # type: ignore[list-item]
        contexts = torch.cat([self.contexts, part[3]], dim=1)  # type: ignore[list-item]
        self.contexts = contexts.gather(1, pick[..., None].expand(-1, -1, contexts.shape[2]))


class TopTokens:
    """Top-activating tokens of each unit of some layers, over the batches of one pass.

    The pass calls :meth:`begin` before each batch's forward (which positions count,
    the input token ids, the batch's first row in the pass), then :meth:`commit` once
    the batch proved a language model's (or :meth:`discard`).
    """

    def __init__(
        self,
        modules: list[tuple[str, nn.Module]],
        k: int,
        before: int,
        after: int,
        max_units: int = 0,
        always: tuple[str, ...] = (),
    ) -> None:
        self.modules = modules
        self.k = int(k)
        self.before = int(before)
        self.after = int(after)
        self.max_units = int(max_units)
        self.always = set(always)
        self.units_used = 0
        self.left_out: list[str] = []  # layers past the budget of units
        self._taken: set[str] = set()
        self._best = {name: _Best() for name, _ in modules}
        self._pending: dict[str, tuple[torch.Tensor, ...]] = {}
        self._counted: torch.Tensor | None = None
        self._padded: torch.Tensor | None = None
        self._offset = 0

    def attach(self) -> list[Any]:
        """Forward hooks on every module (the caller removes the handles)."""
        handles = []
        for name, module in self.modules:

            def hook(module: nn.Module, args: Any, output: Any, name: str = name) -> None:
                self._take(name, output)

            handles.append(module.register_forward_hook(hook))
        return handles

    def begin(self, counted: torch.Tensor | None, inputs: Any, offset: int) -> None:
        """The next batch: ``counted`` (N, T) True where a position counts (None: not a
        language model's batch), ``inputs`` its token ids where they are (N, T)."""
        self._pending.clear()
        self._counted = counted
        self._offset = int(offset)
        self._padded = None
        if counted is None:
            return
        n, t = counted.shape
        width = self.before + 1 + self.after
        padded = torch.full((n, t + width - 1), -1, dtype=torch.long, device=counted.device)
        if (
            isinstance(inputs, torch.Tensor)
            and tuple(inputs.shape) == (n, t)
            and not inputs.is_floating_point()
            and not inputs.is_complex()
        ):
            padded[:, self.before : self.before + t] = inputs.to(counted.device).long()
        self._padded = padded

    def _take(self, name: str, output: Any) -> None:
        counted = self._counted
        if counted is None or self.k <= 0:
            return
        _, out = find_tensor(output)
        n, t = counted.shape
        if (
            out is None
            or out.ndim != 3
            or tuple(out.shape[:2]) != (n, t)
            or not out.is_floating_point()
            or out.shape[2] == 0
        ):
            return
        units = int(out.shape[2])
        if name in self.left_out:
            return
        if name not in self._taken:
            if name not in self.always and self.units_used + units > self.max_units:
                self.left_out.append(name)
                return
            self._taken.add(name)
            self.units_used += units
        k = self.k
        x = torch.where(counted.to(out.device)[..., None], out.detach().float(), -torch.inf)
        x = x.nan_to_num_(-torch.inf, -torch.inf, -torch.inf)  # a copy: the output is kept
        if n > k:  # only the k samples with the highest peaks can hold the top k
            samples = x.amax(1).topk(k, dim=0).indices  # [k, units]
            x = x.gather(0, samples[:, None, :].expand(k, t, units))
            samples = samples.t()
        else:
            samples = torch.arange(n, device=x.device).expand(units, n)
        top = x.permute(2, 0, 1).reshape(units, -1).topk(min(k, x.shape[0] * t), dim=1)
        rows_local = samples.gather(1, top.indices // t)
        positions = top.indices % t
        padded = self._padded
        assert padded is not None
        width = padded.shape[1] - t + 1
        cols = positions[..., None] + torch.arange(width, device=x.device)  # [units, k, w]
        contexts = padded.to(x.device)[rows_local[..., None], cols]
        self._pending[name] = (top.values, rows_local + self._offset, positions, contexts)

    def commit(self) -> None:
        """Merge the batch's candidates into each layer's running top ``k``."""
        for name, part in self._pending.items():
            self._best[name].merge(part, self.k)
        self.discard()

    def discard(self) -> None:
        self._pending.clear()
        self._counted = None
        self._padded = None

    def result(self) -> list[LayerTopTokens]:
        """Each layer that gave ``(batch, tokens, features)`` outputs: its top tokens, on
        the host (one copy per layer, at the end of the pass)."""
        out = []
        for name, _ in self.modules:
            best = self._best[name]
            if best.values is None or best.skipped:
                continue
            values = best.values.cpu().numpy().astype(np.float32)
            rows = best.rows.cpu().numpy().astype(np.int64)  # type: ignore[union-attr]
            positions = best.positions.cpu().numpy().astype(np.int32)  # type: ignore[union-attr]
            contexts = best.contexts.cpu().numpy()  # type: ignore[union-attr]
            none = ~np.isfinite(values)  # -inf: padding alone, fewer than k positions
            rows[none], positions[none], values[none] = -1, -1, np.nan
            # a token id past int32 (no vocabulary is that large) is not shown
            contexts = np.where(contexts > np.iinfo(np.int32).max, -1, contexts).astype(np.int32)
            contexts[none] = -1
            if self.k > values.shape[1]:  # fewer positions in the whole pass than k
                pad = self.k - values.shape[1]
                values = np.pad(values, ((0, 0), (0, pad)), constant_values=np.nan)
                rows = np.pad(rows, ((0, 0), (0, pad)), constant_values=-1)
                positions = np.pad(positions, ((0, 0), (0, pad)), constant_values=-1)
                contexts = np.pad(contexts, ((0, 0), (0, pad), (0, 0)), constant_values=-1)
            out.append(LayerTopTokens(name, rows, positions, values, contexts))
        return out
