"""Hugging Face ``Trainer``: ``Trainer(..., callbacks=[NbvizCallback("runs/x")])``.

What the callback records, with no other line of code:

- the probe: ``run.watch(model, optimizer=...)`` from ``on_train_begin`` to
  ``on_train_end`` (options as ``run.watch``), one step per optimizer step, so
  with gradient accumulation a step is a whole accumulated batch;
- every number the Trainer logs (``loss``, ``learning_rate``, ``grad_norm``,
  ``eval_*`` metrics, ``epoch``) under its own name, at the Trainer's
  ``global_step``. The probe's steps are the same numbers: the optimizer step
  that makes ``global_step`` k is captured as step k (when k is a multiple of
  ``every``). The end-of-training summary (``train_runtime``, the mean
  ``train_loss``, ...) is one number per run, not a curve: it goes into the
  run's config under ``train_summary``;
- ``TrainingArguments`` and the model's config in the run's config, and the
  model's ``id2label`` as class names;
- for a classification model (logits ``(N, classes)``, one integer label per
  sample), each evaluation's predictions, per-sample losses and embeddings (the
  input of the last ``nn.Linear``) at the ``global_step`` it ran at, with the
  eval dataset's order as ids; on the first evaluation, the samples: the
  decoded text when the Trainer has a tokenizer (``processing_class``), the
  images for ``pixel_values``. The Trainer's own evaluation forwards are used:
  nothing runs twice.

The run directory defaults to ``<output_dir>/nbviz``. A new training (global
step 0) into a directory that already holds a run is refused unless
``overwrite=True``; resuming from a checkpoint appends to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nbviz.extras import require

require("transformers", "transformers", "nbviz.integrations.transformers")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from nbviz.integrations.eval_outputs import MAX_SAMPLES, EvalOutputs, Evaluation  # noqa: E402
from nbviz.integrations.options import check_watch_options, numeric  # noqa: E402
from nbviz.integrations.runs import add_config, world_size  # noqa: E402
from nbviz.probes.probe import Probe  # noqa: E402
from nbviz.run import Run  # noqa: E402

__all__ = ["NbvizCallback"]

#: Keys of the Trainer's end-of-training log: one value per run (its config), not a curve.
SUMMARY_KEYS = frozenset(
    {
        "train_runtime",
        "train_samples_per_second",
        "train_steps_per_second",
        "total_flos",
        "train_loss",
    }
)


class NbvizCallback(TrainerCallback):
    """Records a ``transformers.Trainer`` run into an nbviz run (see the module docstring).

    Parameters
    ----------
    path:
        The run directory (default: ``<TrainingArguments.output_dir>/nbviz``).
    overwrite:
        Start the run afresh when a new training begins in a directory that holds one.
    predictions:
        Record classification predictions at each evaluation.
    embed_layer:
        Module (or its name) whose input is stored as the embedding; ``False`` for none;
        default the last ``nn.Linear`` (a classifier head's input).
    samples:
        Store the evaluation samples (text or images) on the first evaluation.
    max_samples:
        Most samples per evaluation whose predictions are kept.
    name, config:
        The run's display name, and more configuration to store beside the Trainer's.
    **watch:
        Options of ``run.watch`` (``every``, ``hist_every``, ``layers``, ``signals``, ...).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        overwrite: bool = False,
        predictions: bool = True,
        embed_layer: str | torch.nn.Module | bool | None = None,
        samples: bool = True,
        max_samples: int = MAX_SAMPLES,
        name: str | None = None,
        config: dict[str, Any] | None = None,
        **watch: Any,
    ) -> None:
        if not isinstance(max_samples, int) or max_samples < 1:
            raise ValueError(
                f"NbvizCallback: max_samples must be a positive int, got {max_samples!r}"
            )
        self.path = Path(path) if path is not None else None
        self.overwrite = overwrite
        self.predictions = predictions
        self.embed_layer = embed_layer
        self.samples = samples
        self.max_samples = max_samples
        self.name = name
        self.extra_config = dict(config or {})
        self.watch_options = check_watch_options("NbvizCallback", watch)
        self.run: Run | None = None
        self.probe: Probe | None = None
        self._outputs: EvalOutputs | None = None
        self._training = False
        self._summary: dict[str, float] = {}
        self._label_names: list[str] = ["labels"]

    # ------------------------------------------------------------------ events
    def on_init_end(
        self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any
    ) -> None:
        self._attach_outputs(args, model)

    def on_train_begin(
        self,
        args: Any,
        state: Any,
        control: Any,
        model: Any = None,
        optimizer: Any = None,
        **kw: Any,
    ) -> None:
        self._attach_outputs(args, model)
        run = self._open(args, model, fresh=state.global_step == 0)
        self._training = True
        self._summary = {}
        if model is not None:
            self.probe = run.watch(
                model,
                optimizer=_torch_optimizer(optimizer),
                first_step=int(state.global_step) + 1,
                **self.watch_options,
            )

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
        values = {k: float(v) for k, v in numeric(logs or {}).items()}
        if self._training and "train_runtime" in values:  # the end-of-training summary
            self._summary = {k: v for k, v in values.items() if k in SUMMARY_KEYS}
            values = {k: v for k, v in values.items() if k not in SUMMARY_KEYS}
        if not values:
            return
        run = self._open(args, kw.get("model"), fresh=False)
        run.log(int(state.global_step), values, overwrite=True)

    def on_evaluate(
        self, args: Any, state: Any, control: Any, metrics: Any = None, **kw: Any
    ) -> None:
        self._record(args, state, _split_of(metrics, "eval"), kw)

    def on_predict(
        self, args: Any, state: Any, control: Any, metrics: Any = None, **kw: Any
    ) -> None:
        self._record(args, state, _split_of(metrics, "test"), kw)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self._outputs is not None:
            self._outputs.clear()  # eval-mode forwards outside an evaluation are not one

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self._training = False
        if self.probe is not None:
            self.probe.close()
            self.probe = None
        self._close_run()
        if self._summary:
            add_config(self._run_dir(args), {"train_summary": self._summary})

    # ------------------------------------------------------------------ helpers
    def close(self) -> None:
        """Close the probe and the run and remove the evaluation hooks (idempotent)."""
        if self.probe is not None:
            self.probe.close()
            self.probe = None
        if self._outputs is not None:
            self._outputs.close()
            self._outputs = None
        self._close_run()

    def _run_dir(self, args: Any) -> Path:
        if self.path is not None:
            return self.path
        return Path(getattr(args, "output_dir", None) or "trainer_output") / "nbviz"

    def _open(self, args: Any, model: Any, *, fresh: bool) -> Run:
        if self.run is not None:
            return self.run
        path = self._run_dir(args)
        if fresh and not self.overwrite and _holds_steps(path):
            raise FileExistsError(
                f"NbvizCallback: {path} already holds a run; pass NbvizCallback({str(path)!r}, "
                "overwrite=True) to start it afresh, or another path"
            )
        config = {"training_args": _training_args(args), **self.extra_config}
        model_config = getattr(model, "config", None)
        if model_config is not None and hasattr(model_config, "to_dict"):
            config["model_config"] = model_config.to_dict()
        self.run = Run(
            path,
            config=config,
            name=self.name,
            class_names=_class_names(model),
            overwrite=fresh and self.overwrite,
        )
        return self.run

    def _close_run(self) -> None:
        if self.run is not None:
            self.run.close()
            self.run = None

    def _attach_outputs(self, args: Any, model: Any) -> None:
        if self._outputs is not None or model is None or not self.predictions:
            return
        self._label_names = list(getattr(args, "label_names", None) or ["labels"])

        def labels_of(a: tuple, kw: dict) -> Any:
            return next((kw[n] for n in self._label_names if n in kw), None)

        def inputs_of(a: tuple, kw: dict) -> Any:
            for key in ("input_ids", "pixel_values"):
                value = kw.get(key)
                if isinstance(value, torch.Tensor):
                    return (key, value.detach().cpu())
            return None

        self._outputs = EvalOutputs(
            model,
            labels_of=labels_of,
            inputs_of=inputs_of,
            embed_layer=self.embed_layer,
            max_samples=self.max_samples,
        )

    def _record(self, args: Any, state: Any, split: str, kw: dict[str, Any]) -> None:
        try:
            result = self._outputs.take() if self._outputs is not None else None
            if result is not None and world_size() > 1:
                self._outputs.note(
                    "ranks", "under several processes each rank sees only its share of it"
                )
            elif result is not None:
                self._log_evaluation(args, state, split, kw, result)
        finally:
            if not self._training:  # an evaluation after train(): leave the run closed again
                self._close_run()

    def _log_evaluation(
        self, args: Any, state: Any, split: str, kw: dict[str, Any], result: Evaluation
    ) -> None:
        run = self._open(args, kw.get("model"), fresh=False)
        step = int(state.global_step)
        ids = np.arange(len(result.labels))
        run.log_predictions(
            step, result.logits, result.labels, ids=ids, split=split, overwrite=True
        )
        if result.embeddings is not None:
            run.log_embeddings(
                step, result.embeddings, ids=ids, split=split, layer=result.embed_name
            )
        if self.samples and not len(run.sample_ids(split)):
            data = _sample_data(result, kw.get("processing_class") or kw.get("tokenizer"))
            if data is not None:
                n = len(data)
                run.log_samples(data, result.labels[:n], ids=ids[:n], split=split)


def _sample_data(result: Evaluation, processor: Any) -> Any:
    parts = [x for x in result.inputs if x is not None]
    if not parts or len(parts) != len(result.inputs):
        return None
    kinds = {k for k, _ in parts}
    if kinds == {"input_ids"}:
        decode = getattr(processor, "batch_decode", None)
        if decode is None:
            return None
        rows = [row for _, t in parts for row in t.tolist()]
        return [str(text) for text in decode(rows, skip_special_tokens=True)]
    if kinds == {"pixel_values"} and all(t.dim() == 4 for _, t in parts):
        return torch.cat([t for _, t in parts]).float().numpy()
    return None


def _split_of(metrics: Any, default: str) -> str:
    """The split named by the metric prefix: ``eval`` -> ``val``, ``eval_x`` -> ``val_x``."""
    prefix = default
    for key in metrics or {}:
        if key.endswith("_runtime"):
            prefix = key[: -len("_runtime")]
            break
    if prefix == "eval":
        return "val"
    if prefix.startswith("eval_"):
        return "val_" + prefix[len("eval_") :]
    return prefix


def _training_args(args: Any) -> dict[str, Any]:
    to_dict = getattr(args, "to_dict", None)
    return dict(to_dict()) if to_dict is not None else {}


def _class_names(model: Any) -> list[str] | None:
    config = getattr(model, "config", None)
    id2label = getattr(config, "id2label", None)
    if not id2label:
        return None
    try:
        return [str(id2label[i]) for i in range(len(id2label))]
    except KeyError:  # ids that are not 0..n-1
        return None


def _holds_steps(path: Path) -> bool:
    from nbviz.run import open_run
    from nbviz.store import DB_NAME

    if not (path / DB_NAME).exists():
        return False
    with open_run(path) as run:
        return bool(run.scalar_names()) or bool(run.recorded_layers())


def _torch_optimizer(optimizer: Any) -> torch.optim.Optimizer | None:
    """The torch optimizer inside accelerate's wrapper (whose ``step`` runs its hooks)."""
    seen = 0
    while optimizer is not None and seen < 4:
        inner = getattr(optimizer, "optimizer", None)
        if not isinstance(inner, torch.optim.Optimizer):
            break
        optimizer, seen = inner, seen + 1
    return optimizer if isinstance(optimizer, torch.optim.Optimizer) else None
