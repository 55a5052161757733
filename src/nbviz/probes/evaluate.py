"""One evaluation pass: logits, labels, ids, embeddings and per-unit summaries of a model.

With a ``loss_fn`` the model need not be a classifier: each batch's outputs go to
``loss_fn(outputs, targets)``, which gives one loss per sample (``reduction='none'``;
extra dims, as a per-pixel loss has, are averaged). The targets are the batch's
second item, or for a batch of inputs alone (a tensor, or a 1-tuple) the inputs
themselves: an autoencoder. A dict batch may hold ``label``/``labels`` (classes, kept
for colouring) beside ``target``/``targets``. A model whose outputs are ``(N, classes)``
logits and whose targets are class indices is still a classifier, with ``loss_fn``'s loss.

A language model is recognised by its shapes: ``(N, T, V)`` outputs against ``(N, T)``
integer targets, and evaluated token by token (:mod:`nbviz.probes.token_evaluation`);
for such a model each unit of the layers named in ``token_layers`` (and of ``units_layer``)
keeps the tokens it was most active on, within a bound on the units of all layers
together (:mod:`nbviz.probes.unit_tokens` says which layers are kept).

A little over 500 lines: one pass's gathering (:class:`_Batches`) reads a batch of each
kind (classifier, per-position classes, ``loss_fn``, tokens) into the same arrays; how a
batch is taken apart and given to the model is apart (:mod:`nbviz.probes.eval_batch`).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from nbviz import records as rec
from nbviz.probes.eval_batch import (
    NOT_A_CLASSIFIER,
    call_model,
    default_embed_layer,
    resolve_layer,
    sample_inputs,
    split_batch,
    split_for_loss,
    to_device,
    token_inputs,
)
from nbviz.probes.outputs import find_tensor
from nbviz.probes.select import named_modules, stack_blocks, unit_dim
from nbviz.probes.token_evaluation import (
    TokenArrays,
    TokenBatches,
    aligned_like_model,
    batch_mask,
    token_shapes,
    token_targets,
)
from nbviz.probes.unit_tokens import LayerTopTokens, TopTokens


@dataclass
class Evaluation:
    """What one pass gave: ``logits`` for a classifier, else ``outputs`` and ``targets``
    (the first samples' only, see :mod:`nbviz.recording.outputs`) and a loss per sample."""

    ids: np.ndarray | None
    logits: np.ndarray | None
    labels: np.ndarray | None
    losses: np.ndarray
    embeddings: np.ndarray | None
    embed_name: str | None
    units: np.ndarray | None
    units_name: str | None
    inputs: np.ndarray | None
    outputs: np.ndarray | None = None
    targets: np.ndarray | None = None
    targets_are_inputs: bool = False
    tokens: TokenArrays | None = None
    token_loss: float | None = None  # the mean loss over every position that counts
    top_tokens: list[LayerTopTokens] | None = None  # each unit's top tokens, per layer
    # layers whose top tokens were not kept -> why (see recording.unit_tokens.LEFT_OUT_REASONS)
    top_tokens_left_out: dict[str, str] | None = None
    # False where the inputs kept are one of several arguments (a tuple's first, a dict's
    # token ids): no sample's whole input, so none can be captured from them
    inputs_whole: bool = True


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
    loss_fn: Callable[[Any, Any], Any] | None = None,
    *,
    top_k: int = 5,
    ignore_index: int = -100,
    token_layers: Sequence[tuple[str, nn.Module]] = (),
    prefix: str = "",
    unit_tokens: tuple[int, int, int, int] | None = None,
) -> Evaluation:
    """One pass of ``model`` over ``loader`` under ``no_grad`` (see the module docstring).

    ``token_layers``: ``(name, module)`` pairs whose units' top tokens a language model's
    pass keeps (``units_layer`` is added, named with ``prefix``, where it is none of them by
    identity); ``unit_tokens`` is ``(k, tokens before, tokens after, most units in all)``
    of each unit's top tokens and their context (None: the constants of
    :mod:`nbviz.recording.unit_tokens`, read at the call). ``units_layer`` counts in those
    units like any layer, first; one wider than all of them alone keeps no top tokens,
    with a warning (its per-sample means are kept).
    """
    was_training = model.training
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    if embed_layer is None:
        embed = default_embed_layer(model)
    else:
        embed = resolve_layer(model, embed_layer, "embed_layer")
    units = resolve_layer(model, units_layer, "units_layer") if units_layer is not None else None
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
    layers = list(token_layers)
    if units is not None and not any(m is units[1] for _, m in layers):
        layers.append((prefix + units[0], units[1]))
    if unit_tokens is None:
        from nbviz.recording import unit_tokens as kept

        unit_tokens = (
            kept.TOP_TOKENS,
            kept.CONTEXT_BEFORE,
            kept.CONTEXT_AFTER,
            kept.MAX_TOP_TOKEN_UNITS,
        )
    acc = _Batches(max_samples)
    acc.tokens = TokenBatches(top_k, int(ignore_index))  # loss_fn's, where it has one
    by_name = dict(named_modules(model))
    blocks = [by_name[n] for stack in stack_blocks(model) for n in stack]
    named = units[1] if units is not None else None
    acc.top = TopTokens(layers, *unit_tokens, named=named, blocks=blocks)
    handles.extend(acc.top.attach())
    try:
        model.eval()
        with torch.no_grad():
            for number, batch in enumerate(loader):
                if loss_fn is None:
                    acc.classifier_batch(model, device, number, batch)
                else:
                    acc.loss_batch(model, device, number, batch, loss_fn)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    if not acc.rows:
        raise ValueError("evaluate: the loader yielded no samples (no batches, or only empty ones)")
    if acc.tokens.batches:
        if acc.logits or acc.losses:
            raise ValueError(
                "evaluate: some batches gave (samples, tokens, vocabulary) outputs against "
                "(samples, tokens) targets, a language model's, and others did not"
            )
        result = acc.by_token()
        result.top_tokens = acc.top.result()
        result.top_tokens_left_out = dict(acc.top.left_out)
        wide = [n for n, m in layers if m is named and acc.top.left_out.get(n) == "width"]
        if wide:
            warnings.warn(
                f"evaluate: units_layer {wide[0]!r} has more units than the "
                f"{unit_tokens[3]:,} whose top tokens an evaluation keeps: none of its top "
                "tokens are kept (its per-sample means are); name a narrower layer, a block's "
                "output or an MLP's hidden units",
                stacklevel=4,  # Run.evaluate's caller
            )
    else:
        if acc.logits and acc.losses and loss_fn is None:
            raise ValueError(
                "evaluate: some batches gave (samples, classes, *positions) scores against "
                "(samples, *positions) classes, a class per position's, and others did not"
            )
        result = acc.classifier() if loss_fn is None and not acc.losses else acc.by_loss()
    result.embeddings = _rows(captured["embed"])
    result.embed_name = embed[0] if embed is not None else None
    result.units = _rows(captured["units"])
    result.units_name = units[0] if units is not None else None
    return result


def _model_output(
    model: nn.Module, x: Any, device: torch.device, batch: Any, rows: int | None = None
) -> tuple[torch.Tensor, Any]:
    """The model's scores for the batch, and the loss it gave itself (None where none):
    a Hugging Face output's ``logits`` and ``loss``; else the first float tensor of the
    output, after a leading 0-d one (a ``(loss, logits, ...)`` tuple or dataclass)."""
    out = call_model(model, x, device, batch, rows)
    if isinstance(out, Mapping) and isinstance(out.get("logits"), torch.Tensor):
        # a Hugging Face output: its loss, given the labels, comes first
        return out["logits"], out.get("loss")
    own = None
    if isinstance(out, tuple | list) or (
        dataclasses.is_dataclass(out) and not isinstance(out, type)
    ):
        items = (
            list(out)
            if isinstance(out, tuple | list)
            else [getattr(out, f.name) for f in dataclasses.fields(out)]
        )
        if items and isinstance(items[0], torch.Tensor) and items[0].ndim == 0:
            own, out = items[0], tuple(items[1:])
    _, t = find_tensor(out)
    if t is None:
        raise ValueError(f"evaluate: the model returned {type(out).__name__} with no float tensor")
    return t, own


class _Batches:
    """What the batches of one pass gave, gathered (a classifier's, or by ``loss_fn``)."""

    def __init__(self, max_samples: int) -> None:
        self.max_samples = max_samples
        self.rows = 0
        self.logits: list[torch.Tensor] = []
        self.labels: list[np.ndarray] = []
        self.ids: list[np.ndarray] = []
        self.inputs: list[np.ndarray] = []
        self.losses: list[np.ndarray] = []
        self.outputs: list[np.ndarray] = []
        self.targets: list[np.ndarray] = []
        self.n_inputs = 0
        self.inputs_whole = True
        self.has_ids: bool | None = None
        self.targets_are_inputs: bool | None = None
        self.keeping = {"outputs": True, "targets": True}
        self.kept = {"outputs": 0, "targets": 0}
        self.tokens = TokenBatches()
        self.top = TopTokens([], 0, 0, 0)

    def _begin_top(self, x: Any, targets: Any, batch: Any, device: torch.device) -> None:
        """Tell the top-token hooks which positions of the batch to come count."""
        targets = to_device(targets, device).long()
        counted = targets != self.tokens.ignore_index
        mask = batch_mask(batch, device)
        if mask is not None and tuple(mask.shape) == tuple(targets.shape):
            counted &= mask.to(torch.bool)
        x = token_inputs(x)
        inputs = torch.from_numpy(x) if isinstance(x, np.ndarray) else x
        self.top.begin(counted, inputs, self.rows)

    def _keep_values(self, name: str, arr: Any, rows: int) -> None:
        """Keep a batch's outputs (or targets) while they are small enough to show: those of
        a classifier's shape (N, C) or (N,) always (they may be one), others up to
        ``MAX_VALUES_PER_EVALUATION``; once a batch's are not kept, none after it are."""
        from nbviz.recording.outputs import MAX_VALUES_PER_EVALUATION, MAX_VALUES_PER_SAMPLE

        size = int(np.prod(arr.shape[1:]))
        small = arr.ndim <= 2 or self.kept[name] + rows * size <= MAX_VALUES_PER_EVALUATION
        if not (self.keeping[name] and size <= MAX_VALUES_PER_SAMPLE and small):
            self.keeping[name] = False
            return
        if isinstance(arr, torch.Tensor):  # copied to the host only when kept
            arr = arr.detach().float().cpu().numpy()
        getattr(self, name).append(arr)
        self.kept[name] += rows * size

    def _keep(self, number: int, rows: int, x: Any, i: Any) -> None:
        """The batch's ids (checked) and, up to ``max_samples``, its inputs."""
        if self.has_ids is None:
            self.has_ids = i is not None
        elif self.has_ids != (i is not None):
            raise ValueError("evaluate: some batches have ids and others do not")
        if i is not None:
            i_arr = rec.to_numpy(i, "evaluate: ids").reshape(-1)
            if len(i_arr) != rows:
                raise ValueError(
                    f"evaluate: batch {number} has {len(i_arr)} ids for {rows} samples"
                )
            self.ids.append(i_arr)
        if isinstance(x, tuple | list | Mapping):
            self.inputs_whole = False  # one of several arguments: no sample's whole input
        x = sample_inputs(x)
        if isinstance(x, torch.Tensor | np.ndarray) and self.n_inputs < self.max_samples:
            arr = rec.to_numpy(x, "evaluate: inputs")[: self.max_samples - self.n_inputs]
            self.inputs.append(arr)
            self.n_inputs += len(arr)
        self.rows += rows

    def classifier_batch(
        self, model: nn.Module, device: torch.device, number: int, batch: Any
    ) -> None:
        x, y, i = split_batch(batch)
        if token_targets(y):
            if not len(y):
                return
            self._begin_top(x, y, batch, device)
            logit, own_loss = _model_output(model, x, device, batch, len(y))
            if token_shapes(logit, y):
                mask = batch_mask(batch, device)
                logit, y, shifted = aligned_like_model(
                    logit, to_device(y, device), own_loss, self.tokens.ignore_index
                )
                if shifted and mask is not None:
                    mask = mask[:, 1:]
                self.tokens.add(logit, y, None, mask)
                self.top.commit()
                self._keep(number, logit.shape[0], x, i)
                return
            self.top.discard()
            y_arr = rec.to_numpy(y, "evaluate: labels").reshape(-1)
        else:
            y_arr = rec.to_numpy(y, "evaluate: labels").reshape(-1)
            if not len(y_arr):
                return  # an empty batch: nothing to evaluate
            logit, _ = _model_output(model, x, device, batch, len(y_arr))
        if dense_classes(logit, y):
            self._dense_batch(number, logit, to_device(y, device), x, i)
            return
        rows = logit.shape[0] if logit.ndim else 1
        if len(y_arr) != rows:
            raise ValueError(
                f"evaluate: batch {number} has {len(y_arr)} labels but the model gave "
                f"{rows} rows of logits for its inputs"
            )
        self.logits.append(logit.detach().float().cpu())
        self.labels.append(y_arr)
        self._keep(number, rows, x, i)

    def _dense_batch(
        self, number: int, logit: torch.Tensor, y: torch.Tensor, x: Any, i: Any
    ) -> None:
        """A class per position (segmentation): ``(N, C, *positions)`` scores against
        ``(N, *positions)`` classes, torch's cross-entropy layout. Each sample's loss is the
        mean cross-entropy over its positions whose class is not ``ignore_index``."""
        rows = logit.shape[0]
        per = nn.functional.cross_entropy(
            logit.float(), y.long(), reduction="none", ignore_index=self.tokens.ignore_index
        )
        kept = (y != self.tokens.ignore_index).reshape(rows, -1)
        total = per.reshape(rows, -1).sum(dim=1)
        losses = total / kept.sum(dim=1).clamp(min=1)
        self.losses.append(losses.cpu().numpy().astype(np.float64))
        self._keep_values("outputs", logit, rows)
        # the classes as they are (whole numbers): the gallery draws them as class maps
        self._keep_values("targets", rec.to_numpy(y, "evaluate: labels"), rows)
        self._keep(number, rows, x, i)

    def loss_batch(
        self, model: nn.Module, device: torch.device, number: int, batch: Any, loss_fn: Any
    ) -> None:
        from nbviz.recording.outputs import per_sample_loss

        x, y, i, labels = split_for_loss(batch)
        if isinstance(x, torch.Tensor | np.ndarray) and (x.ndim == 0 or not len(x)):
            return  # an empty batch: nothing to evaluate
        if self.targets_are_inputs is None:
            self.targets_are_inputs = y is None
        target = to_device(x if y is None else y, device)
        if token_targets(target):
            self._begin_top(x, target, batch, device)
        known = len(y) if isinstance(y, torch.Tensor | np.ndarray) and y.ndim else None
        out, _ = _model_output(model, x, device, batch, known)
        rows = out.shape[0] if out.ndim else 1
        per = loss_fn(out, target)
        if token_shapes(out, target):  # a language model: its loss position by position
            given = per if isinstance(per, torch.Tensor) and per.shape == target.shape else None
            self.tokens.add(out, target, given, batch_mask(batch, device))
            self.top.commit()
            self._keep(number, rows, x, i)
            return
        self.top.discard()
        if not isinstance(per, torch.Tensor | np.ndarray):
            raise TypeError(
                f"evaluate: loss_fn returned {type(per).__name__}; it must return a tensor "
                "with one loss per sample (reduction='none')"
            )
        what = "evaluate: loss_fn"
        try:
            losses = per_sample_loss(per, what, rows)
        except ValueError as exc:
            raise ValueError(f"{exc} (model outputs of shape {tuple(out.shape)})") from None
        self.losses.append(losses)
        self._keep_values("outputs", out, rows)
        t_arr = rec.to_numpy(target, "evaluate: targets")
        if t_arr.ndim and len(t_arr) == rows and t_arr.dtype.kind in "biuf":
            self._keep_values("targets", t_arr, rows)
        else:
            self.keeping["targets"] = False
        if labels is not None:
            self.labels.append(rec.to_numpy(labels, "evaluate: labels").reshape(-1))
        self._keep(number, rows, x, i)

    def by_token(self) -> Evaluation:
        """A language model's pass: each sample's mean token loss, and the first samples'
        per-token arrays."""
        losses, arrays, mean = self.tokens.result()
        return self._result(logits=None, labels=None, losses=losses, tokens=arrays, token_loss=mean)

    def classifier(self) -> Evaluation:
        """A classifier's pass: logits, labels, cross-entropy per sample."""
        logit_arr = torch.cat(self.logits).numpy()
        if logit_arr.ndim == 1 and logit_arr.dtype.kind == "f":
            logit_arr = logit_arr[:, None]  # one logit per sample (squeezed): a binary model's
        logit_arr = rec.two_class_logits(logit_arr)  # so argmax, accuracy and ranks agree
        if logit_arr.ndim != 2:
            raise ValueError(
                f"evaluate: expected (N, classes) logits from the model, got shape "
                f"{logit_arr.shape}{NOT_A_CLASSIFIER}"
            )
        try:
            label_arr = rec.check_labels(
                np.concatenate(self.labels), len(logit_arr), None, "evaluate"
            )
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{exc}{NOT_A_CLASSIFIER}") from None
        _, losses, _, _ = rec.predictions_from(logit_arr, label_arr, "evaluate")
        return self._result(logits=logit_arr, labels=label_arr, losses=losses)

    def by_loss(self) -> Evaluation:
        """A pass with ``loss_fn``: outputs, targets and its loss per sample; a classifier's
        logits and labels where the outputs are ``(N, classes)`` and the targets classes."""
        losses = np.concatenate(self.losses)
        outputs = _joined(self.outputs)
        targets = _joined(self.targets)
        labels = _joined(self.labels)
        labels = labels if labels is not None and len(labels) == len(losses) else None
        whole = outputs is not None and targets is not None and len(outputs) == len(losses)
        if whole and _classes(outputs, targets) and labels is None and not self.targets_are_inputs:
            labels = rec.check_labels(targets, len(losses), None, "evaluate")
            return self._result(logits=outputs, labels=labels, losses=losses)
        if labels is not None:
            labels = rec.check_labels(labels, len(losses), None, "evaluate")
        return self._result(
            logits=None,
            labels=labels,
            losses=losses,
            outputs=outputs,
            targets=targets,
            targets_are_inputs=bool(self.targets_are_inputs),
        )

    def _result(self, **fields: Any) -> Evaluation:
        # inputs of different sizes from batch to batch (sequences) are not kept as samples
        inputs = _joined(self.inputs) if self.inputs and self.inputs[0].ndim >= 2 else None
        return Evaluation(
            ids=np.concatenate(self.ids) if self.ids else None,
            embeddings=None,
            embed_name=None,
            units=None,
            units_name=None,
            inputs=inputs,
            inputs_whole=self.inputs_whole,
            **fields,
        )


def _rows(parts: list[torch.Tensor]) -> np.ndarray | None:
    """Per-sample rows of every batch as one array (None for none, or for rows whose
    width changes from batch to batch, as a sequence's flattened features do)."""
    if not parts or any(p.shape[1:] != parts[0].shape[1:] for p in parts):
        return None
    return torch.cat(parts).numpy()


def _joined(parts: list[np.ndarray]) -> np.ndarray | None:
    """The batches' arrays as one (None for none, or batches of different shapes)."""
    if not parts:
        return None
    try:
        return np.concatenate(parts)
    except ValueError:  # batches of different shapes (e.g. variable-size targets)
        return None


def dense_classes(outputs: Any, targets: Any) -> bool:
    """Whether ``(N, C, *positions)`` outputs and ``(N, *positions)`` whole-number targets
    give a class per position (a segmentation model's, in torch's cross-entropy layout)."""
    if not isinstance(outputs, torch.Tensor) or not isinstance(targets, torch.Tensor):
        return False
    if outputs.ndim < 3 or not outputs.is_floating_point() or outputs.shape[1] < 2:
        return False
    if targets.dtype.is_floating_point or targets.dtype == torch.bool:
        return False
    return tuple(targets.shape) == (outputs.shape[0], *outputs.shape[2:])


def _classes(outputs: np.ndarray, targets: np.ndarray | None) -> bool:
    """Whether ``(N, C)`` outputs and ``(N,)`` whole-number targets below C are a classifier's."""
    if targets is None or outputs.ndim != 2 or outputs.shape[1] < 2 or targets.ndim != 1:
        return False
    if targets.dtype.kind not in "iu":
        return False
    return bool(len(targets)) and 0 <= int(targets.min()) and int(targets.max()) < outputs.shape[1]
