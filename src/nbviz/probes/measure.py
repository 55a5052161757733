"""What a probe measures at a capture step, besides the forward hooks' activations.

A step whose number is a multiple of ``every`` gets a
:class:`~nbviz.probes.stats.StepCapture` when it begins (see
:mod:`nbviz.probes.clock`). During the step the forward hooks add each
watched module's output and each output gradient to it
(:mod:`nbviz.probes.hooks`); after the backward, each parameter gradient is
measured here (``.grad`` is final then, and a later ``zero_grad`` or clip may
change it). When the step ends, the norm of the step's update of each parameter
(and the weight norm it is divided by) and the sentinel's first bad steps join
them, and everything goes to the host in one copy, to be written by
:mod:`nbviz.probes.records`.

Histograms (and the activations' per-unit maps and heads' statistics) are taken
every ``hist_every`` steps, and with them the weights' own statistics (now
updated) and their distance from the initial weights: a step moves a weight by
its update, which each capture has, and at ``every=1`` measuring every weight at
every step cost the reference MLP a tenth of a step; each (layer, signal) keeps one
:class:`~nbviz.probes.histogram.HistState`, its range fixed at its first capture.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from nbviz.probes import distributed as dd
from nbviz.probes import stats as st
from nbviz.probes.histogram import HIST_PADDING, BinCache, HistState
from nbviz.probes.tensor_stats import SCRATCH_MIN, Scratch, real_view


class StepMeasure:
    """The capture-step measurements of a :class:`~nbviz.probes.probe.Probe`.

    A part of the probe (see :mod:`nbviz.probes.probe`). ``_capture`` is the
    step's capture, or None on a step that is not captured; the clock sets it
    when a step begins and ``_record_capture`` takes it when the step ends.
    """

    _capture: st.StepCapture | None
    _capture_hist: bool  # this capture step also takes histograms
    _pgrad_parts: dict[int, tuple]  # parameter index -> measured gradient
    _hist: dict[tuple[str, str], HistState]
    _init: list[torch.Tensor]  # the weights when the probe began
    _init_norm: list[float]
    _prev: list[torch.Tensor]  # the weights when the capture step began, then scratch
    captures: int
    _attention: Any  # the attention= capture (nbviz.probes.attention_capture), or None
    _heads: Any  # per-head statistics (nbviz.probes.heads.HeadStats), or None

    def _setup_measure(self) -> None:
        self._capture = None
        self._capture_hist = False
        self._pgrad_parts = {}
        self._hist = {}
        self._scratch = Scratch() if self.device.type == "cpu" else None
        self._bin_cache = BinCache()
        self.captures = 0
        # weights: initial values (distance from init) and a buffer for the update
        if self._watch_weights:
            with torch.no_grad():
                self._init = [p.detach().clone() for _, p in self.params]
                self._init_norm = [float(real_view(t).float().norm()) for t in self._init]
                self._prev = [torch.empty_like(t) for t in self._init]

    def _hist_for(self, layer: str, signal: str) -> HistState | None:
        if not self._capture_hist:
            return None
        key = (layer, signal)
        h = self._hist.get(key)
        if h is None:
            h = self._hist[key] = HistState(self.bins, HIST_PADDING[signal])
            if self._dist is not None and self._per_sample(key):
                h.defer = True  # the ranks agree on its range first
        return h

    def _per_sample(self, key: Any) -> bool:
        """Whether a slot holds per-sample values that differ by rank (summed over ranks)."""
        layer, signal = key
        return signal == "activation" or (signal == "gradient" and layer in self._module_names)

    def _measure_synced(self) -> None:
        """Several ranks: the parameter gradients of the step, once DDP has averaged them."""
        capture = self._capture
        if capture is None or self.closed:
            return
        self._measure_param_grads(capture, check=False)

    def _measure_param_grads(self, capture: st.StepCapture, check: bool) -> None:
        """Each parameter gradient's statistics, kept for the capture's record.

        ``.grad`` accumulates, so the last backward of the step has the step's
        total; measured now, since ``zero_grad(set_to_none=False)`` or clipping may
        change it later. With ``check``, each measurement also gives the sentinel
        its value for that gradient (no second read).
        """
        base = len(self.modules)
        index: list[int] = []
        items = []
        for j, (name, p) in enumerate(self.params):
            g = p.grad
            if g is None:
                continue
            if g.layout != torch.strided:
                g = g.to_dense()  # a sparse gradient (nn.Embedding(sparse=True)): zeros count
            index.append(j)
            items.append(((name, "gradient"), g.detach(), self._hist_for(name, "gradient")))
        # the small gradients (biases, norm scales) are measured together
        # their zero fractions with the distributions, as for the outputs' gradients
        measured = capture.measure_clean_many(items, zeros=self._capture_hist)
        for j, parts in zip(index, measured, strict=True):
            self._pgrad_parts[j] = parts
            if check:
                self._sentinel.add(base + j, parts[0].witness)

    def _record_capture(self, capture: st.StepCapture) -> None:
        extra: list[torch.Tensor] = []
        for measured in self._pgrad_parts.values():
            capture.add_measured(measured)
        self._pgrad_parts = {}
        # the weights' own statistics and distance from init come with the distributions;
        # the step's update (and the weight norm it is divided by) comes at every capture
        weights = self._watch_weights and self._capture_hist
        if self._watch_weights:
            with torch.no_grad():
                current = [p.detach() for _, p in self.params]
                # the step's update (in the copy taken when the step began) and the
                # distance from init: norms only, batched
                # (in place: fresh model-sized temporaries cost page faults on CPU)
                torch._foreach_sub_(self._prev, current)
                update = torch._foreach_norm(self._prev)
                if weights:
                    self._distance_into_prev(current)
                    extra.append(torch.stack([*update, *torch._foreach_norm(self._prev)]))
                    capture.add_raw_many(
                        [
                            ((name, "weight"), w, self._hist_for(name, "weight"))
                            for (name, _), w in zip(self.params, current, strict=True)
                        ]
                    )
                else:
                    norms_now = torch._foreach_norm([real_view(w) for w in current])
                    extra.append(torch.stack([*update, *norms_now]))
        heads = self._heads.take() if self._heads is not None else None
        if heads is not None:
            extra.append(heads)
        extra.append(self._sentinel.first_bad)
        if self._dist is not None:
            extra.append(self._checksums_extra(weights))
        flat, extras = capture.to_host(extra)
        self.captures += 1
        results = st.combine(capture.entries, flat)  # keyed by (layer, signal)
        norms = None
        if self._watch_weights:
            update, other = np.split(extras[0], [len(self.params)])
            norms = ParamNorms(update, other if weights else None, None if weights else other)
        if self._dist is None:
            self._emit(results, norms)
            if heads is not None:
                self._emit_heads(extras[1 if self._watch_weights else 0])
            self._report_nonfinite(first_bad=extras[-1])
            return
        if self._shard is not None:
            self._emit(results, norms, self._shard)  # this rank's own numbers
        checksums = self._checksums(results, extras[-1], weights)
        first_bad, ranks, diverged, same = dd.combine_ranks(
            self._dist, results, self._per_sample, extras[-2], checksums
        )
        if self._writes:
            if not same:
                self._note_event("rank_layout", {"step": self._tag})
            self._emit(results, norms)
            self._report_divergence(diverged)
        self._report_nonfinite(first_bad=first_bad, ranks=ranks)

    def _distance_into_prev(self, current: list[torch.Tensor]) -> None:
        """``current - init`` into ``_prev`` (its norm is the distance from init).

        On the CPU a large parameter is subtracted straight into its buffer, one
        pass less than a copy and an in-place subtraction (the reference MLP's
        parameters: 0.55-0.62 ms against 0.75); the small ones, where a call per
        parameter would cost more than the pass, and every parameter on an
        accelerator, where the ``_foreach`` ops are fused, are done together.
        """
        together = []
        for prev, cur, init in zip(self._prev, current, self._init, strict=True):
            if prev.is_cpu and prev.numel() >= SCRATCH_MIN:
                torch.sub(cur, init, out=prev)
            else:
                together.append((prev, cur, init))
        if together:
            prevs, curs, inits = (list(side) for side in zip(*together, strict=True))
            torch._foreach_copy_(prevs, curs)
            torch._foreach_sub_(prevs, inits)

    def _record_attention(self) -> None:
        """The probe batch's attention maps, after this step's update (``attention=``)."""
        model = self._model_ref()
        if model is None:
            return
        root = model._orig_mod if self.compiled else model
        rows, grew = self._attention.record(root, self._tag)
        if rows:
            self._sink.insert("attention", rows)
        if grew:
            self._set_meta("attention", self._attention.meta())

    def _checksums_extra(self, weights: bool) -> torch.Tensor:
        """Sums and sums of squares of what rank 0's weight statistics do not cover
        (every parameter at a capture without them)."""
        tensors = [] if weights else [p.detach() for _, p in self.params]
        tensors += [b.detach() for _, b in self._buffers]
        if not tensors:
            return torch.zeros(0, dtype=torch.float64, device=self.device)
        with torch.no_grad():
            sums = [t.sum(dtype=torch.float64) for t in tensors]
            sq = [t.double().square().sum() for t in tensors]
        return torch.stack([torch.stack(sums), torch.stack(sq)]).to(self.device)

    def _checksums(self, results: dict, extra: np.ndarray, weights: bool) -> np.ndarray:
        """``(2, K)``: sum and sum of squares of every parameter, then every float buffer."""
        k = len(extra) // 2
        rows = extra.reshape(2, k) if k else np.zeros((2, 0))
        if not weights:
            return rows
        own = np.array(
            [
                [results[(n, "weight")].stats[1] for n, _ in self.params],
                [results[(n, "weight")].stats[2] for n, _ in self.params],
            ]
        )
        return np.concatenate([own, rows], axis=1)


@dataclass(frozen=True)
class ParamNorms:
    """Per parameter, in the probe's order: the step's update norm, and the distance from
    init (with the weights' statistics) or else the weight norm (a capture without them)."""

    update: np.ndarray
    distance: np.ndarray | None
    weight: np.ndarray | None
