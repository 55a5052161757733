"""One evaluation pass: logits, labels, ids, embeddings and per-unit summaries of a model."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from nbviz import records as rec
from nbviz.probes.outputs import find_tensor
from nbviz.probes.select import named_modules, unit_dim

_INPUT_KEYS = ("input", "inputs", "x", "image", "images", "data", "pixel_values")
_LABEL_KEYS = ("label", "labels", "y", "target", "targets")
_ID_KEYS = ("id", "ids", "index", "idx")


@dataclass
class Evaluation:
    ids: np.ndarray | None
    logits: np.ndarray
    labels: np.ndarray
    losses: np.ndarray
    embeddings: np.ndarray | None
    embed_name: str | None
    units: np.ndarray | None
    units_name: str | None
    inputs: np.ndarray | None


def _resolve_layer(model: nn.Module, layer: str | nn.Module, what: str) -> tuple[str, nn.Module]:
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


def _split_batch(batch: Any) -> tuple[Any, Any, Any]:
    if isinstance(batch, Mapping):
        x = next((batch[k] for k in _INPUT_KEYS if k in batch), None)
        y = next((batch[k] for k in _LABEL_KEYS if k in batch), None)
        i = next((batch[k] for k in _ID_KEYS if k in batch), None)
        if x is None or y is None:
            raise ValueError(
                f"evaluate: a dict batch needs an input key ({', '.join(_INPUT_KEYS)}) and a label "
                f"key ({', '.join(_LABEL_KEYS)}); got keys {sorted(batch)}"
            )
        return x, y, i
    if isinstance(batch, tuple | list):
        if len(batch) == 2:
            return batch[0], batch[1], None
        if len(batch) == 3:
            return batch[0], batch[1], batch[2]
    raise ValueError(
        "evaluate: the loader must yield (inputs, labels), (inputs, labels, ids) or a dict; "
        f"got {type(batch).__name__}"
        + (f" of length {len(batch)}" if hasattr(batch, "__len__") else "")
    )


def _to_device(x: Any, device: torch.device) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x).to(device)
    return x


def _unit_summary(module: nn.Module, t: torch.Tensor) -> torch.Tensor:
    """Per-sample, per-unit value: the mean over positions (conv) or time (sequences)."""
    t = t.detach().float()
    if t.dim() <= 2:
        return t.reshape(t.shape[0], -1)
    ud = unit_dim(module, t.dim())
    dims = [d for d in range(1, t.dim()) if d != ud]
    return t.mean(dim=dims)


def run_evaluation(
    model: nn.Module,
    loader: Iterable[Any],
    embed_layer: str | nn.Module | None,
    units_layer: str | nn.Module | None,
    max_samples: int,
) -> Evaluation:
    was_training = model.training
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    if embed_layer is None:
        embed = default_embed_layer(model)
    else:
        embed = _resolve_layer(model, embed_layer, "embed_layer")
    units = _resolve_layer(model, units_layer, "units_layer") if units_layer is not None else None
    captured: dict[str, list[torch.Tensor]] = {"embed": [], "units": []}
    handles = []
    if embed is not None:

        def take_input(module: nn.Module, args: Any) -> None:
            _, t = find_tensor(args)
            if t is not None:
                captured["embed"].append(t.detach().float().reshape(t.shape[0], -1).cpu())

        handles.append(embed[1].register_forward_pre_hook(take_input))
    if units is not None:

        def take_output(module: nn.Module, args: Any, output: Any) -> None:
            _, t = find_tensor(output)
            if t is not None:
                captured["units"].append(_unit_summary(module, t).cpu())

        handles.append(units[1].register_forward_hook(take_output))
    logits, labels, ids, inputs = [], [], [], []
    n_inputs = 0
    has_ids = None
    try:
        model.eval()
        with torch.no_grad():
            for number, batch in enumerate(loader):
                x, y, i = _split_batch(batch)
                y_arr = rec.to_numpy(y, "evaluate: labels").reshape(-1)
                if not len(y_arr):
                    continue  # an empty batch: nothing to evaluate
                if has_ids is None:
                    has_ids = i is not None
                elif has_ids != (i is not None):
                    raise ValueError("evaluate: some batches have ids and others do not")
                out = model(_to_device(x, device))
                _, logit = find_tensor(out)
                if logit is None:
                    raise ValueError(
                        f"evaluate: the model returned {type(out).__name__} with no float tensor"
                    )
                rows = logit.shape[0] if logit.ndim else 1
                if len(y_arr) != rows:
                    raise ValueError(
                        f"evaluate: batch {number} has {len(y_arr)} labels but the model gave "
                        f"{rows} rows of logits for its inputs"
                    )
                logits.append(logit.detach().float().cpu())
                labels.append(y_arr)
                if i is not None:
                    i_arr = rec.to_numpy(i, "evaluate: ids").reshape(-1)
                    if len(i_arr) != rows:
                        raise ValueError(
                            f"evaluate: batch {number} has {len(i_arr)} ids for {rows} samples"
                        )
                    ids.append(i_arr)
                if isinstance(x, torch.Tensor | np.ndarray) and n_inputs < max_samples:
                    arr = rec.to_numpy(x, "evaluate: inputs")[: max_samples - n_inputs]
                    inputs.append(arr)
                    n_inputs += len(arr)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    if not logits:
        raise ValueError("evaluate: the loader yielded no samples (no batches, or only empty ones)")
    logit_arr = torch.cat(logits).numpy()
    label_arr = rec.check_labels(np.concatenate(labels), len(logit_arr), None, "evaluate")
    if logit_arr.ndim == 1 and logit_arr.dtype.kind == "f":
        logit_arr = logit_arr[:, None]  # one logit per sample (squeezed): a binary model's
    logit_arr = rec.two_class_logits(logit_arr)  # so argmax, accuracy and ranks agree
    if logit_arr.ndim != 2:
        raise ValueError(
            f"evaluate: expected (N, classes) logits from the model, got shape {logit_arr.shape}"
        )
    _, losses, _, _ = rec.predictions_from(logit_arr, label_arr, "evaluate")
    emb = torch.cat(captured["embed"]).numpy() if captured["embed"] else None
    uni = torch.cat(captured["units"]).numpy() if captured["units"] else None
    return Evaluation(
        ids=np.concatenate(ids) if ids else None,
        logits=logit_arr,
        labels=label_arr,
        losses=losses,
        embeddings=emb,
        embed_name=embed[0] if embed is not None else None,
        units=uni,
        units_name=units[0] if units is not None else None,
        inputs=np.concatenate(inputs) if inputs and inputs[0].ndim >= 2 else None,
    )
