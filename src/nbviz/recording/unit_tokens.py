"""Each unit's top-activating tokens at a language model's evaluation, made into rows.

``Run.evaluate`` on a language model (``(N, T, V)`` outputs against ``(N, T)`` token
ids) keeps, for layers the run's probe watches on that model (and ``units_layer``)
whose output is ``(N, T, features)``, the :data:`TOP_TOKENS` positions where each
feature (unit) was most active over the positions that count (padding never), and the
input token ids around each: :data:`CONTEXT_BEFORE` ahead, :data:`CONTEXT_AFTER`
behind. One ``unit_tokens`` row per layer and evaluation, its arrays ``units x k`` (and
``x width`` for the contexts) whatever the pass's length.

The layers' units together are at most :data:`MAX_TOP_TOKEN_UNITS`, ``units_layer``
included, so an evaluation adds at most about 7 MiB. Layers are whole or left out,
chosen by usefulness (:mod:`nbviz.probes.unit_tokens`): ``units_layer`` first (matched
by module identity), then a stack's block outputs, then activation functions' outputs
(an MLP's hidden units), then the rest, each group spread over the depth; an
``nn.Embedding``'s output only as ``units_layer``; a layer wider than the whole bound
(a vocabulary-sized head) never, ``units_layer`` included (with a warning). The layers
left out of the split's last such evaluation, and why, are in
``meta[LEFT_OUT_KEY]`` (:func:`left_out_meta`). Each row holds:

- ``ids`` int64 ``(units, k)``: the sample id (-1 where a unit has fewer tokens);
- ``positions`` int32 ``(units, k)``: the token's position in its sample;
- ``values`` float32 ``(units, k)``: the unit's activation there, most active first
  (``+inf`` as it was; NaN where the unit has fewer tokens);
- ``contexts`` int32 ``(units, k, width)``: the input token ids from ``before``
  positions ahead of the token to ``width - before - 1`` behind it (-1 outside the
  sample, where the inputs were not token ids, or for an id past int32);
- ``nonfinite`` int64 ``(units,)``: each unit's positions that count where its
  activation was not finite (NaN and ``-inf`` are never ranked, ``+inf`` is).

The texts of the context tokens join ``meta["token_texts"]`` where the evaluation was
given a vocabulary (``tokens=``). Read back with ``Run.top_tokens``
(:mod:`nbviz.store.unit_tokens`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from nbviz.probes.unit_tokens import LayerTopTokens

__all__ = [
    "CONTEXT_AFTER",
    "CONTEXT_BEFORE",
    "LEFT_OUT_KEY",
    "LEFT_OUT_REASONS",
    "MAX_TOP_TOKEN_UNITS",
    "TOP_TOKENS",
    "context_ids",
    "left_out_meta",
    "unit_token_rows",
]

TOP_TOKENS = 8
"""Tokens kept per unit: the most active, over every position of an evaluation."""
CONTEXT_BEFORE = 6
"""Input tokens kept ahead of each top token."""
CONTEXT_AFTER = 3
"""Input tokens kept behind each top token."""
MAX_TOP_TOKEN_UNITS = 16384
"""Units of all layers together whose top tokens an evaluation keeps (8 x 56 bytes each)."""
LEFT_OUT_REASONS = {
    "budget": "its units did not fit in the units an evaluation keeps, spent on more useful layers",
    "width": "it alone has more units than an evaluation keeps",
    "embedding": "an embedding's output is each token's own vector, the same wherever it occurs",
}
"""Why a layer's top tokens were not kept: the reasons ``Evaluation.top_tokens_left_out`` gives."""
LEFT_OUT_KEY = "top_tokens_left_out"
"""The meta key of the layers left out of each split's last evaluation's top tokens."""


def left_out_meta(
    stored: Any, split: str, step: int, left_out: Mapping[str, str], max_units: int
) -> dict[str, Any]:
    """``meta[LEFT_OUT_KEY]`` after an evaluation of ``split`` at ``step`` that left out
    ``left_out`` (layer -> reason: ``budget``, ``width`` or ``embedding``) of
    ``max_units`` units: ``{split: {"step": step, "max_units": max_units, "layers":
    {layer: reason}}}``, a split without any dropped."""
    out = dict(stored) if isinstance(stored, dict) else {}
    if left_out:
        out[split] = {"step": int(step), "max_units": int(max_units), "layers": dict(left_out)}
    else:
        out.pop(split, None)
    return out


def unit_token_rows(
    step: int, split: str, layers: Sequence[LayerTopTokens], ids: np.ndarray, before: int
) -> list[tuple[Any, ...]]:
    """One ``unit_tokens`` row per layer: its pass rows turned into the samples' ``ids``."""
    ids = np.asarray(ids, dtype=np.int64)
    rows = []
    for layer in layers:
        found = layer.rows >= 0
        sample = np.where(found, ids[np.where(found, layer.rows, 0)], -1).astype("<i8")
        units, k, width = layer.contexts.shape
        rows.append(
            (
                split,
                int(step),
                layer.name,
                units,
                k,
                int(before),
                width,
                sample.tobytes(),
                np.asarray(layer.positions, dtype="<i4").tobytes(),
                np.asarray(layer.values, dtype="<f4").tobytes(),
                np.asarray(layer.contexts, dtype="<i4").tobytes(),
                np.asarray(layer.nonfinite, dtype="<i8").tobytes(),
            )
        )
    return rows


def context_ids(layers: Sequence[LayerTopTokens]) -> np.ndarray:
    """Every token id the layers' contexts hold (for their texts)."""
    parts = [np.unique(layer.contexts) for layer in layers]
    seen = np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
    return seen[seen >= 0]
