"""A language model's evaluation, token by token, made into rows.

A model whose outputs are ``(N, T, V)`` scores over a vocabulary, against
``(N, T)`` target token ids, is judged at each position: its loss there and the
tokens it found most likely. ``Run.log_token_losses`` (and ``Run.evaluate`` on
such a model) records

- in ``predictions``, one row per sample whose ``loss`` is the mean of its
  per-token losses over the positions that count (not padding); NaN for a
  sample that is padding alone;
- in ``outputs``, one row per evaluation with ``targets_from = "tokens"``, for
  the first samples (up to :data:`MAX_TOKEN_VALUES` values in all):

  - ``outputs``: float32 ``(n, T, 1 + k)``: ``[..., 0]`` the loss at each
    position (0 at padding), ``[..., 1:]`` the probabilities of the top-k tokens;
  - ``targets``: int32 (int64 for a vocabulary past 2**31) ``(n, T, 2 + k)``:
    ``[..., 0]`` the target token id as given (``ignore_index`` kept),
    ``[..., 1]`` 1 where the position counts and 0 for padding, ``[..., 2:]`` the
    ids of the top-k tokens, most likely first;
- in ``meta["token_texts"]``, the text of every token id those arrays hold, where
  a vocabulary or a decoding function (``tokens=``) was given.

Read back with ``Run.token_losses`` (:mod:`nbviz.store.tokens`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from nbviz import records as rec
from nbviz.store import to_blob

__all__ = [
    "MAX_TOKEN_VALUES",
    "TOKENS_SOURCE",
    "decoder",
    "per_sample_means",
    "token_rows",
    "token_texts",
]

TOKENS_SOURCE = "tokens"
"""The ``outputs.targets_from`` of a language model's per-token evaluation."""
MAX_TOKEN_VALUES = 2**20
"""Per-token values (positions x (1 + k)) kept per evaluation, at most (4 MiB of float32)."""


def decoder(tokens: Any, what: str) -> Callable[[int], str] | None:
    """A function token id -> text from ``tokens=``: a vocabulary (a list of strings,
    index = id; or a mapping id -> text), a tokenizer (``convert_ids_to_tokens`` or
    ``decode``), or a function of one id; None for None."""
    if tokens is None:
        return None
    if isinstance(tokens, Mapping):
        table = {int(k): str(v) for k, v in tokens.items()}
        return lambda i: table.get(i, str(i))
    if isinstance(tokens, Sequence) and not isinstance(tokens, str | bytes):
        vocab = [str(t) for t in tokens]
        return lambda i: vocab[i] if 0 <= i < len(vocab) else str(i)
    convert = getattr(tokens, "convert_ids_to_tokens", None)
    if callable(convert):
        decode = getattr(tokens, "decode", None)
        if callable(decode):  # the text a person reads (BPE's "Ġ" marks turned into spaces)
            return lambda i: str(decode([i]))
        return lambda i: str(convert(i))
    if callable(tokens):
        return lambda i: str(tokens(i))
    raise TypeError(
        f"{what}: tokens must be a vocabulary (a list of strings, index = token id, or a "
        "mapping id -> text), a tokenizer, or a function token id -> text; got "
        f"{type(tokens).__name__}"
    )


def token_texts(decode: Callable[[int], str] | None, *arrays: Any) -> dict[str, str]:
    """The text of every non-negative id in ``arrays`` (None: none there), as JSON keys:
    the ids as strings."""
    if decode is None:
        return {}
    parts = [rec.to_numpy(a, "tokens").astype(np.int64).ravel() for a in arrays if a is not None]
    seen = np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
    return {str(int(i)): decode(int(i)) for i in seen if i >= 0}


def per_sample_means(losses: np.ndarray, counted: np.ndarray) -> np.ndarray:
    """Each sample's mean loss over the positions that count (NaN where none does)."""
    n = counted.sum(axis=1)
    total = np.where(counted, losses, 0.0).sum(axis=1, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, total / np.maximum(n, 1), np.nan)


def _array(values: Any, what: str, arg: str) -> np.ndarray:
    arr = rec.to_numpy(values, f"{what}: {arg}")
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{what}: {arg} must be numbers, got dtype {arr.dtype}")
    return arr


def _check_shape(arr: np.ndarray, shape: tuple[int, ...], what: str, arg: str) -> None:
    if tuple(arr.shape) != shape:
        raise ValueError(
            f"{what}: {arg} has shape {tuple(arr.shape)}; expected {shape} (samples, positions"
            + (", top-k)" if len(shape) == 3 else ")")
        )


def token_rows(
    step: Any,
    losses: Any,
    targets: Any,
    ids: Any,
    split: Any,
    *,
    mask: Any = None,
    ignore_index: int = -100,
    top_ids: Any = None,
    top_probs: Any = None,
    what: str = "log_token_losses",
) -> tuple[list[tuple], list[tuple], np.ndarray]:
    """Rows of ``predictions`` (one per sample) and ``outputs`` (one), and the ids kept.

    ``losses`` and ``targets`` are ``(N, T)``; ``mask`` ``(N, T)`` is True where a
    position counts (default: where the target is not ``ignore_index``; both apply).
    ``top_ids`` and ``top_probs`` are ``(N, T, k)`` (or the first samples' only).
    """
    step = rec.check_step(step, what)
    split = rec.check_split(split, what)
    loss = _array(losses, what, "losses")
    if loss.ndim != 2:
        raise ValueError(
            f"{what}: losses must be (samples, positions), one loss per token "
            f"(reduction='none'); got shape {tuple(loss.shape)}"
        )
    n, t = loss.shape
    if not n or not t:
        raise ValueError(f"{what}: losses of shape {(n, t)} hold no tokens")
    tgt = _array(targets, what, "targets")
    _check_shape(tgt, (n, t), what, "targets")
    if tgt.dtype.kind == "f":
        if not np.all(np.isfinite(tgt)) or np.any(tgt != np.trunc(tgt)):
            raise TypeError(f"{what}: targets must be integer token ids, got dtype {tgt.dtype}")
    tgt = tgt.astype(np.int64)
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int | np.integer):
        raise TypeError(f"{what}: ignore_index must be an int, got {ignore_index!r}")
    counted = tgt != int(ignore_index)
    if mask is not None:
        m = _array(mask, what, "mask")
        _check_shape(m, (n, t), what, "mask")
        counted &= m.astype(bool)
    loss = loss.astype(np.float32)
    per = per_sample_means(loss, counted)
    ids_arr = rec.check_ids(ids, n, what)
    predictions = [
        (split, step, int(i), None, None, float(per[j]), None) for j, i in enumerate(ids_arr)
    ]
    if (top_ids is None) != (top_probs is None):
        raise ValueError(f"{what}: give top_ids and top_probs together, or neither")
    if top_ids is not None:
        tids = _array(top_ids, what, "top_ids")
        tprobs = _array(top_probs, what, "top_probs")
        if tids.ndim != 3 or tids.shape[1] != t or tids.shape[0] > n:
            raise ValueError(
                f"{what}: top_ids has shape {tuple(tids.shape)}; expected ({n}, {t}, k)"
            )
        _check_shape(tprobs, tuple(tids.shape), what, "top_probs")
        tids = tids.astype(np.int64)
    else:
        tids = np.zeros((n, t, 0), dtype=np.int64)
        tprobs = np.zeros((n, t, 0), dtype=np.float32)
    k = tids.shape[2]
    kept = min(len(tids), max(1, MAX_TOKEN_VALUES // (t * (1 + k))))
    out = np.empty((kept, t, 1 + k), dtype=np.float32)
    out[..., 0] = np.where(counted[:kept], loss[:kept], 0.0)
    out[..., 1:] = tprobs[:kept]
    wide = max(int(np.abs(tgt).max(initial=0)), int(np.abs(tids).max(initial=0))) >= 2**31
    ints = np.empty((kept, t, 2 + k), dtype=np.int64 if wide else np.int32)
    ints[..., 0] = tgt[:kept]
    ints[..., 1] = counted[:kept]
    ints[..., 2:] = tids[:kept]
    row = (
        split,
        step,
        ids_arr[:kept].astype("<i8").tobytes(),
        *to_blob(out),
        *to_blob(ints),
        TOKENS_SOURCE,
    )
    return predictions, [row], ids_arr[:kept]
