"""A language model's sample as the gallery shows it: its tokens, each with its loss and
the model's top predictions there (``run.token_losses``; :mod:`nbviz.store.tokens`).

The colour scale is shared by every card of one evaluation, so that a token's colour
means the same loss in every card: from 0 to the 99th percentile of the finite losses
of the samples kept (:func:`loss_scale`). Only the tokens of the page in view travel,
with the texts of the ids they name.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbviz.widgets.per_evaluation import PerEvaluation
from nbviz.widgets.wire import array_trait_payload

__all__ = ["CARD_TOKENS", "DETAIL_TOKENS", "TOKEN_CSS", "SampleTokens", "loss_scale"]

CARD_TOKENS = 64
"""Tokens shown on a card (the rest are counted; the detail shows more)."""
DETAIL_TOKENS = 2048
"""Tokens shown in a sample's detail."""

TOKEN_CSS = """
.nbviz-gallery-body { position: relative; }
.nbviz-tokens { font-family: var(--jp-code-font-family, monospace); font-size: 0.9em;
  line-height: 1.7; display: flex; flex-wrap: wrap; align-items: baseline; }
.nbviz-token { white-space: pre; padding: 0 2px; margin: 0 1px; border-radius: 2px;
  cursor: default; }
.nbviz-token-pad { color: var(--jp-ui-font-color3, #9e9e9e); }
.nbviz-token-nonfinite { outline: 1px dashed #000; }
.nbviz-token-pinned { outline: 2px solid var(--jp-brand-color1, #1976d2); }
.nbviz-gallery-card .nbviz-tokens { max-height: 9em; overflow: auto; }
.nbviz-gallery-token-box { display: flex; flex-direction: column; gap: 6px; flex: 1 1 420px;
  min-width: 0; }
.nbviz-gallery-detail-tokens { max-height: 24em; overflow: auto; }
.nbviz-token-legend { display: flex; align-items: center; gap: 4px; font-size: 0.85em;
  flex-wrap: wrap; }
.nbviz-token-legend-ramp { display: inline-block; width: 120px; height: 10px;
  border: 1px solid var(--jp-border-color2, #e0e0e0); }
.nbviz-token-tip { position: absolute; z-index: 10; min-width: 160px; max-width: 320px;
  background: var(--jp-layout-color1, #fff); border: 1px solid var(--jp-border-color1, #bdbdbd);
  border-radius: 4px; padding: 4px 6px; box-shadow: 0 2px 6px rgba(0, 0, 0, 0.2);
  font-size: 0.85em; pointer-events: none; }
.nbviz-token-head { font-weight: 600; white-space: pre-wrap; overflow-wrap: anywhere; }
.nbviz-token-top { display: flex; align-items: center; gap: 4px; white-space: pre; }
.nbviz-token-top-text { font-family: var(--jp-code-font-family, monospace); min-width: 4em; }
.nbviz-token-top-bar { display: inline-block; height: 8px;
  background: var(--jp-brand-color1, #1976d2); }
.nbviz-token-hit .nbviz-token-top-text { font-weight: 700; text-decoration: underline; }
.nbviz-token-info { font-size: 0.9em; }
"""
"""The gallery's styles of tokens, their legend and their hover tip."""


def loss_scale(losses: np.ndarray, counted: np.ndarray) -> dict[str, Any]:
    """The colour scale's domain ``{lo, hi}`` and how many counted losses are non-finite."""
    values = np.asarray(losses, dtype=np.float64)[np.asarray(counted, dtype=bool)]
    finite = values[np.isfinite(values)]
    hi = float(np.percentile(finite, 99)) if finite.size else 1.0
    return {"lo": 0.0, "hi": hi if hi > 0 else 1.0, "nonfinite": int(values.size - finite.size)}


class SampleTokens(PerEvaluation):
    """The per-token arrays of a few evaluations, read once each, for cards and details."""

    def _read(self, split: str, at: int) -> Any:
        got = self._run.token_evaluation(at, split)
        if got is None:
            return None
        where = {int(i): k for k, i in enumerate(got.ids)}
        return got, where, loss_scale(got.losses, got.counted), self._run.token_texts()

    def scale(self, split: str, at: int | None) -> dict[str, Any] | None:
        """The evaluation's colour scale (None where it holds no per-token losses)."""
        kept = self._kept(split, int(at)) if at is not None else None
        return None if kept is None else dict(kept[2])

    def counted(self, split: str, at: int | None, id: int) -> int | None:
        """How many of sample ``id``'s positions count at the evaluation ``at`` (None
        where its tokens were not kept)."""
        kept = self._kept(split, int(at)) if at is not None else None
        if kept is None or id not in kept[1]:
            return None
        return int(np.count_nonzero(kept[0].counted[kept[1][id]]))

    def payload(
        self, split: str, at: int | None, id: int, limit: int = CARD_TOKENS
    ) -> dict[str, Any] | None:
        """Sample ``id``'s tokens at the evaluation ``at``: ``token_ids``, ``loss`` (NaN at
        padding), ``padding``, ``top_ids``, ``top_probs`` (first ``limit`` positions),
        ``texts`` (id -> text for those ids), ``more`` (positions not sent), ``nonfinite``
        (this sample's non-finite losses), ``counted`` (its positions that count, all
        of them), ``scale``; None where none was kept."""
        kept = self._kept(split, int(at)) if at is not None else None
        if kept is None:
            return None
        got, where, scale, known = kept
        if id not in where:
            return None
        k = where[id]
        t = got.losses.shape[1]
        n = min(t, limit)
        counted = got.counted[k, :n]
        targets = np.maximum(got.targets[k, :n].astype(np.int64), -1)  # no token: -1
        top_ids = got.top_ids[k, :n].astype(np.int64)
        loss = np.where(counted, got.losses[k, :n], np.nan).astype(np.float32)
        every = got.losses[k][got.counted[k]]
        ids = np.unique(np.concatenate([targets.ravel(), top_ids.ravel()]))
        texts = {str(int(i)): known.get(int(i), str(int(i))) for i in ids if i >= 0}
        return {
            "token_ids": array_trait_payload(targets, dtype="<i4"),
            "loss": array_trait_payload(loss),
            "padding": array_trait_payload(~counted),
            "top_ids": array_trait_payload(top_ids, dtype="<i4"),
            "top_probs": array_trait_payload(got.top_probs[k, :n].astype(np.float32)),
            "texts": texts,
            "more": int(t - n),
            "nonfinite": int(np.count_nonzero(~np.isfinite(every))),
            "counted": int(every.size),
            "scale": dict(scale),
        }
