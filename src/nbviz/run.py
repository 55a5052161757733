"""Run: one training run on disk, written by the loop and read by the views.

``Run(path)`` creates the run directory (or opens it and appends), ``watch``
attaches probes, ``log*`` record what the loop knows, and every reading method
of :class:`RunView` works on it. ``open_run(path)`` gives a read-only view that
follows a run another process is still writing.

This is the facade: reading is :class:`nbviz.store.Reader`'s, and what the
recording methods do beyond ``log`` is in :mod:`nbviz.recording` (one module
per concept: rows of what is logged, evaluation, capture, profile, ranks,
watched models). It is longer than most modules because it is the public API:
most of its lines are the docstrings of the methods a user calls, each body a
few lines handing over to the module that does the work.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from nbviz import records as rec
from nbviz.arguments import MAX_STEP
from nbviz.recording import ranks, tables
from nbviz.recording.capture import capture_rows
from nbviz.recording.evaluation import evaluate_into
from nbviz.recording.profiling import record_profile
from nbviz.recording.watching import check_watch_options, probes_replaced
from nbviz.store import DB_NAME, Reader, Writer

if TYPE_CHECKING:  # torch is only needed to watch or evaluate a model
    from torch import nn

    from nbviz.analysis.profile import Profile
    from nbviz.probes.curvature import Curvature
    from nbviz.probes.merge import ProbeMeta
    from nbviz.probes.probe import Probe


class RunView(Reader):
    """The reading side of a run: frames and arrays from the run store.

    Everything here works without torch and while another process writes.
    """

    @property
    def path(self) -> Path:
        return self.run_dir

    @property
    def name(self) -> str:
        """The run's name: its directory's (also where the run was opened by its file)."""
        named = self.run_dir.parent if self.run_dir.name == DB_NAME else self.run_dir
        return self.meta("name") or named.name

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.meta("config") or {})

    @property
    def class_names(self) -> list[str] | None:
        names = self.meta("class_names")
        return list(names) if names is not None else None

    def layers(self) -> pd.DataFrame:
        """The model summary: name, type, params, shape, watched (one row per module)."""
        model = self.meta("model") or {}
        rows = model.get("modules") or []
        columns = ["name", "type", "depth", "params", "own_params", "trainable", "shape"]
        columns += ["watched", "note"]
        frame = pd.DataFrame(rows, columns=columns)
        return frame

    def diagnose(self) -> pd.DataFrame:
        """Findings about this run: what is broken, where, since when, and what follows
        from what (columns id, cause, root; see :mod:`nbviz.analysis.diagnose`)."""
        from nbviz.analysis.diagnose import diagnose

        return diagnose(self)

    def triage(self) -> pd.DataFrame:
        """The verdict: the likely causes (architecture, data, learning_rate, optimizer,
        numerics), most likely first, or one ``healthy`` row; columns cause, score,
        summary, evidence, advice, findings (see :mod:`nbviz.analysis.triage`)."""
        from nbviz.analysis.triage import triage

        return triage(self)

    def sample_dynamics(self, split: str = "train") -> pd.DataFrame:
        """Per sample of ``split``, over its logged evaluations: id, label, confidence,
        variability, correctness, aum, mislabel_score (see :mod:`nbviz.analysis.dynamics`)."""
        from nbviz.analysis.dynamics import sample_dynamics

        return sample_dynamics(self, split)

    def __repr__(self) -> str:
        return f"<nbviz run {self.name!r} at {self.run_dir}>"


def open_run(path: str | Path) -> RunView:
    """Open a run read-only; it follows a run that another process is writing."""
    return RunView(path)


class Run(RunView):
    """A run being recorded: create it, or open an existing one and append.

    Parameters
    ----------
    path:
        The run directory (created if missing).
    config:
        Hyperparameters and anything else that describes the run; shown beside
        its metrics in ``RunsTable``. Merged into what an existing run holds.
    name:
        A display name (default: the directory name).
    class_names:
        Names of the classes, index = label.
    overwrite:
        Start the run afresh: an existing run in ``path`` is deleted first
        (its database files only). Useful in a notebook cell that is run again;
        without it, logging a step that is already recorded is an error.
    distributed:
        Under ``torch.distributed`` with several ranks (the default ``None``
        detects it; ``True`` requires it; ``False`` ignores it): create the run
        on every rank with the same path; rank 0 writes it, the other ranks
        write nothing (their ``log`` calls are dropped, ``watch`` and
        ``evaluate`` combine every rank's data onto rank 0).
    """

    def __init__(
        self,
        path: str | Path,
        config: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        class_names: Sequence[str] | None = None,
        overwrite: bool = False,
        distributed: bool | None = None,
    ) -> None:
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise NotADirectoryError(f"Run: {path} exists and is not a directory")
        self._dist = ranks.rank_context(distributed)
        writes = self._dist is None or self._dist.writes
        if writes and overwrite:
            for suffix in ("", "-wal", "-shm"):
                (path / f"{DB_NAME}{suffix}").unlink(missing_ok=True)
        # a rank that does not write keeps nothing and touches nothing on disk
        self._writer: Writer = Writer(path) if writes else ranks.null_writer(path)
        super().__init__(path, must_exist=writes)
        self._probes: list[Probe] = []
        self._probe_meta: ProbeMeta | None = None
        # the layer-name prefix of each watched model (its probe's name=), for evaluate
        self._layer_prefix: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()
        self._last_step: dict[str, int] = {}
        if not writes:
            self._class_names = list(class_names) if class_names is not None else None
            return
        self._last_step.update(
            (key, int(step))
            for key, step in self._q("SELECT name, max(step) FROM scalars GROUP BY name")
        )
        self._class_names: list[str] | None = self.class_names
        if config is not None:
            if not isinstance(config, Mapping):
                raise TypeError(f"Run: config must be a mapping, got {type(config).__name__}")
            merged = {**self.config, **rec.jsonable(dict(config), "config")}
            self._writer.set_meta("config", merged)
        if name is not None:
            name = name if isinstance(name, str) else str(name)
            self._writer.set_meta("name", rec.check_text(name, "Run", "name"))
        if class_names is not None:
            self._set_class_names(class_names)
        try:
            import torch

            self._writer.set_meta("torch_version", torch.__version__)
        except ImportError:  # pragma: no cover - reading-only installs
            pass
        self._writer.flush()

    # ----------------------------------------------------------------- reading
    def _conn(self) -> Any:
        # a run reads what it has logged: commit queued rows first
        writer = getattr(self, "_writer", None)
        if writer is not None and not writer.closed and writer.uncommitted:
            writer.flush()
        return super()._conn()

    # ------------------------------------------------------------------ probes
    def watch(self, model: nn.Module, **options: Any) -> Probe:
        """Attach a probe to ``model`` (see :class:`nbviz.Probe` for the options).

        The probe is also a context manager; ``run.close()`` closes it. Several
        models in one run need a ``name=`` each (their layers are recorded as
        ``name.layer``); another model under a name already watched is an error,
        or with ``replace=True`` takes over from it.
        """
        from nbviz.probes.merge import ProbeMeta
        from nbviz.probes.probe import Probe

        check_watch_options(Probe, model, options)
        name = options.get("name")
        taken_over = probes_replaced(self._probes, model, name, bool(options.get("replace")))
        if "first_step" not in options:
            options["first_step"] = max(self._last_step.values(), default=-1) + 1
        options["dist"] = self._dist
        if self._probe_meta is None:
            self._probe_meta = ProbeMeta(self._writer)
        sink = self._probe_meta.sink(name)
        probe = Probe(sink, model, on_close=self._forget_probe, **options)
        for other in taken_over:  # once the new probe is in place (its options were valid)
            other.close()
        self._probes.append(probe)
        self._layer_prefix[model] = probe._prefix
        return probe

    def _forget_probe(self, probe: Probe) -> None:
        if probe in self._probes:
            self._probes.remove(probe)
        if not probe.steps_seen:  # closed before it saw a step: it describes nothing
            probe._sink.discard()

    # ------------------------------------------------------------------ scalars
    def log(
        self,
        step: int,
        values: Mapping[str, Any] | None = None,
        /,
        *,
        overwrite: bool = False,
        **scalars: Any,
    ) -> None:
        """Record scalars at ``step``: ``run.log(step, train_loss=loss, lr=lr)``.

        Values may be numbers or 0-d tensors; NaN and inf are stored as they are.
        A step at or before one already logged for the same name is an error unless
        ``overwrite=True``. Call it once the step's ``optimizer.step()`` is done: it
        also names the step that the probes just recorded.
        """
        # called on every training step: the common case (an int step, keyword
        # scalars) takes the shortest path
        if type(step) is not int or step < 0 or step > MAX_STEP:
            step = rec.check_step(step, "log")
        if values is None:
            items = scalars
        else:
            items = dict(values)
            items.update(scalars)
        if not items:
            raise ValueError("log: no values given; use run.log(step, name=value, ...)")
        now = time.time()
        last_step = self._last_step
        rows = []
        for key, value in items.items():
            if type(key) is not str or not key:
                raise TypeError(f"log: scalar names must be non-empty strings, got {key!r}")
            if not key.isascii():
                rec.check_text(key, "log", "scalar name")
            last = last_step.get(key)
            if last is not None and step <= last and not overwrite:
                raise ValueError(
                    f"log: {key!r} was already logged at step {last}; step {step} does not come "
                    "after it (pass overwrite=True to replace recorded values)"
                )
            rows.append((key, step, rec.scalar_value(key, value), now))
        for key, *_ in rows:
            last = last_step.get(key)
            last_step[key] = step if last is None or step > last else last
        self._writer.insert("scalars", rows)
        for probe in self._probes:
            probe._on_log(step)

    # ------------------------------------------------------------------ classes
    def _set_class_names(self, class_names: Sequence[str]) -> None:
        self._class_names = rec.check_class_names(class_names, self._class_names)
        self._writer.set_meta("class_names", self._class_names)

    def _n_classes(self) -> int | None:
        return len(self._class_names) if self._class_names is not None else None

    def _latest_step(self) -> int:
        """The last step logged under any name (0 before any): capture's and profile's default."""
        return max(self._last_step.values(), default=0)

    # -------------------------------------------------------------- predictions
    def log_predictions(
        self,
        step: int,
        logits_or_preds: Any,
        labels: Any,
        ids: Any = None,
        split: str = "val",
        *,
        loss: Any = None,
        overwrite: bool = False,
    ) -> None:
        """Record one evaluation's predictions at ``step``.

        ``logits_or_preds``: ``(N, classes)`` logits (softmax gives confidence and
        cross-entropy gives the per-sample loss), ``(N, 1)`` logits of a binary model
        (one logit per sample, as ``BCEWithLogitsLoss`` takes) or ``(N,)`` predicted
        classes.
        ``ids`` default to ``0..N-1`` in the order given (as in ``log_samples``);
        ``loss`` overrides the per-sample loss. Predictions already recorded at
        this step and split are an error, or with ``overwrite=True`` are replaced
        whole (their class probabilities with them): one evaluation per step and split.
        """
        rows, probabilities = tables.predictions(
            step, logits_or_preds, labels, ids, split, loss=loss, n_classes=self._n_classes()
        )
        tables.replace_evaluation(self, "log_predictions", rows[0][1], rows[0][0], overwrite)
        self._writer.insert("predictions", rows)
        if probabilities:
            self._writer.insert("probabilities", probabilities)

    def log_outputs(
        self,
        step: int,
        loss: Any,
        outputs: Any = None,
        targets: Any = None,
        ids: Any = None,
        split: str = "val",
        *,
        labels: Any = None,
        targets_are_inputs: bool = False,
        overwrite: bool = False,
    ) -> None:
        """Record one evaluation of a model that is not a classifier at ``step``.

        ``loss``: one loss per sample (``(N,)``; extra dims, as a per-pixel loss has,
        are averaged). ``outputs`` and ``targets``: ``(N, ...)`` arrays (or the first
        samples' only), kept to be shown where they are small enough (see
        :mod:`nbviz.recording.outputs`);
        ``targets_are_inputs`` says the targets are the inputs (an autoencoder).
        ``labels``: the samples' classes, if they have any (for colouring).
        ``ids`` and ``overwrite`` as in :meth:`log_predictions`.
        """
        from nbviz.recording.outputs import rows as output_rows

        preds, outs = output_rows(
            step,
            loss,
            outputs,
            targets,
            ids,
            split,
            labels=labels,
            targets_are_inputs=targets_are_inputs,
            n_classes=self._n_classes(),
        )
        tables.replace_evaluation(self, "log_outputs", preds[0][1], preds[0][0], overwrite)
        self._writer.insert("predictions", preds)
        self._writer.insert("outputs", outs)

    def log_token_losses(
        self,
        step: int,
        losses: Any,
        targets: Any,
        ids: Any = None,
        split: str = "val",
        *,
        mask: Any = None,
        ignore_index: int = -100,
        top_ids: Any = None,
        top_probs: Any = None,
        tokens: Any = None,
        overwrite: bool = False,
    ) -> None:
        """Record a language model's evaluation at ``step``, token by token.

        ``losses``: ``(N, T)``, the loss at each position (``reduction='none'``);
        ``targets``: ``(N, T)`` target token ids. A position counts unless its target
        is ``ignore_index`` or ``mask`` ``(N, T)`` is False there (padding); each
        sample's loss is the mean over the positions that count. ``top_ids`` and
        ``top_probs``: ``(N, T, k)``, the model's most likely tokens at each position
        and their probabilities. ``tokens`` decodes ids into text: a vocabulary (a
        list of strings, index = id), a tokenizer, or a function id -> text. The
        arrays are kept for the first samples (:mod:`nbviz.recording.tokens`); read
        them with :meth:`token_losses`. ``ids`` and ``overwrite`` as in
        :meth:`log_predictions`.
        """
        from nbviz.recording.tokens import decoder, token_rows, token_texts

        decode = decoder(tokens, "log_token_losses")
        preds, outs, _ = token_rows(
            step,
            losses,
            targets,
            ids,
            split,
            mask=mask,
            ignore_index=ignore_index,
            top_ids=top_ids,
            top_probs=top_probs,
        )
        tables.replace_evaluation(self, "log_token_losses", preds[0][1], preds[0][0], overwrite)
        self._writer.insert("predictions", preds)
        self._writer.insert("outputs", outs)
        if decode is not None and (self._dist is None or self._dist.writes):
            texts = {str(k): v for k, v in self.token_texts().items()}
            n = len(texts)
            texts.update(token_texts(decode, targets, top_ids))
            if len(texts) != n or not n:
                self._writer.set_meta("token_texts", texts)

    def log_embeddings(
        self,
        step: int,
        features: Any,
        ids: Any = None,
        split: str = "val",
        layer: str | None = None,
        *,
        kind: str = "embedding",
    ) -> None:
        """Record an ``(N, D)`` matrix of per-sample features at ``step`` (for the projector)."""
        self._writer.insert(
            "embeddings", tables.embeddings(step, features, ids, split, layer, kind)
        )

    def log_samples(
        self,
        data: Any,
        labels: Any = None,
        ids: Any = None,
        split: str = "val",
        class_names: Sequence[str] | None = None,
        *,
        kind: str | None = None,
    ) -> None:
        """Record the samples behind the ids: images (stored as PNG thumbnails), text or rows.

        ``data``: ``(N, H, W)``, ``(N, H, W, C)`` or ``(N, C, H, W)`` images, a list of
        strings, ``(N, D)`` numeric rows, or a table of any columns (a pandas
        DataFrame, a list of dicts: each row shown as ``column: value`` lines);
        ``kind`` overrides the guess.
        """
        split = rec.check_split(split, "log_samples")
        if class_names is not None:
            self._set_class_names(class_names)
        rows = tables.samples(data, labels, ids, split, kind, self._n_classes())
        self._writer.insert("samples", rows)

    # ---------------------------------------------------------------- evaluate
    def evaluate(
        self,
        step: int,
        model: nn.Module,
        loader: Iterable[Any],
        split: str = "val",
        embed_layer: str | nn.Module | None = None,
        units_layer: str | nn.Module | None = None,
        *,
        samples: bool = True,
        max_samples: int = 20_000,
        log_scalars: bool = True,
        capture_ids: Sequence[int] = (),
        loss_fn: Any = None,
        tokens: Any = None,
        top_k: int = 5,
        ignore_index: int | None = None,
    ) -> dict[str, float]:
        """One pass over ``loader``: predictions, per-sample losses, embeddings, samples.

        The loader yields ``(inputs, labels)`` or ``(inputs, labels, ids)``; without ids
        samples are numbered in loader order (so don't shuffle it). Embeddings come
        from ``embed_layer`` (default: the input of the last ``nn.Linear``): they are
        also the per-sample values of that layer's input units, which the LayerBrowser
        ranks samples by. ``units_layer`` stores the same per-unit summary (the mean
        over each channel's positions) for another module's output; default none.
        Samples are logged on the first evaluation of a split. ``capture_ids``: samples
        whose activations through every layer are also recorded (see :meth:`capture`).
        Logs ``{split}_loss`` and ``{split}_accuracy`` at ``step`` and returns them.

        ``loss_fn(outputs, targets)``: any model (regression, autoencoder, per-pixel or
        multi-label outputs). It must give one loss per sample (``reduction='none'``;
        extra dims are averaged). Targets are the batch's second item, or the inputs
        for a loader of inputs alone (an autoencoder). Records the losses, outputs and
        targets where small enough to show (:meth:`log_outputs`) and embeddings; logs
        ``{split}_loss``. A classifier's ``(N, classes)`` outputs with class targets
        stay a classifier's predictions, with ``loss_fn``'s loss.
        Without ``loss_fn``, ``(N, C, *positions)`` scores against ``(N, *positions)``
        class ids (segmentation) give each sample the mean cross-entropy over its
        positions whose class is not ``ignore_index``.

        A language model, whose outputs are ``(N, T, vocabulary)`` scores and whose
        targets are ``(N, T)`` token ids, is recognised as one and recorded token by
        token (:meth:`log_token_losses`, read back with :meth:`token_losses`): the
        cross-entropy at each position (or ``loss_fn``'s, if it gives one per token)
        and the ``top_k`` most likely tokens there. Positions whose target is
        ``ignore_index`` (else ``loss_fn.ignore_index``, else -100; a ValueError
        where both are given and differ), or where a dict batch's
        ``mask`` is False, are padding: left out of each sample's loss, its mean over
        the other positions. ``tokens`` decodes ids into text for the views: a
        vocabulary (a list of strings), a tokenizer, or a function id -> text.
        """
        return evaluate_into(
            self,
            step,
            model,
            loader,
            split,
            embed_layer,
            units_layer,
            samples=samples,
            max_samples=max_samples,
            log_scalars=log_scalars,
            capture_ids=capture_ids,
            loss_fn=loss_fn,
            tokens=tokens,
            top_k=top_k,
            ignore_index=ignore_index,
        )

    def capture(
        self,
        model: nn.Module,
        sample: Any,
        id: int,
        *,
        split: str = "val",
        step: int | None = None,
        layers: Any = None,
    ) -> pd.DataFrame:
        """Record one sample's activations through the layers (for the gallery's detail).

        ``sample`` is one input without the batch dimension (tensor, array, or a
        dict/tuple of them); ``id`` is its sample id in ``split``. ``step`` defaults to
        the latest logged step. ``layers`` picks modules as ``watch`` does. Returns
        what is stored, as :meth:`captures` reads it back.
        """
        step, rows = capture_rows(
            model,
            sample,
            id,
            split=split,
            step=step,
            layers=layers,
            prefix=self._layer_prefix.get(model, ""),
            latest=self._latest_step(),
        )
        self._writer.insert("captures", rows)
        self._writer.flush()
        return self.captures(int(id), split, step)

    # ----------------------------------------------------------------- profile
    def profile(
        self,
        model: nn.Module,
        step_fn: Any,
        *,
        step: int | None = None,
        name: str = "profile",
        **options: Any,
    ) -> Profile:
        """Profile ``step_fn`` on ``model`` and store the result at ``step``; returns it.

        ``step`` defaults to the last step logged (0 before any): profile the step
        the scrubber shows (say, where the loss spiked). A profile already stored
        there under ``name`` is replaced. ``options`` go to
        :func:`nbviz.probes.profile.profile_step` (``steps``, ``warmup``, ``data``, ...).
        Read it back with ``load_profile(step, name)`` or ``nbviz.Profiler(run)``.
        """
        return record_profile(
            self._writer,
            model,
            step_fn,
            step=step,
            name=name,
            latest=self._latest_step(),
            options=options,
        )

    # --------------------------------------------------------------- curvature
    def curvature(
        self,
        model: nn.Module,
        batch: Any,
        loss_fn: Any,
        *,
        step: int | None = None,
        optimizer: Any = None,
        **options: Any,
    ) -> Curvature:
        """The curvature test: the training loss's sharpness against the stability limit.

        ``batch`` is ``(inputs, targets)`` and the loss ``loss_fn(model(inputs),
        targets)``; ``optimizer`` defaults to the one given to ``watch(model,
        optimizer=...)``. Stores the scalars ``sharpness`` and ``stability_limit`` at
        ``step`` (default: the last step logged) and returns the result. It costs a
        few dozen backward passes: call it on a sparse schedule, e.g. every few hundred
        steps. ``options``: ``iterations``, ``tol``, ``seed`` (see
        :mod:`nbviz.probes.curvature`).
        """
        from nbviz.recording.curvature import record_curvature

        return record_curvature(
            self,
            model,
            batch,
            loss_fn,
            step=self._latest_step() if step is None else step,
            optimizer=optimizer,
            options=options,
        )

    # --------------------------------------------------------------- lifecycle
    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything logged so far is committed to disk."""
        for probe in list(self._probes):
            probe.flush()
        self._writer.flush(timeout)

    def close(self) -> None:
        """Close every probe (hooks removed) and commit everything. Idempotent.

        The run is left as one self-contained ``run.sqlite`` (see
        :meth:`nbviz.store.Writer.close`): the run's own reading connections
        close first, so that the writer is the last to leave.
        """
        try:
            for probe in list(self._probes):
                probe.close()
        finally:
            super().close()
            if not self._writer.closed:
                self._writer.close()
