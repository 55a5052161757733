"""What a probe hands to the run store: the rows of a capture step, events, and meta.

The capture (:mod:`nbviz.probes.measure`) ends in one :class:`~nbviz.probes.stats.SlotResult`
per (layer, signal); here they become ``layer_stats``, ``histograms`` and
``unit_stats`` rows (the update norms and distances from init beside them), the
sentinel's first non-finite step per layer becomes a ``nonfinite`` event, and
the probe's configuration and the model summary go to the run's meta; the
attention heads' statistics (:mod:`nbviz.probes.heads`) become ``unit_stats``
rows of ``<module>/heads`` pseudo-layers. Apart
from the summary, written once when the first step ends, nothing here runs on a
step that is not captured, except at ``flush()`` and ``close()``.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch
from torch import nn

from nbviz.probes import distributed as dd
from nbviz.probes import stats as st
from nbviz.probes.summary import model_summary
from nbviz.probes.tensor_stats import real_view

if TYPE_CHECKING:
    from nbviz.probes.measure import ParamNorms


class Sink(Protocol):
    """Where a probe hands its records: the run's background writer."""

    def insert(self, table: str, rows: list[tuple]) -> None: ...
    def set_meta(self, key: str, value: Any) -> None: ...


class Records:
    """The :class:`~nbviz.probes.probe.Probe`'s records and meta, written to its sink.

    A part of the probe (see :mod:`nbviz.probes.probe`): it reads what the other
    parts keep (the step's number ``_tag``, the sentinel and its step counters,
    the modules' shapes and call order) and writes to ``_sink`` (and, with
    ``rank_shards``, to this rank's ``_shard`` too).
    """

    _sink: Sink
    _shard: Any  # this rank's own run (``rank_shards=True``), or None
    _summary_written: bool  # the model summary is in the meta (with shapes, once seen)
    _calls: dict[str, int]
    _root_calls: int
    _divergence: dict[str, dict[str, Any]]  # several ranks: per tensor, steps it differed

    def _emit(self, results: dict, norms: ParamNorms | None, sink: Any = None) -> None:
        """Rows for the store. ``norms``: the parameters' update norms and distances from init
        or weight norms, None without weights."""
        step = self._tag
        stats_rows: list[tuple] = []
        distances = norms.distance if norms is not None else None
        param_index = {n: j for j, (n, _) in enumerate(self.params)}
        weight_norms = {
            layer: float(res.stats[2]) ** 0.5
            for (layer, signal), res in results.items()
            if signal == "weight"
        }
        weight_bad = {
            layer: int(res.stats[6])
            for (layer, signal), res in results.items()
            if signal == "weight" and res.stats[6]
        }
        summaries = st.summarize_all(np.array([res.stats for res in results.values()]))
        hists: list[tuple[str, str, st.SlotResult, float]] = []
        units: list[tuple[str, st.SlotResult]] = []
        for ((layer, signal), res), s in zip(results.items(), summaries, strict=True):
            # s: count, mean, std, min, max, zero_frac, nonfinite, norm
            rel = None
            if signal == "weight" and distances is not None:
                j = param_index[layer]
                rel = float(distances[j]) / self._init_norm[j] if self._init_norm[j] else None
            stats_rows.append((step, layer, signal, *s, rel))
            if res.hist is not None:
                hists.append((layer, signal, res, s[6]))
            if res.unit_nonzero is not None and res.unit_count > 0:
                units.append((layer, res))
        hist_rows = _hist_rows(step, hists)
        unit_rows = _unit_rows(step, units)
        if norms is not None:
            nan = float("nan")
            for j, (name, p) in enumerate(self.params):
                update_norm = float(norms.update[j])
                wn = weight_norms.get(name) if norms.weight is None else float(norms.weight[j])
                rel = update_norm / wn if wn else None
                # an update of a weight holding NaN/inf: as many non-finite values as it
                bad = 0
                if not np.isfinite(update_norm):
                    bad = weight_bad.get(name, 0) if norms.weight is None else _nonfinite(p)
                moments = (nan,) * 5  # mean, std, min, max, zero_frac: not of an update
                stats_rows.append(
                    (step, name, "update", p.numel(), *moments, bad, update_norm, rel)
                )
        sink = self._sink if sink is None else sink
        if stats_rows:
            sink.insert("layer_stats", stats_rows)
        if hist_rows:
            sink.insert("histograms", hist_rows)
        if unit_rows:
            sink.insert("unit_stats", unit_rows)
        self._record_optimizer(sink)

    def _emit_heads(self, values: np.ndarray) -> None:
        """The step's per-head ``unit_stats`` rows (:mod:`nbviz.probes.heads`), and the
        meta ``heads`` again when it changes (a pseudo-layer shows for the first time, a
        note is added)."""
        rows, grew = self._heads.rows(self._tag, values)
        if rows:
            self._sink.insert("unit_stats", rows)
        if grew:
            self._set_meta("heads", {"layers": self._heads.known, "notes": self._heads.notes})

    def _note_optimizer_groups(self) -> None:
        """Keep the parameter groups as ``optimizer.step()`` used them (its post-hook).

        A scheduler steps after the update and before the step ends: read then,
        a step's learning rate would be the next step's.
        """
        self._groups_used = [_group_description(g) for g in self._optimizer.param_groups]

    def _record_optimizer(self, sink: Any) -> None:
        """The optimizer's parameter groups at this capture step (with ``optimizer=``).

        Each group's learning rate goes to the scalars (``optimizer/lr`` for the
        first group, ``optimizer/lr/1``, ... for the others; ``<name>/optimizer/lr``
        for a named probe), so that a schedule shows in the loss curves and the
        diagnosis reads it; the rest of each group (momentum, betas, weight decay,
        eps) goes to the meta ``optimizer`` whenever it changes. Capture steps only.
        The groups are those the step's update used (kept by its ``optimizer.step()``),
        else, when no update ran, those at the step's end.
        """
        optimizer = self._optimizer
        if optimizer is None:
            return
        groups, self._groups_used = self._groups_used, None
        if groups is None:
            groups = [_group_description(g) for g in optimizer.param_groups]
        described = {"type": type(optimizer).__name__, "groups": groups}
        if described != getattr(self, "_optimizer_described", None):
            self._optimizer_described = described
            sink.set_meta("optimizer", described)
        base = f"{self.name}/optimizer/lr" if self.name else "optimizer/lr"
        now = time.time()
        rows = [
            (base if k == 0 else f"{base}/{k}", self._tag, g["lr"], now)
            for k, g in enumerate(groups)
            if g.get("lr") is not None
        ]
        if rows:
            sink.insert("scalars", rows)

    def _report_nonfinite(
        self,
        first_bad: np.ndarray | None = None,
        force: bool = False,
        ranks: np.ndarray | None = None,
    ) -> None:
        """Write an event for each slot whose first non-finite step is newly known.

        ``ranks``: per slot, the rank that saw it first (several ranks).
        """
        if first_bad is None:
            if not force:
                return
            first_bad = self._sentinel.first_bad.cpu().numpy()
            if self._dist is not None:
                first_bad, ranks = dd.reduce_first_bad(self._dist, first_bad)
        rows = []
        for slot in np.flatnonzero(first_bad >= 0):
            slot = int(slot)
            if slot in self._sentinel.reported:
                continue
            self._sentinel.reported.add(slot)
            counter = int(first_bad[slot])
            step = self._counter_tags.get(counter, self._tag)
            layer, signal = self._sent_names[slot]
            order = self._exec_order.get(layer, len(self._exec_order) + slot)
            detail = {"order": order, "rank": 0, "source": "sentinel"}
            if ranks is not None and self._dist is not None:
                detail["rank"] = int(ranks[slot])
                detail["world_size"] = self._dist.world_size
            rows.append(("nonfinite", layer, signal, step, _json(detail)))
        if rows:
            self._sink.insert("events", rows)
        # tags of counters already folded into first_bad are no longer needed
        keep_from = self._counter - 1
        for c in [c for c in self._counter_tags if c < keep_from]:
            del self._counter_tags[c]

    def _report_divergence(self, diverged: list[dd.Divergence]) -> None:
        """One event per tensor that differs across ranks (first step kept, latest updated)."""
        if not diverged:
            return
        names = [(n, "weight") for n, _ in self.params] + [(n, "buffer") for n, _ in self._buffers]
        sizes = [p.numel() for _, p in self.params] + [b.numel() for _, b in self._buffers]
        rows = []
        for d in diverged:
            name, signal = names[d.index]
            info = self._divergence.get(name)
            if info is None:
                info = self._divergence[name] = {"first_step": self._tag, "captures": 0}
            info["captures"] += 1
            detail = {
                **info,
                "last_step": self._tag,
                "ranks": d.ranks,
                "ranks_differing": d.count,
                "world_size": self._dist.world_size if self._dist else 1,
                "numel": sizes[d.index],
                "abs_diff": d.abs_diff,
                "rank0_sum": d.rank0[0],
                "rank0_sumsq": d.rank0[1],
            }
            rows.append(("rank_divergence", name, signal, info["first_step"], _json(detail)))
        self._sink.insert("events", rows)

    def _note_event(self, kind: str, detail: dict[str, Any]) -> None:
        self._sink.insert("events", [(kind, "", "", self._tag, _json(detail))])

    # ------------------------------------------------------------------- meta
    def _set_meta(self, key: str, value: Any) -> None:
        self._sink.set_meta(key, value)
        if self._shard is not None:
            self._shard.set_meta(key, value)

    def _add_note(self, note: str) -> None:
        """Keep a note said during training (how the clock read the loop, what it could
        not see): in the probe's ``notes``, and in the run's, which ``nbviz info`` and the
        reports list, by writing the probe's meta again."""
        self.notes.append(note)
        config = getattr(self, "_config", None)
        if config is not None:
            self._config = {**config, "notes": list(self.notes)}
            self._set_meta("probe", self._config)

    def _write_config(self) -> None:
        self._config = {
            "every": self.every,
            "hist_every": self.hist_every,
            "bins": self.bins,
            "signals": list(self.signals),
            "layers": [n for n, _ in self.modules],
            "params": [
                {"name": n, "shape": list(p.shape), "requires_grad": p.requires_grad}
                for n, p in self.params
            ],
            "compiled": self.compiled,
            "notes": list(self.notes),
            "device": str(self.device),
            "started": time.time(),
        }
        self._set_meta("probe", self._config)

    def _write_distributed(self, model: nn.Module, rank_shards: bool) -> None:
        assert self._dist is not None
        ddp = None
        if isinstance(model, nn.parallel.DistributedDataParallel):
            ddp = {
                "broadcast_buffers": bool(model.broadcast_buffers),
                "find_unused_parameters": bool(model.find_unused_parameters),
            }
        info = {
            **self._dist.describe(),
            "ddp": ddp,
            "wrapper_prefix": "stripped (module. and _orig_mod.)",
            "combined": ["activation", "gradient of module outputs"],
            "rank0_only": ["weight", "update", "gradient of parameters"],
            "output_gradient_scale": self._grad_scale,
            "checksum": "sum and sum of squares of every parameter and float buffer, "
            "compared with rank 0's at capture steps",
            "checked": [
                {"name": n, "kind": "parameter", "numel": p.numel()} for n, p in self.params
            ]
            + [{"name": n, "kind": "buffer", "numel": b.numel()} for n, b in self._buffers],
            "rank_shards": bool(rank_shards),
        }
        self._sink.set_meta("distributed", info)
        if self._shard is not None:
            self._shard.set_meta("distributed", {**info, "rank": self._dist.rank, "shard": True})

    def _notes_with_calls(self) -> dict[str, str]:
        """The modules' notes, with one for each module the model calls several times
        per forward (shared weights): its statistics pool every call."""
        notes = dict(self._module_notes)
        forwards = max(self._root_calls, 1)
        for name, calls in self._calls.items():
            times, rest = divmod(calls, forwards)
            if times > 1 and not rest:
                said = f"called {times} times per forward: its statistics pool every call"
                notes[name] = f"{notes[name]}; {said}" if notes.get(name) else said
        return notes

    def _write_summary(self, force: bool = False) -> None:
        if self._summary_written or (not force and not self._shapes):
            return
        model = self._model_ref()
        if model is None:
            return
        root = model._orig_mod if self.compiled else model
        self._set_meta(
            "model",
            {
                "type": type(root).__name__,
                "params": sum(p.numel() for _, p in self.params),
                "trainable": sum(p.numel() for _, p in self.params if p.requires_grad),
                "modules": model_summary(
                    root,
                    self._shapes,
                    {n for n, _ in self.modules},
                    self._notes_with_calls(),
                    self._prefix,
                ),
                "forward_order": sorted(self._exec_order, key=self._exec_order.__getitem__),
            },
        )
        self._summary_written = bool(self._shapes) or force


def _nonfinite(p: torch.Tensor) -> int:
    """How many of a parameter's elements are NaN or infinite (read where its update
    norm is not finite and no statistics of the weight were taken at that capture)."""
    x = real_view(p.detach())
    return x.numel() - int(torch.isfinite(x).sum())


def _group_description(group: dict[str, Any]) -> dict[str, Any]:
    """A parameter group's hyperparameters as JSON numbers (a tensor lr read once)."""
    out: dict[str, Any] = {"params": len(group.get("params", []))}
    for key in ("lr", "momentum", "dampening", "weight_decay", "eps", "alpha"):
        if key in group:
            out[key] = _number(group[key])
    if "betas" in group:
        out["betas"] = [_number(b) for b in group["betas"]]
    if "nesterov" in group:
        out["nesterov"] = bool(group["nesterov"])
    return out


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _hist_rows(step: int, hists: list[tuple[str, str, Any, float]]) -> list[tuple]:
    """``histograms`` rows of ``(layer, signal, result, nonfinite)``: the counts of all of
    them converted in one pass where they have one length (the probe's bins)."""
    if not hists:
        return []
    counts = [res.hist for _, _, res, _ in hists]
    if len({len(c) for c in counts}) == 1:
        table = np.stack(counts).astype("<i8")
        under, over = table[:, 0].tolist(), table[:, -1].tolist()
        inner = table[:, 1:-1]
        return [
            (step, layer, signal, *res.hist_range, inner[k].tobytes(), under[k], over[k], bad)
            for k, (layer, signal, res, bad) in enumerate(hists)
        ]
    rows = []
    for layer, signal, res, bad in hists:
        c = res.hist.astype("<i8")
        rows.append(
            (step, layer, signal, *res.hist_range, c[1:-1].tobytes(), int(c[0]), int(c[-1]), bad)
        )
    return rows


def _unit_rows(step: int, units: list[tuple[str, Any]]) -> list[tuple]:
    """``unit_stats`` rows (zero fraction, mean, largest magnitude where kept) of each
    ``(layer, result)``, worked out for all layers at once.

    A unit that saw NaN/inf is non-finite, not dead (its sum is non-finite).
    """
    if not units:
        return []
    sizes = [len(res.unit_nonzero) for _, res in units]
    count = np.repeat([res.unit_count for _, res in units], sizes)
    zero_frac = 1.0 - np.concatenate([res.unit_nonzero for _, res in units]) / count
    mean = np.concatenate([res.unit_sum for _, res in units]) / count
    bad = ~np.isfinite(mean)
    zero_frac[bad] = np.nan
    mean[bad] = np.nan
    zero_frac, mean = zero_frac.astype("<f4"), mean.astype("<f4")
    rows = []
    off = 0
    for (layer, res), n in zip(units, sizes, strict=True):
        end = off + n
        rows.append((step, layer, "zero_frac", zero_frac[off:end].tobytes()))
        rows.append((step, layer, "mean", mean[off:end].tobytes()))
        if res.unit_peak is not None and len(res.unit_peak) == n:
            peak = res.unit_peak.copy()
            peak[bad[off:end]] = np.nan
            rows.append((step, layer, "max_abs", peak.astype("<f4").tobytes()))
        off = end
    return rows
