"""What a classifier's evaluation forwards produce, gathered for ``run.log_predictions``.

A trainer runs the evaluation itself; an integration cannot call
``run.evaluate`` without running the model twice. Instead, hooks on the model
keep what the trainer's own evaluation forwards compute: the logits, the
labels, the input of the embedding layer (default: the last ``nn.Linear``, as
``run.evaluate`` takes it) and the inputs to show as samples. Only forwards in
``eval()`` mode count; training forwards pass through untouched. At most
``max_samples`` rows are kept between two calls of :meth:`EvalOutputs.take`.

The hooks only read detached tensors: the model's outputs are unchanged, and
:meth:`EvalOutputs.close` removes every hook.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from nbviz.probes.eval_batch import default_embed_layer
from nbviz.probes.outputs import find_tensor
from nbviz.probes.select import named_modules

#: Most rows kept for one evaluation (as ``run.evaluate``'s ``max_samples``).
MAX_SAMPLES = 20_000
#: Where a batch (or what a validation step returns) holds its labels.
LABEL_KEYS = ("labels", "label", "y", "target", "targets")


@dataclass
class Batch:
    """One evaluation batch, on the host."""

    logits: np.ndarray  # (n, classes) float32
    labels: np.ndarray | None  # (n,) int64, or None until the trainer hands them over
    embeddings: np.ndarray | None  # (n, d) float32
    inputs: Any  # whatever ``inputs_of`` returned for the batch


@dataclass
class Evaluation:
    """Every batch of one evaluation, joined."""

    logits: np.ndarray
    labels: np.ndarray
    embeddings: np.ndarray | None
    embed_name: str | None
    inputs: list[Any]


def logits_of(output: Any) -> torch.Tensor | None:
    """A model output's logits: ``.logits`` (Hugging Face), else its first float tensor."""
    logits = getattr(output, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    if isinstance(output, dict) and isinstance(output.get("logits"), torch.Tensor):
        return output["logits"]
    _, tensor = find_tensor(output)
    return tensor


def as_labels(value: Any) -> np.ndarray | None:
    """Class labels as int64, or None when ``value`` is not a 1-d integer tensor/array."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "iu" or value.ndim != 1:
        return None
    return value.astype(np.int64)


class EvalOutputs:
    """Hooks on ``model`` that keep its evaluation outputs until :meth:`take`.

    ``labels_of(args, kwargs)`` finds the labels in the forward's arguments (None
    when they come later, through :meth:`add_labels`); ``inputs_of(args, kwargs)``
    what to keep of the inputs for the samples (None: nothing).
    ``embed_layer``: a module name or module, False for no embeddings, None for the
    last ``nn.Linear``.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        labels_of: Callable[[tuple, dict], Any] | None = None,
        inputs_of: Callable[[tuple, dict], Any] | None = None,
        embed_layer: str | nn.Module | bool | None = None,
        max_samples: int = MAX_SAMPLES,
    ) -> None:
        if not isinstance(max_samples, int) or max_samples < 1:
            raise ValueError(f"max_samples must be a positive integer, got {max_samples!r}")
        self._labels_of = labels_of
        self._inputs_of = inputs_of
        self._max = max_samples
        self._batches: list[Batch] = []
        self._rows = 0
        self._pending_embedding: list[np.ndarray] = []
        self._skipped: set[str] = set()
        self._warned: set[str] = set()
        self.embed_name: str | None = None
        self._handles = [model.register_forward_hook(self._on_output, with_kwargs=True)]
        self._model = model
        embed = _embed_module(model, embed_layer)
        if embed is not None:
            self.embed_name = embed[0]
            self._handles.append(embed[1].register_forward_pre_hook(self._on_embed_input))

    # ------------------------------------------------------------------ hooks
    def _collecting(self) -> bool:
        return not self._model.training and self._rows < self._max

    def _on_embed_input(self, module: nn.Module, args: Any) -> None:
        if not self._collecting():
            return
        _, t = find_tensor(args)
        if t is not None and t.dim() >= 1:
            self._pending_embedding.append(t.detach().float().reshape(t.shape[0], -1).cpu().numpy())

    def _on_output(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        if not self._collecting():
            self._pending_embedding.clear()
            return
        pending, self._pending_embedding = self._pending_embedding, []
        logits = logits_of(output)
        if logits is None or not logits.is_floating_point() or logits.dim() not in (1, 2):
            # not a classifier's output; or a trainer's call of a step method through the
            # module (Lightning under DDP), whose own forward runs inside it
            self._skipped.add(type(output).__name__)
            return
        arr = logits.detach().float().cpu().numpy()
        arr = arr[:, None] if arr.ndim == 1 else arr
        n = min(arr.shape[0], self._max - self._rows)
        labels = None
        if self._labels_of is not None:
            labels = as_labels(self._labels_of(args, kwargs))
            if labels is None or labels.shape[0] != arr.shape[0]:
                self._skipped.add("unlabelled")  # inference, or not a classifier
                return
            labels = labels[:n]
        emb = pending[-1][:n] if pending and pending[-1].shape[0] == arr.shape[0] else None
        inputs = self._inputs_of(args, kwargs) if self._inputs_of is not None else None
        self._batches.append(Batch(arr[:n], labels, emb, _head(inputs, n)))
        self._rows += n

    def add_logits(self, logits: Any) -> None:
        """Logits handed over by the trainer for the batch since the last labels.

        They replace whatever the model's own forward hook kept for that batch.
        """
        waiting = [b for b in self._batches if b.labels is None]
        if waiting:
            emb = waiting[-1].embeddings
        else:
            emb = self._pending_embedding[-1] if self._pending_embedding else None
        self._drop(waiting)
        self._pending_embedding = []
        if not self._collecting():
            return
        t = logits.detach().float() if isinstance(logits, torch.Tensor) else None
        if t is None or t.dim() not in (1, 2):
            self.note("logits", "the logits returned are not an (N, classes) tensor")
            return
        arr = t.cpu().numpy()
        arr = arr[:, None] if arr.ndim == 1 else arr
        n = min(arr.shape[0], self._max - self._rows)
        emb = emb[:n] if emb is not None and emb.shape[0] == arr.shape[0] else None
        self._batches.append(Batch(arr[:n], None, emb, None))
        self._rows += n

    def add_labels(self, labels: Any) -> None:
        """Labels for the batches since the last call (a trainer that hands them out later)."""
        waiting = [b for b in self._batches if b.labels is None]
        if not waiting:
            return
        arr = as_labels(labels)
        n = sum(len(b.logits) for b in waiting)
        if arr is None or arr.shape[0] < n:
            self.note(
                "labels", "the evaluation batches carry no class labels (one integer per sample)"
            )
            self._drop(waiting)
            return
        at = 0
        for b in waiting:
            b.labels = arr[at : at + len(b.logits)]
            at += len(b.logits)

    def _drop(self, batches: list[Batch]) -> None:
        keep = [b for b in self._batches if not any(b is x for x in batches)]
        self._batches = keep
        self._rows = sum(len(b.logits) for b in keep)

    def note(self, key: str, message: str) -> None:
        """Warn once per ``key`` that predictions are not recorded, and why."""
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(f"nbviz: evaluation predictions not recorded: {message}", stacklevel=2)

    # ------------------------------------------------------------------ results
    def clear(self) -> None:
        self._batches, self._rows, self._pending_embedding = [], 0, []
        self._skipped: set[str] = set()

    def take(self) -> Evaluation | None:
        """Everything kept since the last take (None if nothing usable), and start afresh."""
        batches = [b for b in self._batches if b.labels is not None]
        skipped = self._skipped
        self.clear()
        if not batches:
            if "unlabelled" in skipped:
                self.note("labels", "its batches carry no class labels (one integer per sample)")
            elif skipped:
                kinds = ", ".join(sorted(skipped))
                self.note("logits", f"the model's outputs ({kinds}) hold no (N, classes) logits")
            return None
        widths = {b.logits.shape[1] for b in batches}
        if len(widths) != 1:
            self.note("widths", f"the batches' logits have different widths {sorted(widths)}")
            return None
        embs = [b.embeddings for b in batches]
        return Evaluation(
            logits=np.concatenate([b.logits for b in batches]),
            labels=np.concatenate([b.labels for b in batches]),
            embeddings=np.concatenate(embs) if all(e is not None for e in embs) else None,
            embed_name=self.embed_name,
            inputs=[b.inputs for b in batches],
        )

    def close(self) -> None:
        """Remove every hook (idempotent)."""
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self.clear()


def _head(inputs: Any, n: int) -> Any:
    if inputs is None:
        return None
    if isinstance(inputs, torch.Tensor | np.ndarray | list):
        return inputs[:n]
    return inputs


def _embed_module(
    model: nn.Module, layer: str | nn.Module | bool | None
) -> tuple[str, nn.Module] | None:
    if layer is False:
        return None
    if layer is None or layer is True:
        return default_embed_layer(model)
    for name, module in named_modules(model):
        if module is layer or name == layer:
            return name, module
    names = ", ".join(n for n, _ in named_modules(model)[-8:])
    raise ValueError(f"embed_layer={layer!r} is not a module of the model (its last ones: {names})")
