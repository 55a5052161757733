"""PyTorch Lightning: ``Trainer(logger=NbvizLogger("runs/x"), callbacks=[NbvizCallback()])``.

``NbvizLogger`` is a Lightning logger: every value of ``self.log(...)`` is
logged at the step Lightning hands its loggers (the number of optimizer steps
taken before it: ``self.global_step`` inside ``training_step``), and the
hyperparameters of ``save_hyperparameters()`` become the run's config.

``NbvizCallback`` adds what a logger cannot see:

- the probe, from ``on_train_start`` to ``on_train_end`` (options as
  ``run.watch``), one step per optimizer step (``accumulate_grad_batches``
  included), numbered as the logger's steps: the training batch whose loss is
  logged at step k is captured as step k (when k is a multiple of ``every``);
- each validation's (and test's) predictions, per-sample losses and embeddings
  (the input of the last ``nn.Linear``), at the step its metrics are logged at,
  with the validation set's order as ids; on the first one, the inputs as samples
  when they are tensors (images, rows). The logits are the LightningModule's
  own output (``self(x)`` in ``validation_step``) or a ``"logits"`` entry of the
  dict ``validation_step`` returns; the labels come from that dict
  (``"labels"``, ``"y"``, ``"target"``) or from the batch (``(x, y)``, or a
  dict with one of those keys). The validation forwards are Lightning's own:
  nothing runs twice.

The callback records into the ``NbvizLogger``'s run; without one, into its own
``path``. Several processes (``strategy="ddp"``): every rank runs the callback
and the probe, which combines the ranks' statistics through
``torch.distributed``; rank 0 writes the run. Validation predictions are
gathered from every rank when the validation loader is sharded by Lightning's
``DistributedSampler`` (unshuffled), so ids still follow the dataset's order.
"""

from __future__ import annotations

import warnings
from argparse import Namespace
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nbviz.extras import require

require("lightning", "lightning", "nbviz.integrations.lightning")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from lightning.pytorch.callbacks import Callback  # noqa: E402
from lightning.pytorch.loggers import Logger  # noqa: E402

from nbviz.integrations.eval_outputs import (  # noqa: E402
    LABEL_KEYS,
    MAX_SAMPLES,
    EvalOutputs,
    Evaluation,
)
from nbviz.integrations.options import check_watch_options, numeric  # noqa: E402
from nbviz.integrations.runs import add_config, world_size, writes  # noqa: E402
from nbviz.probes.probe import Probe  # noqa: E402
from nbviz.run import Run  # noqa: E402

__all__ = ["NbvizCallback", "NbvizLogger"]


class NbvizLogger(Logger):
    """A Lightning logger writing an nbviz run at ``path``.

    ``overwrite=True`` starts the run afresh (an existing run in ``path`` is
    replaced); otherwise a run already there is appended to, and a logged step
    replaces what was logged at that step before. ``config`` is stored beside
    the hyperparameters.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        name: str | None = None,
        config: Mapping[str, Any] | None = None,
        overwrite: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(path, str | Path) or not str(path):
            raise TypeError(f"NbvizLogger: path must be a run directory, got {path!r}")
        self.path = Path(path)
        self._name = name
        self._config: dict[str, Any] = dict(config or {})
        self._overwrite = overwrite
        self._late_config: dict[str, Any] = {}
        self._run: Run | None = None

    # ------------------------------------------------------------------ Logger API
    @property
    def name(self) -> str:
        return self._name or self.path.name

    @property
    def version(self) -> str:
        return ""

    @property
    def save_dir(self) -> str:
        return str(self.path.parent)

    @property
    def log_dir(self) -> str:
        return str(self.path)

    @property
    def experiment(self) -> Run:
        """The nbviz run (created at the first use, after Lightning set up its processes)."""
        if self._run is None:
            self._run = Run(
                self.path, config=self._config, name=self._name, overwrite=self._overwrite
            )
            self._overwrite = False  # once: a validate() after fit() appends
        return self._run

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        params = _as_dict(params)
        if self._run is None:
            self._config.update(params)
        else:  # the run's config is written when it is created: this lands at finalize
            self._late_config.update(params)

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        values = numeric(metrics)
        if values:
            # every rank calls this (a Run on another rank than 0 writes nothing), so that
            # every rank's probe names its steps alike
            self.experiment.log(int(step or 0), values, overwrite=True)

    def finalize(self, status: str) -> None:
        """Commit everything and close the run (a later log reopens it and appends)."""
        if self._run is None:
            return
        self._run.close()
        self._run = None
        if self._late_config:
            add_config(self.path, self._late_config)
            self._late_config = {}


class NbvizCallback(Callback):
    """Probe and validation predictions for a Lightning run (see the module docstring).

    Parameters
    ----------
    path:
        Run directory, used only when the Trainer has no ``NbvizLogger``.
    predictions:
        Record validation and test predictions.
    embed_layer:
        Module (or its name) whose input is the embedding; ``False`` for none;
        default the last ``nn.Linear``.
    samples:
        Store the evaluation inputs as samples on the first evaluation of a split.
    max_samples:
        Most samples per evaluation whose predictions are kept.
    **watch:
        Options of ``run.watch`` (``every``, ``hist_every``, ``layers``, ``signals``, ...).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        predictions: bool = True,
        embed_layer: str | torch.nn.Module | bool | None = None,
        samples: bool = True,
        max_samples: int = MAX_SAMPLES,
        **watch: Any,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.predictions = predictions
        self.embed_layer = embed_layer
        self.samples = samples
        self.max_samples = max_samples
        self.watch_options = check_watch_options("NbvizCallback", watch)
        self.probe: Probe | None = None
        self._own_run: Run | None = None
        self._outputs: EvalOutputs | None = None
        self._inputs: list[Any] = []

    # -------------------------------------------------------------------- the run
    def _logger(self, trainer: Any) -> NbvizLogger | None:
        return next((lg for lg in trainer.loggers if isinstance(lg, NbvizLogger)), None)

    def _run(self, trainer: Any) -> Run:
        logger = self._logger(trainer)
        if logger is not None:
            return logger.experiment
        if self.path is None:
            raise ValueError(
                "NbvizCallback: the Trainer has no NbvizLogger; add one "
                "(Trainer(logger=NbvizLogger('runs/x'), ...)) or give the callback a path"
            )
        if self._own_run is None:
            self._own_run = Run(self.path)
        return self._own_run

    # ---------------------------------------------------------------------- hooks
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        run = self._run(trainer)
        optimizers = list(trainer.optimizers)
        if len(optimizers) != 1:
            warnings.warn(
                f"nbviz: {len(optimizers)} optimizers: the probe counts a step per backward "
                "pass, which may not match the logged steps",
                stacklevel=2,
            )
        self.probe = run.watch(
            pl_module,
            optimizer=optimizers[0] if len(optimizers) == 1 else None,
            first_step=_logged_step(trainer),
            **self.watch_options,
        )

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.probe is not None:
            self.probe.close()
            self.probe = None
        if self._own_run is not None:
            self._own_run.flush()

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self.probe is not None:
            self.probe.close()
            self.probe = None
        if self._outputs is not None:
            self._outputs.close()
            self._outputs = None
        if self._own_run is not None:
            self._own_run.close()
            self._own_run = None

    def on_validation_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._start(pl_module)

    def on_test_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._start(pl_module)

    def on_validation_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int, *a: Any
    ) -> None:
        self._batch_end(outputs, batch)

    def on_test_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int, *a: Any
    ) -> None:
        self._batch_end(outputs, batch)

    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if not trainer.sanity_checking:
            self._record(trainer, "val", trainer.val_dataloaders)
        elif self._outputs is not None:
            self._outputs.clear()

    def on_test_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._record(trainer, "test", trainer.test_dataloaders)

    # -------------------------------------------------------------- predictions
    def _start(self, pl_module: Any) -> None:
        if not self.predictions:
            return
        if self._outputs is None:
            self._outputs = EvalOutputs(
                pl_module, embed_layer=self.embed_layer, max_samples=self.max_samples
            )
        self._outputs.clear()
        self._inputs = []

    def _batch_end(self, outputs: Any, batch: Any) -> None:
        if self._outputs is None:
            return
        x, labels = _inputs_and_labels(batch)
        if isinstance(outputs, Mapping) and isinstance(outputs.get("logits"), torch.Tensor):
            self._outputs.add_logits(outputs["logits"])  # what validation_step returned
            labels = next((outputs[k] for k in LABEL_KEYS if k in outputs), labels)
        self._outputs.add_labels(labels)
        if self.samples and isinstance(x, torch.Tensor):
            self._inputs.append(x.detach().cpu())

    def _record(self, trainer: Any, split: str, loaders: Any) -> None:
        if self._outputs is None:
            return
        result = self._outputs.take()
        inputs, self._inputs = self._inputs, []
        result = _gather(result, loaders, self._outputs)
        if result is None:
            return
        run = self._run(trainer)
        step = _logged_step(trainer)
        ids = result.ids
        run.log_predictions(
            step, result.evaluation.logits, result.evaluation.labels, ids, split, overwrite=True
        )
        e = result.evaluation
        if e.embeddings is not None:
            run.log_embeddings(step, e.embeddings, ids=ids, split=split, layer=e.embed_name)
        if self.samples and inputs and result.local and not len(run.sample_ids(split)):
            data = torch.cat(inputs).numpy()[: len(ids)]
            if data.ndim >= 2:
                run.log_samples(data, e.labels[: len(data)], ids=ids[: len(data)], split=split)


class _Gathered:
    def __init__(self, evaluation: Evaluation, ids: np.ndarray, local: bool) -> None:
        self.evaluation, self.ids, self.local = evaluation, ids, local


def _gather(result: Evaluation | None, loaders: Any, outputs: EvalOutputs) -> _Gathered | None:
    """One process: ids in order. Several: every rank's rows onto rank 0, in dataset order."""
    world = world_size()
    if world == 1:
        if result is None:
            return None
        return _Gathered(result, np.arange(len(result.labels)), True)
    loader = loaders[0] if isinstance(loaders, list | tuple) else loaders
    sampler = getattr(loader, "sampler", None)
    sharded = isinstance(sampler, torch.utils.data.DistributedSampler) and not sampler.shuffle
    pieces: list[Any] = [None] * world
    local = (
        None if result is None or not sharded else (result.logits, result.labels, result.embeddings)
    )
    torch.distributed.all_gather_object(pieces, local)  # every rank takes part
    if not sharded:
        outputs.note(
            "ranks", "the validation loader is not sharded by an unshuffled DistributedSampler"
        )
        return None
    if not writes() or any(p is None for p in pieces):
        return None
    # DistributedSampler(shuffle=False): rank r's j-th sample is dataset index j * world + r
    n_data = len(sampler.dataset)
    idx = np.concatenate([np.arange(len(p[1])) * world + r for r, p in enumerate(pieces)])
    keep = idx < n_data  # the sampler pads the last round with repeats
    order = np.argsort(idx[keep], kind="stable")
    logits = np.concatenate([p[0] for p in pieces])[keep][order]
    labels = np.concatenate([p[1] for p in pieces])[keep][order]
    embs = [p[2] for p in pieces]
    emb = np.concatenate(embs)[keep][order] if all(e is not None for e in embs) else None
    evaluation = Evaluation(logits, labels, emb, result.embed_name if result else None, [])
    return _Gathered(evaluation, idx[keep][order], False)


def _inputs_and_labels(batch: Any) -> tuple[Any, Any]:
    if isinstance(batch, Mapping):
        x = next((v for k, v in batch.items() if k not in LABEL_KEYS), None)
        return x, next((batch[k] for k in LABEL_KEYS if k in batch), None)
    if isinstance(batch, list | tuple) and len(batch) >= 2:
        return batch[0], batch[1]
    return batch, None


def _logged_step(trainer: Any) -> int:
    """The step Lightning hands its loggers now (what LearningRateMonitor logs at)."""
    loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
    step = getattr(loop, "_batches_that_stepped", None)
    return int(step if step is not None else trainer.global_step)


def _as_dict(params: Any) -> dict[str, Any]:
    if isinstance(params, Namespace):
        params = vars(params)
    if not isinstance(params, Mapping):
        raise TypeError(
            "NbvizLogger.log_hyperparams: expected a dict or Namespace, got "
            f"{type(params).__name__}"
        )
    return {str(k): v for k, v in params.items()}
