"""Padding: which positions of a ``(batch, tokens, ...)`` tensor are real tokens.

The loop says so with ``probe.set_mask``; a Hugging Face model of one stack says so
with the ``attention_mask`` it is called with. Statistics of such tensors are taken
over the real positions only (:mod:`nbviz.probes.hooks`, :mod:`nbviz.probes.heads`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["masked", "one_sequence", "padding_mask"]


def padding_mask(value: Any) -> torch.Tensor | None:
    """A forward's ``attention_mask`` as the real tokens' mask: ``(batch, tokens)`` of
    booleans or 0/1 integers (Hugging Face's), True where a token is real; None for
    anything else (an additive float mask, a 4-d one)."""
    if not isinstance(value, torch.Tensor) or value.dim() != 2:
        return None
    if value.dtype == torch.bool:
        return value
    if value.is_floating_point() or value.is_complex():
        return None
    return value != 0


def one_sequence(root: nn.Module) -> bool:
    """Whether ``root``'s ``attention_mask`` is the mask of every ``(batch, tokens)``
    tensor it makes: a Hugging Face model (its ``config``) of one stack. Not an
    encoder-decoder, whose mask is its encoder's (its decoder's tokens are others,
    maybe as many), nor a model of several configs (text beside images: CLIP, LLaVA),
    nor a model nbviz cannot read, where another sequence may have the same length."""
    config = getattr(root, "config", None)
    if config is None or not hasattr(config, "to_dict"):
        return False
    return not getattr(config, "is_encoder_decoder", False) and not getattr(
        config, "sub_configs", None
    )


def masked(x: torch.Tensor, mask: torch.Tensor, ud: int | None) -> tuple[torch.Tensor, int | None]:
    """The positions of ``x`` (batch, tokens, ...) where ``mask`` is True, as (kept, ...),
    and the unit dimension there (one less; None where it was batch or tokens)."""
    return x[mask], (ud - 1 if ud is not None and ud >= 2 else None)
