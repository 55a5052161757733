"""The probe's attention capture: its probe batch, its tokens, and the rows it writes.

``run.watch(model, attention=probe_batch, tokens=...)``: ``probe_batch`` is what
the model takes (a tensor, a tuple of positional arguments, or a dict of keyword
arguments), at most :data:`~nbviz.probes.attention.MAX_SAMPLES` samples along
the first dimension (more are cut, with a note). ``tokens`` labels each sample's
positions for the view: a list (per sample) of lists of strings, or a callable
mapping a token id to its text; by default, a probe batch whose first tensor
holds integers (token ids) is labelled with the ids themselves. With a callable
or by default, every other ``(samples, tokens)`` tensor of integers in the batch
(an encoder-decoder's ``decoder_input_ids``; not a mask, token types or positions)
is labelled too (the meta's ``token_sets``): the view labels each map's queries and
keys with the sequence of their length.

At every histogram step (``hist_every``) the maps are recorded once the step's
update is done (see :mod:`nbviz.probes.attention` for how, and for the cost):
one ``attention`` row per layer, and the meta ``attention`` says what the
samples are.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from nbviz.probes.attention import (
    MAX_SAMPLES,
    MAX_TOKENS,
    AttentionCall,
    head_statistics,
    record_attention,
)

__all__ = ["AttentionCapture"]


def _first_tensor(inputs: Any) -> torch.Tensor | None:
    if isinstance(inputs, torch.Tensor):
        return inputs
    values = inputs.values() if isinstance(inputs, dict) else inputs
    return next((v for v in values if isinstance(v, torch.Tensor)), None)


def _cut(inputs: Any, n: int) -> Any:
    """The first ``n`` samples of every tensor in ``inputs`` (other values as they are)."""

    def cut(v: Any) -> Any:
        return v[:n] if isinstance(v, torch.Tensor) and v.dim() else v

    if isinstance(inputs, dict):
        return {k: cut(v) for k, v in inputs.items()}
    if isinstance(inputs, tuple):
        return tuple(cut(v) for v in inputs)
    return cut(inputs)


def _to(inputs: Any, device: torch.device) -> Any:
    def move(v: Any) -> Any:
        return v.detach().to(device) if isinstance(v, torch.Tensor) else v

    if isinstance(inputs, dict):
        return {k: move(v) for k, v in inputs.items()}
    if isinstance(inputs, tuple):
        return tuple(move(v) for v in inputs)
    return move(inputs)


def _token_texts(first: torch.Tensor, tokens: Any) -> list[list[str]] | None:
    """Per sample, the text of each position (None when nothing names them)."""
    if tokens is None:
        if first.dtype.is_floating_point or first.dim() != 2:
            return None
        return [[str(int(t)) for t in row] for row in first.tolist()]
    if callable(tokens):
        if first.dtype.is_floating_point or first.dim() != 2:
            raise ValueError(
                "watch: tokens= a callable maps token ids to text, but the probe batch's "
                f"first tensor is {first.dtype} of shape {tuple(first.shape)}, not (samples, "
                "tokens) integer ids; pass tokens= as a list of lists of strings"
            )
        return [[str(tokens(int(t))) for t in row] for row in first.tolist()]
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(
            "watch: tokens must be a list (per sample) of lists of strings, or a callable "
            f"mapping a token id to text; got {type(tokens).__name__}"
        )
    out = []
    for i, row in enumerate(tokens):
        if isinstance(row, str) or not isinstance(row, Sequence):
            raise TypeError(
                f"watch: tokens[{i}] must be a list of strings, got {type(row).__name__}"
            )
        out.append([str(t) for t in row])
    return out


#: Keyword arguments of a batch that hold integers per position but are no token ids.
_NOT_IDS = ("mask", "type", "position", "label")


def _integer_sequences(inputs: Any, first: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """The ``(samples, tokens)`` tensors of token ids in a probe batch, named by key or
    position: ``first`` (the batch's first tensor, labelled already), and integers, not
    only 0 and 1 (a mask), not under a name that says they are something else
    (``attention_mask``, ``token_type_ids``, ``position_ids``, labels)."""
    if isinstance(inputs, torch.Tensor):
        items: list[tuple[str, Any]] = [("0", inputs)]
    elif isinstance(inputs, dict):
        items = [(str(k), v) for k, v in inputs.items()]
    else:
        items = [(str(i), v) for i, v in enumerate(inputs)]
    return [
        (name, v)
        for name, v in items
        if v is first or (isinstance(v, torch.Tensor) and _holds_ids(name, v))
    ]


def _holds_ids(name: str, v: torch.Tensor) -> bool:
    return (
        v.dim() == 2
        and not v.dtype.is_floating_point
        and not v.dtype.is_complex
        and v.dtype is not torch.bool
        and not any(word in name.lower() for word in _NOT_IDS)
        and bool(((v != 0) & (v != 1)).any())
    )


class AttentionCapture:
    """A probe's attention maps of one probe batch (see the module docstring)."""

    def __init__(self, model: nn.Module, inputs: Any, tokens: Any, prefix: str) -> None:
        first = _first_tensor(inputs)
        if first is None or first.dim() == 0:
            raise TypeError(
                "watch: attention= takes the probe batch the model is called with (a tensor, "
                "a tuple of arguments or a dict of keyword arguments, samples along the first "
                f"dimension), got {type(inputs).__name__}"
            )
        self.notes: list[str] = []
        n = first.shape[0]
        if n > MAX_SAMPLES:
            self.notes.append(f"attention: the first {MAX_SAMPLES} of {n} probe samples recorded")
            inputs = _cut(inputs, MAX_SAMPLES)
            first = _first_tensor(inputs)
            assert first is not None
        if first.dim() >= 2 and first.shape[1] > MAX_TOKENS:
            raise ValueError(
                f"watch: attention= probe batch has {first.shape[1]} tokens per sample; "
                f"attention maps are recorded for at most {MAX_TOKENS} (cut the probe batch)"
            )
        device = next((p.device for p in model.parameters()), torch.device("cpu"))
        self.inputs = _to(inputs, device)
        texts = _token_texts(first, tokens)
        if texts is not None:
            texts = texts[: first.shape[0]]
        self.tokens = texts
        # each sequence of ids in the batch, labelled alike (given texts name the first only)
        self.token_sets: list[dict[str, Any]] = []
        if texts is not None and (tokens is None or callable(tokens)):
            for name, ids in _integer_sequences(inputs, first):
                labelled = texts if ids is first else _token_texts(ids, tokens)
                if labelled is not None:
                    self.token_sets.append({"name": name, "tokens": labelled[: first.shape[0]]})
        elif texts is not None:
            self.token_sets.append({"name": "tokens", "tokens": texts})
        self.samples = int(first.shape[0])
        self.prefix = prefix
        self._names = {id(m): prefix + n for n, m in model.named_modules() if n}
        self._positions: dict[str, int] = {}
        self._heads: dict[str, int] = {}
        self._kinds: dict[str, str] = {}

    def meta(self) -> dict[str, Any]:
        """What the ``attention`` meta says: the samples, their tokens, the layers seen."""
        return {
            "samples": self.samples,
            "tokens": self.tokens,
            "token_sets": self.token_sets,
            "layers": sorted(self._positions, key=self._positions.__getitem__),
            "heads": self._heads,
            "kinds": self._kinds,
            "notes": self.notes,
        }

    def record(self, model: nn.Module, step: int) -> tuple[list[tuple], bool]:
        """The ``attention`` rows of one capture at ``step``, and whether new layers showed."""
        calls = record_attention(model, self.inputs, self._names)
        rows = []
        grew = False
        for call in calls:
            if call.layer not in self._positions:
                self._positions[call.layer] = len(self._positions)
                self._heads[call.layer] = int(call.weights.shape[1])
                self._kinds[call.layer] = call.kind
                grew = True
            rows.append(self._row(call, step))
        return rows, grew

    def _row(self, call: AttentionCall, step: int) -> tuple:
        weights = call.weights[: self.samples]
        stats = head_statistics(
            weights,
            None if call.output is None else call.output[: self.samples],
            None if call.seen is None else call.seen[: self.samples],
        )
        maps = weights.to(torch.float16).cpu().numpy().astype("<f2")
        return (
            int(step),
            call.layer,
            self._positions[call.layer],
            maps.tobytes(),
            "<f2",
            json.dumps(list(maps.shape)),
            np.ascontiguousarray(stats, dtype="<f4").tobytes(),
        )


def attention_capture(
    model: nn.Module, attention: Any, tokens: Any, prefix: str
) -> AttentionCapture | None:
    """The probe's capture for ``attention=`` (None when not asked for)."""
    if attention is None:
        if tokens is not None:
            raise ValueError(
                "watch: tokens= labels the attention= probe batch; pass attention= too"
            )
        return None
    return AttentionCapture(model, attention, tokens, prefix)
