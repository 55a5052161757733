"""Read queries on a language model's per-token evaluation: each position's loss and the
model's top predictions there (stored in ``outputs`` with ``targets_from = "tokens"``; the
layout is in :mod:`nbviz.recording.tokens`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
import pandas as pd

from nbviz.store.errors import StoredValueError
from nbviz.store.query import ReaderBase

__all__ = ["TOKEN_COLUMNS", "TokenEvaluation", "TokenQueries"]

TOKEN_COLUMNS = (
    "id",
    "position",
    "token_id",
    "token",
    "loss",
    "padding",
    "top_ids",
    "top_tokens",
    "top_probs",
)


class TokenEvaluation(NamedTuple):
    """One evaluation's per-token arrays, for the samples in ``ids`` (first samples kept)."""

    ids: np.ndarray  # int64 [n]
    losses: np.ndarray  # float32 [n, T]; 0 at padding
    targets: np.ndarray  # int [n, T], as given (ignore_index kept)
    counted: np.ndarray  # bool [n, T]; False for padding
    top_ids: np.ndarray  # int [n, T, k]
    top_probs: np.ndarray  # float32 [n, T, k]


class TokenQueries(ReaderBase):
    """Per-token losses and top predictions of a language model's evaluations."""

    def token_evaluation(self, step: int, split: str = "val") -> TokenEvaluation | None:
        """The per-token arrays of the evaluation at ``step`` (None: not a per-token one).

        Only ``targets_from`` is read first: another model's outputs (an autoencoder's
        images, say) are not decoded just to learn that they are not tokens.
        """
        source = self._row(
            "SELECT targets_from FROM outputs WHERE split = ? AND step = ?", (split, int(step))
        )
        if source is None or source[0] != "tokens":
            return None
        kept = self.outputs(step, split)  # type: ignore[attr-defined]
        if kept is None or kept.targets_from != "tokens":
            return None
        out, ints = kept.outputs, kept.targets
        if (
            out is None
            or ints is None
            or out.ndim != 3
            or ints.ndim != 3
            or out.shape[:2] != ints.shape[:2]
            or ints.shape[2] != out.shape[2] + 1
        ):
            shapes = [None if a is None else list(a.shape) for a in (out, ints)]
            raise StoredValueError(f"stored per-token arrays of shapes {shapes} do not match")
        return TokenEvaluation(
            ids=kept.ids[: len(out)],
            losses=np.asarray(out[..., 0], dtype=np.float32),
            targets=np.asarray(ints[..., 0]),
            counted=np.asarray(ints[..., 1]) != 0,
            top_ids=np.asarray(ints[..., 2:]),
            top_probs=np.asarray(out[..., 1:], dtype=np.float32),
        )

    def token_texts(self) -> dict[int, str]:
        """The text of each token id the run's per-token evaluations hold, where a
        vocabulary was given (``tokens=``); empty otherwise."""
        stored = self.meta("token_texts") or {}  # type: ignore[attr-defined]
        return {int(k): str(v) for k, v in stored.items()}

    def token_losses(
        self, step: int, split: str = "val", ids: Iterable[int] | None = None
    ) -> pd.DataFrame:
        """A language model's evaluation at ``step``, one row per sample and position.

        Columns: ``id``, ``position``, ``token_id`` (the target token), ``token`` (its
        text where a vocabulary was given to ``evaluate(..., tokens=)``, else the id as
        text; empty for a negative id such as ``ignore_index``), ``loss`` (NaN at
        padding), ``padding`` (the position does not count: its target was
        ``ignore_index`` or masked), ``top_ids``, ``top_tokens`` and
        ``top_probs`` (the model's most likely tokens there, most likely first, as
        lists). ``ids`` picks samples (default: every sample kept: the first ones, see
        :data:`nbviz.recording.tokens.MAX_TOKEN_VALUES`). Raises ValueError when the
        evaluation at ``step`` holds no per-token losses.
        """
        got = self.token_evaluation(int(step), split)
        if got is None:
            raise ValueError(
                f"token_losses: the {split} evaluation at step {step} holds no per-token "
                "losses; evaluate a model whose outputs are (samples, positions, vocabulary) "
                "against (samples, positions) token ids: run.evaluate(step, model, loader)"
            )
        rows = np.arange(len(got.ids))
        if ids is not None:
            where = {int(i): k for k, i in enumerate(got.ids)}
            wanted = [int(i) for i in ids]
            missing = [i for i in wanted if i not in where]
            if missing:
                raise ValueError(
                    f"token_losses: ids {missing[:10]} have no per-token losses at step {step} "
                    f"({len(where)} samples kept, ids {got.ids[:5].tolist()}...)"
                )
            rows = np.asarray([where[i] for i in wanted], dtype=np.int64)
        texts = self.token_texts()
        n, t = len(rows), got.losses.shape[1]

        def text(i: int) -> str:  # no text for a negative id (an ignore_index, not a token)
            return texts.get(i, str(i)) if i >= 0 else ""

        targets = got.targets[rows].reshape(-1)
        counted = got.counted[rows].reshape(-1)
        losses = got.losses[rows].reshape(-1).astype(np.float64)
        top_ids = got.top_ids[rows].reshape(n * t, -1).tolist()
        top_probs = got.top_probs[rows].reshape(n * t, -1).astype(np.float64).tolist()
        return pd.DataFrame(
            {
                "id": np.repeat(got.ids[rows], t),
                "position": np.tile(np.arange(t, dtype=np.int64), n),
                "token_id": targets.astype(np.int64),
                "token": [text(int(i)) for i in targets],
                "loss": np.where(counted, losses, np.nan),
                "padding": ~counted,
                "top_ids": top_ids,
                "top_tokens": [[text(i) for i in row] for row in top_ids],
                "top_probs": top_probs,
            },
            columns=list(TOKEN_COLUMNS),
        )
