"""How an evaluation pass takes a batch apart, and finds the layers it reads.

A batch is ``(inputs, labels)``, ``(inputs, labels, ids)`` or a dict with a label key and
an input key; evaluated with a ``loss_fn`` it may also be inputs alone (an autoencoder's
targets) or a dict with ``target``/``targets`` beside ``label``/``labels``. A dict with
no input key is the model's keyword arguments, less its labels, ids and loss masks
(Hugging Face's ``input_ids``, ``attention_mask``, ``token_type_ids``, ...) and the
entries its ``forward`` does not take: the model is called as ``model(**those)``, so it
sees its attention mask as in training. Beside an input key, the entries that the model's
``forward`` names as parameters go with the input (``{"x": x, "pad": pad, "label": y}``
as ``model(x, pad=pad)``). Labels go to a Hugging Face language model only
(:func:`call_model`). ``forward`` is read through ``torch.compile`` and
``DataParallel`` wrappers (:func:`forward_parameters`).
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
    "sample_inputs",
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


def forward_parameters(model: nn.Module) -> dict[str, inspect.Parameter] | None:
    """The parameters of the ``forward`` that ``model`` runs, found through wrappers whose
    own ``forward`` takes only ``(*args, **kwargs)`` (``torch.compile``'s ``_orig_mod``,
    ``DataParallel``'s and ``DistributedDataParallel``'s ``.module``); None where the
    signature cannot be read."""
    seen = 0
    while True:
        try:
            params = dict(inspect.signature(model.forward).parameters)
        except (TypeError, ValueError):
            return None
        variadic = all(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params.values())
        inner = getattr(model, "_orig_mod", None)
        if not isinstance(inner, nn.Module):
            inner = getattr(model, "module", None)
        if not (variadic and params and isinstance(inner, nn.Module)) or seen > 8:
            return params
        model, seen = inner, seen + 1


def unwrapped(model: nn.Module) -> nn.Module:
    """The module a ``torch.compile``/``DataParallel``/``DistributedDataParallel`` wrapper
    runs (``model`` itself where it is none)."""
    for _ in range(8):
        inner = getattr(model, "_orig_mod", None)
        if not isinstance(inner, nn.Module):
            inner = getattr(model, "module", None)
        if not isinstance(inner, nn.Module):
            return model
        try:
            params = inspect.signature(model.forward).parameters.values()
        except (TypeError, ValueError):
            return model
        if not params or any(p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
            return model
        model = inner
    return model


def call_model(
    model: nn.Module, x: Any, device: torch.device, batch: Any = None, rows: int | None = None
) -> Any:
    """``model(x)`` on ``device``; a dict of keyword arguments (a dict batch's) as
    ``model(**x)``, less the entries its ``forward`` does not take. The dict ``batch``'s
    other entries that ``forward`` names as parameters go with them as keyword arguments,
    as in training (a padding mask beside ``x``). Labels go to a Hugging Face language
    model only (token ids: its own loss says how positions line up, and an
    encoder-decoder makes its decoder's inputs from them); any other model is called
    without them, since a forward given labels may return something else (a loss, or
    margin-shifted scores). A tuple ``x`` is the model's arguments only where that is
    clearly meant (see :func:`_takes_arguments`); ``rows`` is the batch's sample count."""
    params = forward_parameters(model)
    named = _named_entries(model, params, batch, x)
    if isinstance(x, Mapping):
        keywords = _keywords(params, {**x, **named}, batch)
        return model(**{k: to_device(v, device) for k, v in keywords.items()})
    keywords = {k: to_device(v, device) for k, v in named.items()}
    if isinstance(x, tuple | list) and _takes_arguments(params, x, rows):
        return model(*(to_device(v, device) for v in x), **keywords)
    return model(to_device(x, device), **keywords)


def _keywords(
    params: dict[str, inspect.Parameter] | None, given: dict[str, Any], batch: Any
) -> dict[str, Any]:
    """The keyword arguments among ``given`` that ``forward`` takes (all of them where it
    takes ``**kwargs`` or its signature cannot be read); a parameter it needs and the
    batch lacks is an error naming both."""
    if params is None or any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return given
    by_name = {
        n: p for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    kept = {k: v for k, v in given.items() if k in by_name}
    missing = [n for n, p in by_name.items() if p.default is p.empty and n not in kept]
    if missing:
        keys = sorted(batch) if isinstance(batch, Mapping) else sorted(given)
        raise ValueError(
            f"evaluate: the model's forward needs {', '.join(missing)}, which the dict batch "
            f"(keys {keys}) does not give; forward takes {', '.join(params)}"
        )
    return kept


def _takes_arguments(
    params: dict[str, inspect.Parameter] | None, x: tuple | list, rows: int | None
) -> bool:
    """Whether a tuple or list ``x`` of inputs is ``forward``'s positional arguments rather
    than its one argument: two or more, as many as ``forward`` takes, and either all of
    them parameters it needs, or each a tensor (or array) of the batch's leading size (not
    a list of per-sample tensors) where the optional parameters so filled default to None
    (a flag's default, ``False`` or ``1``, says that a tensor is not meant for it)."""
    n = len(x)
    if n < 2 or params is None:
        return False
    positional = [
        p for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if not n <= len(positional) or any(p.default is p.empty for p in positional[n:]):
        return False
    filled = positional[:n]
    if all(p.default is p.empty for p in filled[1:]):
        return True  # forward needs them all: one argument alone would not do
    if not all(isinstance(v, torch.Tensor | np.ndarray) and v.ndim >= 1 for v in x):
        return False
    sizes = {len(v) for v in x}
    if len(sizes) != 1 or (rows is not None and sizes != {rows}):
        return False
    return all(p.default is p.empty or p.default is None for p in filled)


def _wants_labels(model: nn.Module, labels: Any) -> bool:
    """Whether ``labels`` go to the model: token ids, for a Hugging Face model (one with a
    ``config``) whose own loss lines its positions up with them or whose decoder's inputs
    are made from them."""
    from nbviz.probes.token_evaluation import token_targets

    return hasattr(unwrapped(model), "config") and token_targets(labels)


def _named_entries(
    model: nn.Module, params: dict[str, inspect.Parameter] | None, batch: Any, x: Any
) -> dict[str, Any]:
    """The entries of a dict ``batch`` besides its inputs ``x`` that ``forward`` takes by
    name: never its ids or ``loss_mask``; ``mask`` where forward names it (it is still the
    loss mask); labels only as :func:`_wants_labels` says."""
    if not isinstance(batch, Mapping) or params is None:
        return {}
    given = next((k for k in _INPUT_KEYS if k in batch), None)
    taken = set(x) if isinstance(x, Mapping) else {given}
    skip = {*_ID_KEYS, "loss_mask", *_LABEL_KEYS}
    rest = [k for k in batch if k not in taken and k not in skip]
    if "labels" in batch and _wants_labels(model, batch["labels"]):
        rest.append("labels")
    if not rest:
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
    (else its first integer tensor that is no mask or type/position ids)."""
    if isinstance(x, tuple | list) and x:
        return x[0]
    if not isinstance(x, Mapping):
        return x
    for k in _TOKEN_KEYS:
        if k in x:
            return x[k]
    return next(
        (
            v
            for k, v in x.items()
            if _is_input_key(k) and isinstance(v, torch.Tensor) and not v.is_floating_point()
        ),
        None,
    )


def sample_inputs(x: Any) -> Any:
    """What of ``x`` is kept as the samples' inputs: ``x`` itself, a tuple of arguments'
    first, or a dict of keyword arguments' token ids, else its first tensor that is no mask
    or type/position ids (``input_values``, ``inputs_embeds``, ``pixel_values``)."""
    if not isinstance(x, Mapping):
        return token_inputs(x)
    for k in _TOKEN_KEYS:
        if k in x:
            return x[k]
    return next(
        (v for k, v in x.items() if _is_input_key(k) and isinstance(v, torch.Tensor | np.ndarray)),
        None,
    )


def _is_input_key(key: Any) -> bool:
    """Whether a keyword argument may be the inputs: not a mask, type or position ids."""
    key = str(key)
    return not key.endswith("mask") and key not in ("token_type_ids", "position_ids")


def to_device(x: Any, device: torch.device) -> Any:
    """A tensor or array on ``device``; anything else as it is."""
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x).to(device)
    return x
