"""Each unit's top-activating tokens at a language model's evaluation, made into rows.

``Run.evaluate`` on a language model (``(N, T, V)`` outputs against ``(N, T)`` token
ids) keeps, for every layer the run's probe watches on that model (and ``units_layer``)
whose output is ``(N, T, features)``, the :data:`TOP_TOKENS` positions where each
feature (unit) was most active over the positions that count (padding never), and the
input token ids around each: :data:`CONTEXT_BEFORE` ahead, :data:`CONTEXT_AFTER`
behind. One ``unit_tokens`` row per layer and evaluation, its arrays ``units x k`` (and
``x width`` for the contexts) whatever the pass's length; the layers' units together at
most :data:`MAX_TOP_TOKEN_UNITS` (layers in the order their outputs arrive, each whole
or not at all; ``units_layer`` always), so an evaluation adds at most about 7 MiB:

- ``ids`` int64 ``(units, k)``: the sample id (-1 where a unit has fewer tokens);
- ``positions`` int32 ``(units, k)``: the token's position in its sample;
- ``values`` float32 ``(units, k)``: the unit's activation there, most active first;
- ``contexts`` int32 ``(units, k, width)``: the input token ids from ``before``
  positions ahead of the token to ``width - before - 1`` behind it (-1 outside the
  sample, where the inputs were not token ids, or for an id past int32).

The texts of the context tokens join ``meta["token_texts"]`` where the evaluation was
given a vocabulary (``tokens=``). Read back with ``Run.top_tokens``
(:mod:`nbviz.store.unit_tokens`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from nbviz.probes.unit_tokens import LayerTopTokens

__all__ = [
    "CONTEXT_AFTER",
    "CONTEXT_BEFORE",
    "MAX_TOP_TOKEN_UNITS",
    "TOP_TOKENS",
    "context_ids",
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
            )
        )
    return rows


def context_ids(layers: Sequence[LayerTopTokens]) -> np.ndarray:
    """Every token id the layers' contexts hold (for their texts)."""
    parts = [np.unique(layer.contexts) for layer in layers]
    seen = np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
    return seen[seen >= 0]
