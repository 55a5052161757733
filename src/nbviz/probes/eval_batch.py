"""How an evaluation pass takes a batch apart, and finds the layers it reads.

A batch is ``(inputs, labels)``, ``(inputs, labels, ids)`` or a dict with a label key and
an input key; evaluated with a ``loss_fn`` it may also be inputs alone (an autoencoder's
targets) or a dict with ``target``/``targets`` beside ``label``/``labels``. A dict with
no input key is the model's keyword arguments, less its labels, ids and loss masks
(Hugging Face's ``input_ids``, ``attention_mask``, ``token_type_ids``, ...): the model is
called as ``model(**those)``, so it sees its attention mask as in training. Beside an
input key, the entries that the model's ``forward`` names as parameters go with the input
(``{"x": x, "pad": pad, "label": y}`` as ``model(x, pad=pad)``).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from nbviz.probes.select import named_modules

__all__ = [
    "NOT_A_CLASSIFIER",
    "default_embed_layer",
    "resolve_layer",
    "call_model",
    "split_batch",
    "split_for_loss",
    "to_device",
    "token_inputs",
]

_INPUT_KEYS = ("input", "inputs", "x", "image", "images", "data", "pixel_values")
_LABEL_KEYS = ("label", "labels", "y", "target", "targets")
_ID_KEYS = ("id", "ids", "index", "idx")


_TARGET_KEYS = ("target", "targets", "y")
#: Entries of a dict batch that are for the evaluation, never the model's arguments.
_NOT_ARGUMENTS = frozenset((*_LABEL_KEYS, *_ID_KEYS, "loss_mask", "mask"))
#: Where a dict batch of keyword arguments holds its token ids.
_TOKEN_KEYS = ("input_ids", "tokens", "ids")
NOT_A_CLASSIFIER = (
    "; for a model that is not a classifier (regression, an autoencoder, per-pixel or "
    "multi-label outputs) pass loss_fn=, a loss with reduction='none' "
    "(e.g. loss_fn=nn.MSELoss(reduction='none'))"
)
_CLASS_KEYS = ("label", "labels")


def resolve_layer(model: nn.Module, layer: str | nn.Module, what: str) -> tuple[str, nn.Module]:
    """The ``(name, module)`` that ``layer`` (a name or a submodule) names."""
    modules = named_modules(model)
    if isinstance(layer, nn.Module):
        for name, m in modules:
            if m is layer:
                return name, m
        raise ValueError(f"evaluate: {what} is not a submodule of the model")
    for name, m in modules:
        if name == layer:
            return name, m
    import difflib

    close = difflib.get_close_matches(str(layer), [n for n, _ in modules], n=5, cutoff=0.4)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"evaluate: {what}={layer!r} is not a module of the model.{hint}")


def default_embed_layer(model: nn.Module) -> tuple[str, nn.Module] | None:
    """The last ``nn.Linear``: its input is the model's penultimate representation."""
    last = None
    for name, m in named_modules(model):
        if isinstance(m, nn.Linear):
            last = (name, m)
    return last


def split_batch(batch: Any) -> tuple[Any, Any, Any]:
    """``(inputs, labels, ids or None)`` of a classifier's batch."""
    if isinstance(batch, Mapping):
        x = _dict_inputs(batch)
        y = next((batch[k] for k in _LABEL_KEYS if k in batch), None)
        i = next((batch[k] for k in _ID_KEYS if k in batch), None)
        if x is None or y is None:
            raise ValueError(
                f"evaluate: a dict batch needs a label key ({', '.join(_LABEL_KEYS)}) and an "
                f"input key ({', '.join(_INPUT_KEYS)}) or the model's keyword arguments "
                f"(input_ids, attention_mask, ...); got keys {sorted(batch)}"
            )
        return x, y, i
    if isinstance(batch, tuple | list):
        if len(batch) == 2:
            return batch[0], batch[1], None
        if len(batch) == 3:
            return batch[0], batch[1], batch[2]
    alone = isinstance(batch, torch.Tensor | np.ndarray) or (
        isinstance(batch, tuple | list) and len(batch) == 1
    )
    raise ValueError(
        "evaluate: the loader must yield (inputs, labels), (inputs, labels, ids) or a dict; "
        f"got {type(batch).__name__}"
        + (f" of length {len(batch)}" if hasattr(batch, "__len__") else "")
        + (NOT_A_CLASSIFIER + "; inputs alone are an autoencoder's targets" if alone else "")
    )


def split_for_loss(batch: Any) -> tuple[Any, Any, Any, Any]:
    """``(inputs, targets or None, ids, labels)`` of a batch evaluated with a ``loss_fn``."""
    if isinstance(batch, torch.Tensor | np.ndarray):
        return batch, None, None, None
    if isinstance(batch, Mapping):
        x = _dict_inputs(batch)
        if x is None:
            raise ValueError(
                f"evaluate: a dict batch needs an input key ({', '.join(_INPUT_KEYS)}) or the "
                f"model's keyword arguments (input_ids, attention_mask, ...); got keys "
                f"{sorted(batch)}"
            )
        y = next((batch[k] for k in _TARGET_KEYS if k in batch), None)
        labels = next((batch[k] for k in _CLASS_KEYS if k in batch), None)
        if y is None:
            y, labels = labels, None
        i = next((batch[k] for k in _ID_KEYS if k in batch), None)
        return x, y, i, labels
    if isinstance(batch, tuple | list) and len(batch) == 1:
        return batch[0], None, None, None
    x, y, i = split_batch(batch)
    return x, y, i, None


def _dict_inputs(batch: Mapping[str, Any]) -> Any:
    """A dict batch's inputs: its input key's value, else its entries that are the model's
    keyword arguments (a dict; None when there are none)."""
    x = next((batch[k] for k in _INPUT_KEYS if k in batch), None)
    if x is not None:
        return x
    arguments = {k: v for k, v in batch.items() if k not in _NOT_ARGUMENTS}
    return arguments or None


def call_model(model: nn.Module, x: Any, device: torch.device, batch: Any = None) -> Any:
    """``model(x)`` on ``device``; a dict of keyword arguments (a dict batch's) as
    ``model(**x)``. The dict ``batch``'s other entries that ``model.forward`` names as
    parameters go with them as keyword arguments, as they would in training: a padding
    mask beside ``x``, or the ``labels`` a Hugging Face model scores itself (an
    encoder-decoder makes its decoder's inputs from them)."""
    named = _named_entries(model, batch, x)
    if isinstance(x, Mapping):
        named = {**x, **named}
        return model(**{k: to_device(v, device) for k, v in named.items()})
    keywords = {k: to_device(v, device) for k, v in named.items()}
    if isinstance(x, tuple | list) and _takes_arguments(model, len(x)):
        return model(*(to_device(v, device) for v in x), **keywords)
    return model(to_device(x, device), **keywords)


def _takes_arguments(model: nn.Module, n: int) -> bool:
    """Whether ``model.forward`` takes ``n`` (two or more) positional arguments, so that
    a tuple of ``n`` inputs is its arguments (as ``attention=`` takes one) rather than one
    argument."""
    if n < 2:
        return False
    try:
        params = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    return len(required) <= n <= len(positional)


def _named_entries(model: nn.Module, batch: Any, x: Any) -> dict[str, Any]:
    """The entries of a dict ``batch`` besides its inputs ``x`` (and its ids and loss
    masks) that ``model.forward`` takes by name."""
    if not isinstance(batch, Mapping):
        return {}
    given = next((k for k in _INPUT_KEYS if k in batch), None)
    taken = set(x) if isinstance(x, Mapping) else {given}
    skip = {*_ID_KEYS, "loss_mask", "mask"}
    rest = [k for k in batch if k not in taken and k not in skip]
    if not rest:
        return {}
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return {}
    names = list(params)
    by_name = {
        n
        for n, p in params.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and not (given is not None and names and n == names[0])
    }
    return {k: batch[k] for k in rest if k in by_name}


def token_inputs(x: Any) -> Any:
    """The token ids among ``x`` (the inputs as :func:`split_batch` gives them): ``x``
    itself, a tuple of arguments' first, or a dict of keyword arguments' ``input_ids``
    (else its first integer tensor)."""
    if isinstance(x, tuple | list) and x:
        return x[0]
    if not isinstance(x, Mapping):
        return x
    for k in _TOKEN_KEYS:
        if k in x:
            return x[k]
    return next(
        (v for v in x.values() if isinstance(v, torch.Tensor) and not v.is_floating_point()),
        None,
    )


def to_device(x: Any, device: torch.device) -> Any:
    """A tensor or array on ``device``; anything else as it is."""
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x).to(device)
    return x
