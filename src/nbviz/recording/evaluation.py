"""``Run.evaluate``: one pass over a loader, recorded as predictions, embeddings,
samples and captures, and summed up as ``{split}_loss`` and ``{split}_accuracy``.

With a ``loss_fn``, a model that is not a classifier is recorded by its loss per
sample, its outputs and targets (``Run.log_outputs``), and summed up as
``{split}_loss`` alone.

The forward pass is :func:`nbviz.probes.evaluate.run_evaluation`; under
``torch.distributed`` every rank's samples are gathered onto rank 0, which
records them, while the other ranks only log the metrics of the whole pass.

A language model's pass also keeps each unit's top-activating tokens for the layers the
run watches on that model and ``units_layer`` (:mod:`nbviz.recording.unit_tokens`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from nbviz import records as rec

if TYPE_CHECKING:  # torch is imported where a model is run
    from torch import nn

    from nbviz.probes.evaluate import Evaluation

__all__ = ["evaluate_into"]

# the per-token arrays carry which positions count in their mask: no target is ignored
_IGNORED = -(2**62)


def evaluate_into(
    run: Any,
    step: Any,
    model: nn.Module,
    loader: Iterable[Any],
    split: Any,
    embed_layer: str | nn.Module | None,
    units_layer: str | nn.Module | None,
    *,
    samples: bool,
    max_samples: int,
    log_scalars: bool,
    capture_ids: Sequence[int],
    loss_fn: Any = None,
    tokens: Any = None,
    top_k: int = 5,
    ignore_index: int | None = None,
) -> dict[str, float]:
    """Evaluate ``model`` on ``loader`` into ``run``, a :class:`nbviz.Run` (see ``Run.evaluate``).

    Returns the metrics it logged (or would have, with ``log_scalars=False``).
    """
    from nbviz.probes.evaluate import run_evaluation

    step = rec.check_step(step, "evaluate")
    split = rec.check_split(split, "evaluate")
    if loss_fn is not None and not callable(loss_fn):
        raise TypeError(
            f"evaluate: loss_fn must be a function (outputs, targets) -> one loss per sample, "
            f"got {type(loss_fn).__name__}"
        )
    if loss_fn is not None and run._dist is not None:
        raise ValueError(
            "evaluate: loss_fn under torch.distributed is not supported; evaluate on one "
            "process (e.g. rank 0 alone) with a Run(..., distributed=False)"
        )
    from nbviz.recording.tokens import decoder

    decoder(tokens, "evaluate")  # checked before the pass
    for arg, value, low in (("top_k", top_k, 0), ("ignore_index", ignore_index, None)):
        if arg == "ignore_index" and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"evaluate: {arg} must be an int, got {value!r}")
        if low is not None and value < low:
            raise ValueError(f"evaluate: {arg} must be at least {low}, got {value}")
    ignore_index = _padding_index(ignore_index, loss_fn)
    prefix = run._layer_prefix.get(model, "")  # layers named as the model's probe names them
    embed_layer, units_layer = _own_names(model, prefix, embed_layer, units_layer)
    watched = [
        (name, module)
        for probe in run._probes
        if not probe.closed and probe.model is model
        for name, module in probe.modules
    ]
    result = run_evaluation(
        model,
        loader,
        embed_layer,
        units_layer,
        max_samples,
        loss_fn,
        top_k=int(top_k),
        ignore_index=int(ignore_index),
        token_layers=watched,
        prefix=prefix,
    )
    if result.tokens is not None and run._dist is not None:
        raise ValueError(
            "evaluate: a language model's per-token evaluation under torch.distributed is not "
            "supported; evaluate on one process with a Run(..., distributed=False)"
        )
    metrics = None
    if run._dist is not None:  # every rank's samples, once, onto rank 0
        from nbviz.probes.distributed import gather_evaluation

        def need_inputs() -> bool:
            run._writer.flush()
            return samples and not len(run.sample_ids(split))

        gathered, metrics = gather_evaluation(run._dist, result, loader, split, need_inputs)
        if gathered is None:  # not rank 0: same metrics, nothing to write
            if log_scalars:
                run.log(step, overwrite=True, **metrics)
            return metrics
        result = gathered
    ids = result.ids if result.ids is not None else np.arange(len(result.losses))
    _record(run, step, split, result, ids, prefix, samples, loss_fn is not None, tokens)
    for i, sample in _captured(result, ids, capture_ids):
        run.capture(model, sample, i, split=split, step=step)
    if metrics is None and result.token_loss is not None:  # every position that counts alike
        metrics = {f"{split}_loss": float(result.token_loss)}
    if metrics is None:
        with np.errstate(invalid="ignore"):  # +inf and -inf losses: a NaN mean, as it is
            metrics = {f"{split}_loss": float(np.mean(result.losses))}
        if result.logits is not None:
            # NaN/inf logits predict no class: never right; with no class at all, no accuracy
            pred = rec.predictions_from(np.asarray(result.logits), None, "evaluate")[0]
            has_class = pred != rec.NONFINITE_PRED
            metrics[f"{split}_accuracy"] = (
                float(np.mean(pred == result.labels)) if has_class.any() else float("nan")
            )
    if log_scalars:
        run.log(step, overwrite=True, **metrics)
    return metrics


def _own_names(model: nn.Module, prefix: str, *layers: Any) -> tuple[Any, ...]:
    """Layer names as the model knows them: "D.1", as the views name it, is the model's "1"."""
    if not prefix:
        return layers
    own = dict(model.named_modules())
    return tuple(
        x[len(prefix) :] if isinstance(x, str) and x.startswith(prefix) and x not in own else x
        for x in layers
    )


def _record(
    run: Any,
    step: int,
    split: str,
    result: Evaluation,
    ids: np.ndarray,
    prefix: str,
    samples: bool,
    custom_loss: bool,
    tokens: Any = None,
) -> None:
    """Predictions (or outputs, or per-token losses), embeddings, unit values and (the
    first time for a split) the samples."""
    # an evaluation again at the same step (a cell run again) replaces the last one whole
    if result.tokens is not None:
        t = result.tokens
        run.log_token_losses(
            step,
            t.losses,
            t.targets,
            ids=ids[: len(t.losses)],
            split=split,
            mask=t.counted,
            ignore_index=_IGNORED,
            top_ids=t.top_ids,
            top_probs=t.top_probs,
            tokens=tokens,
            overwrite=True,
        )
        if len(t.losses) < len(ids):  # the samples past those kept: their losses alone
            rows = [
                (split, step, int(i), None, None, float(v), None)
                for i, v in zip(ids[len(t.losses) :], result.losses[len(t.losses) :], strict=True)
            ]
            run._writer.insert("predictions", rows)
        _record_top_tokens(run, step, split, result, ids, tokens)
    elif result.logits is not None:
        loss = result.losses if custom_loss else None  # loss_fn's, else cross-entropy
        run.log_predictions(
            step, result.logits, result.labels, ids=ids, split=split, loss=loss, overwrite=True
        )
    else:
        run.log_outputs(
            step,
            result.losses,
            result.outputs,
            result.targets,
            ids=ids,
            split=split,
            labels=result.labels,
            targets_are_inputs=result.targets_are_inputs,
            overwrite=True,
        )
    if result.embeddings is not None:
        layer = prefix + result.embed_name if result.embed_name else None
        run.log_embeddings(step, result.embeddings, ids=ids, split=split, layer=layer)
    if result.units is not None:
        layer = prefix + result.units_name if result.units_name else None
        run.log_embeddings(step, result.units, ids=ids, split=split, layer=layer, kind="units")
    if samples and result.inputs is not None:
        run._writer.flush()
        if not len(run.sample_ids(split)):
            n = len(result.inputs)
            labels = result.labels[:n] if result.labels is not None else None
            data = result.inputs
            if result.tokens is not None and tokens is not None and data.ndim == 2:
                data = _decoded(data, tokens)  # token ids read as the text they are
            run.log_samples(data, labels, ids=ids[:n], split=split)


def _record_top_tokens(
    run: Any, step: int, split: str, result: Evaluation, ids: np.ndarray, tokens: Any
) -> None:
    """Each unit's top tokens per layer (an evaluation again at ``step`` replaces them),
    the layers left out of them (:func:`left_out_meta`), and the texts of their context
    tokens."""
    from nbviz.recording import unit_tokens as kept
    from nbviz.recording.tokens import decoder

    run._writer.execute("DELETE FROM unit_tokens WHERE split = ? AND step = ?", (split, step))
    run._writer.flush()
    before = run.meta(kept.LEFT_OUT_KEY)
    left_out = result.top_tokens_left_out or {}
    after = kept.left_out_meta(before, split, step, left_out, kept.MAX_TOP_TOKEN_UNITS)
    if after != before:
        run._writer.set_meta(kept.LEFT_OUT_KEY, after)
    layers = result.top_tokens or []
    if not layers:
        return
    rows = kept.unit_token_rows(step, split, layers, ids, kept.CONTEXT_BEFORE)
    run._writer.insert("unit_tokens", rows)
    decode = decoder(tokens, "evaluate")
    if decode is None:
        return
    run._writer.flush()  # the texts log_token_losses just gave, joined
    texts = {str(k): v for k, v in run.token_texts().items()}
    n = len(texts)
    for i in kept.context_ids(layers).tolist():
        texts.setdefault(str(i), decode(int(i)))
    if len(texts) != n:
        run._writer.set_meta("token_texts", texts)


def _decoded(inputs: np.ndarray, tokens: Any) -> list[str]:
    """Each row of token ids as text: its tokens' texts joined (by spaces for a vocabulary
    of words, as they are for tokens that carry their own spaces)."""
    from nbviz.recording.tokens import decoder

    decode = decoder(tokens, "evaluate")
    assert decode is not None
    rows = [[decode(int(i)) for i in row] for row in inputs.tolist()]
    spaced = any(t[:1].isspace() or t[-1:].isspace() for row in rows for t in row)
    return [("" if spaced else " ").join(row) for row in rows]


def _captured(
    result: Evaluation, ids: np.ndarray, capture_ids: Sequence[int]
) -> list[tuple[int, Any]]:
    """``(id, input)`` of each sample in ``capture_ids``; all must be among the inputs kept."""
    if not len(capture_ids):
        return []
    if not result.inputs_whole:
        raise ValueError(
            f"evaluate: capture_ids {list(capture_ids)[:10]} need each sample's whole input, "
            "and this loader's inputs are several arguments (a tuple or a dict); capture "
            "those samples with run.capture(model, sample, id) instead"
        )
    inputs = result.inputs if result.inputs is not None else ()
    where = {int(i): k for k, i in enumerate(ids[: len(inputs)])}
    lost = [int(i) for i in capture_ids if int(i) not in where]
    if lost:
        raise ValueError(
            f"evaluate: capture_ids {lost[:10]} are not among the {len(where)} inputs "
            "kept (tensor inputs, the first max_samples); use run.capture(model, "
            "sample, id=...) for them"
        )
    return [(int(i), inputs[where[int(i)]]) for i in capture_ids]


def _padding_index(ignore_index: int | None, loss_fn: Any) -> int:
    """The target id that marks padding: ``ignore_index`` or ``loss_fn.ignore_index``
    (-100, PyTorch's, where neither says); ValueError where both say and differ."""
    from_loss = getattr(loss_fn, "ignore_index", None) if loss_fn is not None else None
    if from_loss is None:
        return -100 if ignore_index is None else int(ignore_index)
    if ignore_index is not None and int(from_loss) != int(ignore_index):
        raise ValueError(
            f"evaluate: ignore_index={int(ignore_index)} but loss_fn.ignore_index is "
            f"{int(from_loss)}; give the same value, or only one of them"
        )
    return int(from_loss)
