"""Each unit's top-activating tokens over a language model's evaluation pass.

For a layer whose output is ``(batch, tokens, features)`` (a transformer block's, an
MLP's hidden units), each feature is a unit: over every position of the pass that counts
(padding excluded: a target equal to ``ignore_index``, or a dict batch's mask False
there) the ``k`` positions where the unit was most active are kept, with the input token
ids around each. Everything is reduced on the device inside the forward hook: per batch
each sample's peak per unit, the ``k`` samples with the highest peaks (only they can hold
the batch's top ``k``), one ``topk`` over those samples' positions and one over the ``2k``
candidates kept so far, so memory and the host copy are ``units x k`` per layer whatever
the pass's length.

Non-finite activations: ``+inf`` is ranked as it is (above every finite value); NaN and
``-inf`` cannot be ranked and are never listed. Each unit counts its positions that
count and hold a non-finite value (``nonfinite``), so a unit that overflowed says so.
Padding is its own mask, never mistaken for an activation.

The layers' units together are bounded (``max_units``), layers whole, chosen once the
first batch has given every layer's width, by usefulness: the layer asked for by name
(``named``, matched by module identity) first, then the outputs of a stack's blocks (a
transformer's residual stream), then activation functions' outputs (an MLP's hidden
units), then the rest; within each, spread over the depth (first, last, middle, ...).
An ``nn.Embedding``'s output (a token's own vector, the same wherever it occurs) is left
out unless named, and so is a layer wider than ``max_units`` alone (a vocabulary-sized
head): no copy of its output is made (the first batch is reduced for every other layer,
before the choice). What is left out, and why, is in
:attr:`TopTokens.left_out` (the reasons' words:
:data:`nbviz.recording.unit_tokens.LEFT_OUT_REASONS`). The hooks are temporary:
:meth:`TopTokens.attach` returns handles the caller removes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from nbviz.probes.outputs import find_tensor

__all__ = ["LayerTopTokens", "TopTokens", "is_activation"]

_NOT_ACTIVATIONS = (nn.Softmax, nn.Softmin, nn.LogSoftmax, nn.Softmax2d, nn.MultiheadAttention)


def is_activation(module: nn.Module) -> bool:
    """Whether ``module`` is an activation function (``nn.GELU``, a library's own GELU): a
    leaf defined in an ``activation`` module, softmax and attention aside."""
    if any(True for _ in module.children()) or isinstance(module, _NOT_ACTIVATIONS):
        return False
    return "activation" in type(module).__module__


@dataclass
class LayerTopTokens:
    """One layer's result (see :mod:`nbviz.recording.unit_tokens` for how it is stored)."""

    name: str
    rows: np.ndarray  # int64 [units, k]: the sample's row in the pass, -1: none
    positions: np.ndarray  # int32 [units, k]
    values: np.ndarray  # float32 [units, k]; NaN where none, +inf as it was
    contexts: np.ndarray  # int32 [units, k, before + 1 + after]; -1 outside the sample
    nonfinite: np.ndarray  # int64 [units]: positions that count whose value was not finite


class _Best:
    """The running top ``k`` of one layer, units first: values, rows, positions, contexts,
    and each unit's count of non-finite values."""

    def __init__(self) -> None:
        self.values: torch.Tensor | None = None  # [units, k]
        self.rows: torch.Tensor | None = None
        self.positions: torch.Tensor | None = None
        self.contexts: torch.Tensor | None = None  # [units, k, width]
        self.nonfinite: torch.Tensor | None = None  # [units]
        self.skipped = False  # a batch whose output did not match its tokens

    def merge(self, part: tuple[torch.Tensor, ...], k: int) -> None:
        if self.values is None:
            self.values, self.rows, self.positions, self.contexts, self.nonfinite = part
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
        self.nonfinite = self.nonfinite + part[4]  # type: ignore[operator]


def _spread(n: int) -> list[int]:
    """``0 .. n-1`` in an order that covers the range evenly as it goes: the first, the
    last, the middle, the quarters, ... (layers taken in it are spread over the depth)."""
    order = list(range(min(n, 2)))
    if n > 2:
        order = [0, n - 1]
        spans = [(0, n - 1)]
        while spans:
            inner = [(a, b) for a, b in spans if b - a >= 2]
            order.extend((a + b) // 2 for a, b in inner)
            spans = [s for a, b in inner for s in ((a, (a + b) // 2), ((a + b) // 2, b))]
    return order


class TopTokens:
    """Top-activating tokens of each unit of some layers, over the batches of one pass.

    The pass calls :meth:`begin` before each batch's forward (which positions count,
    the input token ids, the batch's first row in the pass), then :meth:`commit` once
    the batch proved a language model's (or :meth:`discard`). ``named`` is the module
    asked for by name (``units_layer``); ``blocks`` the blocks of the model's stacks.
    """

    def __init__(
        self,
        modules: list[tuple[str, nn.Module]],
        k: int,
        before: int,
        after: int,
        max_units: int = 0,
        named: nn.Module | None = None,
        blocks: Sequence[nn.Module] = (),
    ) -> None:
        self.modules = modules
        self.k = int(k)
        self.before = int(before)
        self.after = int(after)
        self.max_units = int(max_units)
        self.named = named
        self.units_used = 0
        self.left_out: dict[str, str] = {}  # layer -> why: budget, width or embedding
        block_ids = {id(m) for m in blocks}
        self._tier = {
            name: 0
            if module is named
            else 1
            if id(module) in block_ids
            else 2
            if is_activation(module)
            else 3
            for name, module in modules
        }
        self._embedding = {
            name for name, m in modules if isinstance(m, nn.Embedding) and m is not named
        }
        self._widths: dict[str, int] = {}  # the first batch's layers, until the choice
        self._chosen = False
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
        if name in self.left_out or not self._wanted(name, units):
            return
        k = self.k
        where = counted.to(out.device)[..., None]
        x = torch.where(where, out.detach().float(), -torch.inf)  # a copy: the output is kept
        nonfinite = (where & ~torch.isfinite(x)).sum(
            (0, 1)
        )  # [units]: padding is -inf, not counted
        x = x.masked_fill_(x.isnan(), -torch.inf)  # NaN cannot be ranked; +inf is, as it is
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
        self._pending[name] = (
            top.values,
            rows_local + self._offset,
            positions,
            contexts,
            nonfinite,
        )

    def _wanted(self, name: str, units: int) -> bool:
        """Whether a batch's output of layer ``name`` is reduced: not left out, and (once
        the layers are chosen) taken, a layer first seen after the choice while it fits."""
        if name in self._taken:
            return True
        if name in self._embedding:
            self.left_out[name] = "embedding"
        elif units > self.max_units:
            self.left_out[name] = "width"
        elif not self._chosen:
            self._widths[name] = units  # a candidate until the first batch is committed
            return True
        elif self.units_used + units > self.max_units:
            self.left_out[name] = "budget"
        else:
            self._taken.add(name)
            self.units_used += units
            return True
        return False

    def _choose(self) -> None:
        """The layers kept: by tier, spread over the depth within one, while they fit."""
        order = list(self._widths)
        ranked: list[str] = []
        for tier in range(4):
            members = [name for name in order if self._tier.get(name, 3) == tier]
            ranked.extend(members[i] for i in _spread(len(members)))
        for name in ranked:
            units = self._widths[name]
            if self.units_used + units <= self.max_units:
                self._taken.add(name)
                self.units_used += units
            else:
                self.left_out[name] = "budget"
        self._widths.clear()
        self._chosen = True

    def commit(self) -> None:
        """Merge the batch's candidates into each layer's running top ``k`` (the first
        batch committed chooses the layers kept)."""
        if not self._chosen and self._pending:
            self._choose()
        for name, part in self._pending.items():
            if name in self._taken:
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
            # -inf: no position (padding, NaN or -inf only), fewer than k positions
            none = np.isneginf(values) | np.isnan(values)
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
            nonfinite = best.nonfinite.cpu().numpy().astype(np.int64)  # type: ignore[union-attr]
            out.append(LayerTopTokens(name, rows, positions, values, contexts, nonfinite))
        return out
