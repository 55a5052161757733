"""A language model's evaluation pass, token by token.

``run.evaluate`` recognises a language model by its shapes: ``(N, T, V)`` outputs against
``(N, T)`` integer targets (:func:`token_shapes`). For each batch, on the device, each
position's cross-entropy (``F.cross_entropy(logits.transpose(1, 2), targets,
reduction="none")``, or ``loss_fn``'s where it gives one loss per position) and the
model's top-k tokens there with their probabilities; each sample's loss is the mean over
its positions that count (not padding: a target equal to ``ignore_index``, or a dict
batch's ``loss_mask``/``mask`` False there).

A model that scores its labels itself (a Hugging Face model, given ``labels`` in a dict
batch, returns its ``loss``) says how its positions line up with them: where the loss
it gives is the cross-entropy of its scores against the labels shifted by one and not
against them as given (a causal language model's labels, which the model shifts),
position ``t``'s scores are read against the label at ``t + 1``, the last position
having none (:func:`aligned_like_model`). Read unshifted, each position would be scored
on the token it was given, not the next one. Only the per-sample losses of every batch and
the per-token arrays of the first samples (up to
:data:`nbviz.recording.tokens.MAX_TOKEN_VALUES` values) are copied to the host.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "TokenArrays",
    "TokenBatches",
    "batch_mask",
    "token_shapes",
    "aligned_like_model",
    "token_targets",
]

_MASK_KEYS = ("loss_mask", "mask")
_INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


@dataclass
class TokenArrays:
    """A language model's per-token results for the first samples of a pass (see
    :func:`nbviz.recording.tokens.token_rows` for what each holds)."""

    losses: np.ndarray  # float32 [n, T]
    targets: np.ndarray  # int64 [n, T]
    counted: np.ndarray  # bool [n, T]
    top_ids: np.ndarray  # int64 [n, T, k]
    top_probs: np.ndarray  # float32 [n, T, k]


def token_targets(y: Any) -> bool:
    """Whether ``y`` is ``(N, T)`` integer token ids."""
    if isinstance(y, torch.Tensor):
        return y.ndim == 2 and y.dtype in _INTS
    return isinstance(y, np.ndarray) and y.ndim == 2 and y.dtype.kind in "iu"


def token_shapes(out: torch.Tensor, target: Any) -> bool:
    """Whether ``(N, T, V)`` outputs against ``(N, T)`` integer targets: a language model's."""
    return (
        out.ndim == 3
        and out.is_floating_point()
        and token_targets(target)
        and tuple(out.shape[:2]) == tuple(target.shape)
    )


def batch_mask(batch: Any, device: torch.device) -> torch.Tensor | None:
    """A dict batch's ``loss_mask`` (or ``mask``): True where a position counts."""
    if not isinstance(batch, Mapping):
        return None
    m = next((batch[k] for k in _MASK_KEYS if k in batch), None)
    if m is None:
        return None
    return (m if isinstance(m, torch.Tensor) else torch.as_tensor(np.asarray(m))).to(device)


def aligned_like_model(
    logits: torch.Tensor, targets: torch.Tensor, own_loss: Any, ignore_index: int
) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """``(logits, targets, shifted)`` lined up as the model's own loss lines them up.

    ``own_loss``: the loss the model gave for ``targets`` (None where it gave none). Shifted
    (``logits[:, :-1]`` against ``targets[:, 1:]``) where that loss is the mean
    cross-entropy of the shifted pairs and not of the pairs as given, with ``ignore_index``
    or with -100 (a Hugging Face model's, where the pass ignores a pad id); else as given,
    with a warning where the model gave a loss that neither alignment matches.
    """
    if not isinstance(own_loss, torch.Tensor) or own_loss.numel() != 1 or targets.shape[1] < 2:
        return logits, targets, False
    own = float(own_loss.detach().float())

    def mean_ce(scores: torch.Tensor, labels: torch.Tensor, ignored: int) -> float:
        return float(
            F.cross_entropy(scores.float().transpose(1, 2), labels.long(), ignore_index=ignored)
        )

    def close(value: float) -> bool:
        return abs(value - own) <= 1e-4 * max(1.0, abs(own))

    # the model's loss may ignore -100 where this pass ignores another id (a pad id)
    for ignored in dict.fromkeys((int(ignore_index), -100)):
        if close(mean_ce(logits, targets, ignored)):
            return logits, targets, False
        shifted = logits[:, :-1], targets[:, 1:]
        if close(mean_ce(*shifted, ignored)):
            return shifted[0], shifted[1], True
    warnings.warn(
        f"evaluate: the model's own loss ({own:.6g}) is neither the cross-entropy of its "
        "scores against the labels as given nor against the labels shifted by one (with "
        f"ignore_index={ignore_index} or -100); positions are read as given, position t "
        "scored on label t",
        stacklevel=6,  # Run.evaluate's caller
    )
    return logits, targets, False


class TokenBatches:
    """What the batches of a language model's pass gave, gathered."""

    def __init__(self, top_k: int = 5, ignore_index: int = -100) -> None:
        self.top_k = int(top_k)
        self.ignore_index = int(ignore_index)
        self.batches = 0
        self.sample_losses: list[np.ndarray] = []  # every batch's
        self.parts: list[tuple[np.ndarray, ...]] = []  # the first samples' per-token arrays
        self.values = 0
        self.full = False
        self.total = 0.0
        self.count = 0

    def add(
        self,
        logits: torch.Tensor,
        targets: torch.Tensor,
        per: torch.Tensor | None,
        mask: torch.Tensor | None,
    ) -> None:
        """One batch: each position's loss (``per``, else the cross-entropy) and top-k
        tokens, on the device; the per-token arrays copied while the first samples' fit."""
        from nbviz.recording.tokens import MAX_TOKEN_VALUES

        self.batches += 1
        targets = targets.long()
        counted = targets != self.ignore_index
        if mask is not None:
            if tuple(mask.shape) != tuple(targets.shape):
                raise ValueError(
                    f"evaluate: the batch's mask has shape {tuple(mask.shape)}; expected "
                    f"{tuple(targets.shape)}, one value per target token"
                )
            counted &= mask.to(torch.bool)
        if per is None:
            safe = torch.where(counted, targets, torch.full_like(targets, -100))
            per = F.cross_entropy(logits.transpose(1, 2), safe, reduction="none", ignore_index=-100)
        per = per.detach().float()
        n_counted = counted.sum(1)
        total = torch.where(counted, per, torch.zeros_like(per)).sum(1, dtype=torch.float64)
        mean = (total / n_counted.clamp(min=1)).where(n_counted > 0, torch.nan)
        self.sample_losses.append(mean.cpu().numpy())
        self.total += float(total.sum())
        self.count += int(n_counted.sum())
        if self.full:
            return
        rows, t = targets.shape
        k = min(self.top_k, logits.shape[-1])
        per_sample = t * (1 + k)
        room = (MAX_TOKEN_VALUES - self.values) // per_sample
        take = min(rows, room if self.parts else max(1, room))
        if take < rows:  # the first samples only: none after this batch
            self.full = True
        if take > 0:
            self._keep(logits[:take], targets[:take], per[:take], counted[:take], k)
            self.values += take * per_sample

    def _keep(
        self,
        logits: torch.Tensor,
        targets: torch.Tensor,
        per: torch.Tensor,
        counted: torch.Tensor,
        k: int,
    ) -> None:
        logits = logits.detach()
        if k:
            top = logits.topk(k, dim=-1)
            norm = logits.float().logsumexp(-1, keepdim=True)
            probs, ids = (top.values.float() - norm).exp(), top.indices
        else:
            probs = torch.zeros((*targets.shape, 0), dtype=torch.float32)
            ids = torch.zeros((*targets.shape, 0), dtype=torch.long)
        self.parts.append(
            (
                torch.where(counted, per, torch.zeros_like(per)).cpu().numpy(),
                targets.cpu().numpy(),
                counted.cpu().numpy(),
                ids.cpu().numpy(),
                probs.cpu().numpy(),
            )
        )

    def result(self) -> tuple[np.ndarray, TokenArrays, float]:
        """Every sample's loss, the first samples' per-token arrays (batches of other
        lengths padded to the longest), and the mean loss over every position that counts."""
        parts = self.parts
        t = max(p[0].shape[1] for p in parts)
        k = parts[0][3].shape[2]

        def joined(j: int, fill: Any, dtype: Any) -> np.ndarray:
            out = []
            for p in parts:
                a = p[j]
                if a.shape[1] < t:
                    pad = np.full((a.shape[0], t - a.shape[1], *a.shape[2:]), fill, dtype=a.dtype)
                    a = np.concatenate([a, pad], axis=1)
                out.append(a)
            return np.concatenate(out).astype(dtype, copy=False)

        arrays = TokenArrays(
            losses=joined(0, 0.0, np.float32),
            targets=joined(1, self.ignore_index, np.int64),
            counted=joined(2, False, bool),
            top_ids=joined(3, 0, np.int64).reshape(-1, t, k),
            top_probs=joined(4, 0.0, np.float32).reshape(-1, t, k),
        )
        mean = self.total / self.count if self.count else float("nan")
        return np.concatenate(self.sample_losses), arrays, mean
