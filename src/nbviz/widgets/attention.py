"""AttentionMaps: what each head of each layer looks at, scrubbed through training.

For a run watched with ``run.watch(model, attention=probe_batch)``: a grid of
maps, one row per attention layer and one column per head, for a chosen sample
of the probe batch at the capture in view (the latest at or before ``step``);
each head's entropy over the captures beside it (mean over the probe samples;
near 0 a head looks at one token, "collapsed", near 1 it spreads evenly,
"uniform"), and with it, on each map and over the large one, the head's output
RMS at the capture in view (0 for a dead head); a click on a map opens it large
with its tokens, and a click on a query token (a row of the map, or the token
itself) colours the tokens it attends to.

Each map is drawn at its own extent, queries by keys: an encoder-decoder's
cross-attention is as wide as the source and as tall as the target, and no layer is
padded to another's length. Queries and keys are labelled with the probe batch's
sequence of their length (its ``token_sets``: the source's ids, the decoder's);
where none, or two that differ, have that length, with their positions.

Traits the browser sets: ``step`` (the slider over the captures), ``sample``,
``selected`` (``[layer index, head]`` or empty) and ``query`` (a position, or -1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import traitlets

from nbviz.analysis.dead_heads import DEAD, dead_heads
from nbviz.widgets.checks import id_trait
from nbviz.widgets.frontend import esm
from nbviz.widgets.live import LiveView, linked_step, reacts_to, view_css
from nbviz.widgets.view_data import frame, heatmap_figure
from nbviz.widgets.wire import array_from_payload, array_trait_payload

__all__ = ["COLLAPSED", "DEAD", "UNIFORM", "AttentionMaps", "head_flags"]

COLLAPSED = 0.15
"""A head whose mean normalised entropy is below this looks at about one token."""
UNIFORM = 0.97
"""A head whose mean normalised entropy is above this spreads its attention evenly."""


def head_flags(entropy: np.ndarray, output_rms: np.ndarray | None = None) -> list[str]:
    """Per head, ``"dead"``, ``"collapsed"``, ``"uniform"`` or ``""`` from its latest
    entropy and output RMS (``(layers, heads)``, or flat without ``output_rms``): a
    dead head (:func:`nbviz.analysis.dead_heads.dead_heads`) is dead whatever it
    looks at."""
    dead = np.zeros(np.size(entropy), dtype=bool)
    if output_rms is not None:
        dead = dead_heads(np.atleast_2d(np.asarray(output_rms, dtype=float))).reshape(-1)
    out = []
    for value, is_dead in zip(np.asarray(entropy, dtype=float).reshape(-1), dead, strict=True):
        if is_dead:
            out.append("dead")
        elif not np.isfinite(value):
            out.append("")
        elif value < COLLAPSED:
            out.append("collapsed")
        elif value > UNIFORM:
            out.append("uniform")
        else:
            out.append("")
    return out


def _labels(sets: list[list[str]], n: int) -> list[str]:
    """The labels of ``n`` positions: the one sequence of that length (or several that
    read alike), else the positions themselves."""
    fits = {tuple(t) for t in sets if len(t) == n}
    return list(fits.pop()) if len(fits) == 1 else [str(i) for i in range(n)]


class AttentionMaps(LiveView):
    """Attention maps of the probe batch: layer x head grid, entropy over steps.

    Parameters
    ----------
    run
        A run whose probe recorded attention (``run.watch(model, attention=...)``).
    sample
        Which sample of the probe batch to show (also chosen in the view).
    step
        The step in view (default: the latest capture).
    live
        Follow the run while it grows.

    ``data()`` is the shown sample's maps as a DataFrame (the view's menu
    downloads it as CSV, the maps as PNG), ``figure()`` one map as a bqplot
    ``GridHeatMap``.
    """

    _esm = esm("attention")

    step = linked_step("Linked step: the maps shown are the latest capture at or before it.")
    sample = id_trait(0, "The probe sample shown.", low=0, high=255)
    selected = traitlets.List(
        traitlets.Int(), help="[layer index, head] opened large, or empty."
    ).tag(sync=True)
    query = id_trait(-1, "The query position whose attention colours the tokens.", high=4096)
    layers = traitlets.List(traitlets.Unicode()).tag(sync=True)
    samples = traitlets.Int(0).tag(sync=True)
    tokens = traitlets.List(traitlets.Unicode(), help="The shown sample's tokens.").tag(sync=True)
    extents = traitlets.List(
        traitlets.List(traitlets.Int()), help="Per layer, [heads, queries, keys] of its maps."
    ).tag(sync=True)
    axis_tokens = traitlets.List(
        traitlets.List(traitlets.List(traitlets.Unicode())),
        help="Per layer, [query labels, key labels] of the shown sample.",
    ).tag(sync=True)
    shown_step = traitlets.Int(-1, help="The capture step of the maps shown.").tag(sync=True)
    capture_steps = traitlets.Dict(help="Steps with maps (float64).").tag(sync=True)
    maps = traitlets.Dict(help="(layers, heads, queries, keys) maps of the sample.").tag(sync=True)
    entropy = traitlets.Dict(help="(layers, heads, captures) mean normalised entropy.").tag(
        sync=True
    )
    flags = traitlets.List(
        traitlets.Unicode(), help="Per layer*heads: collapsed/uniform/dead/''."
    ).tag(sync=True)
    output_rms = traitlets.Dict(
        help="(layers, heads, captures) mean RMS of each head's output (NaN: not shown)."
    ).tag(sync=True)

    _heads = 0

    def __init__(
        self, run: Any, sample: int = 0, *, step: int | None = None, live: bool = True, **kw: Any
    ) -> None:
        if isinstance(sample, bool) or not isinstance(sample, int | np.integer) or sample < 0:
            raise ValueError(
                f"AttentionMaps: sample must be a non-negative integer, got {sample!r}"
            )
        super().__init__(**kw)
        self._run = run
        with self._building([run], live):
            self._rebuild()
            if sample >= max(self.samples, 1):
                raise ValueError(
                    f"AttentionMaps: sample {sample} is beyond the probe batch's "
                    f"{self.samples} samples"
                )
            self.sample = int(sample)
            steps = self._steps
            self.step = int(steps[-1]) if step is None and len(steps) else int(step or 0)
            self._fill_maps()

    # -- data ------------------------------------------------------------------------------

    def _rebuild(self) -> None:
        run = self._run
        self.layers = run.attention_layers()
        before = getattr(self, "_steps", [])
        self._steps = run.attention_steps()
        self.step = self._followed(self.step, before, self._steps)  # on its own: the newest
        meta = run.meta("attention") or {}
        self.samples = int(meta.get("samples", 0)) if isinstance(meta, dict) else 0
        self._tokens = meta.get("tokens") if isinstance(meta, dict) else None
        if not self.layers:
            self.empty = (
                f"No attention maps in {run.name} yet: watch the model with "
                "run.watch(model, attention=probe_batch) (maps of F.scaled_dot_product_attention "
                "and nn.MultiheadAttention calls, every hist_every steps)."
            )
            return
        self.empty = ""
        self.capture_steps = array_trait_payload(self._steps, dtype="<f8")
        self._fill_entropy()
        if self._ready:
            self._fill_maps()

    def _fill_entropy(self) -> None:
        stats = self._run.attention_stats()
        steps = self._steps
        heads = int(stats["head"].max()) + 1 if len(stats) else 0
        self._heads = heads
        grid = np.full((len(self.layers), heads, len(steps)), np.nan, dtype=np.float32)
        rms = grid.copy()
        if len(stats):
            mean = stats.groupby(["layer", "head", "step"], sort=False)[
                ["entropy", "output_rms"]
            ].mean()
            li = {n: i for i, n in enumerate(self.layers)}
            si = {int(s): i for i, s in enumerate(steps)}
            for (layer, head, step), (value, out) in zip(
                mean.index, mean.to_numpy(dtype=np.float64), strict=True
            ):
                grid[li[layer], int(head), si[int(step)]] = value
                rms[li[layer], int(head), si[int(step)]] = out
        self.entropy = array_trait_payload(grid, dtype="<f4")
        self.output_rms = array_trait_payload(rms, dtype="<f4")
        last = grid[:, :, -1] if grid.shape[2] else grid[:, :, :0].reshape(len(self.layers), -1)
        last_rms = rms[:, :, -1] if rms.shape[2] else None
        self.flags = head_flags(last.reshape(-1), last_rms) if last.size else []

    def _fill_maps(self) -> None:
        if not self.layers:
            return
        steps = self._steps
        i = int(np.searchsorted(steps, self.step, "right")) - 1
        if i < 0:
            self.shown_step = -1
            self.maps = {}
            self.tokens = []
            self.extents = []
            self.axis_tokens = []
            return
        at = int(steps[i])
        per_layer = [self._run.attention(at, layer) for layer in self.layers]
        s = min(self.sample, per_layer[0].shape[0] - 1)
        heads = max(m.shape[1] for m in per_layer)
        n_q = max(m.shape[2] for m in per_layer)
        n_k = max(m.shape[3] for m in per_layer)
        # one array for the wire; each layer's maps fill its own extent of it (the rest is
        # no attention at all: the views and data() stop at the extent)
        grid = np.zeros((len(per_layer), heads, n_q, n_k), dtype=np.float32)
        for j, m in enumerate(per_layer):
            grid[j, : m.shape[1], : m.shape[2], : m.shape[3]] = m[min(s, m.shape[0] - 1)]
        sets = self._token_sets(s)
        self.extents = [[int(m.shape[1]), int(m.shape[2]), int(m.shape[3])] for m in per_layer]
        self.axis_tokens = [
            [_labels(sets, int(m.shape[2])), _labels(sets, int(m.shape[3]))] for m in per_layer
        ]
        self.maps = array_trait_payload(grid, dtype="<f4")
        tokens = self._tokens[s] if isinstance(self._tokens, list) and s < len(self._tokens) else []
        self.tokens = [str(t) for t in tokens][:n_k] or [str(k) for k in range(n_k)]
        self.shown_step = at

    def _token_sets(self, sample: int) -> list[list[str]]:
        """The shown sample's labelled sequences (the meta's ``token_sets``, or its
        ``tokens`` in a run recorded before them); what is not a list of strings is left out."""
        meta = self._run.meta("attention") or {}
        if not isinstance(meta, dict):
            return []
        entries = meta.get("token_sets")
        if not isinstance(entries, list):
            entries = [{"tokens": meta.get("tokens")}]
        out = []
        for entry in entries:
            rows = entry.get("tokens") if isinstance(entry, dict) else None
            row = rows[sample] if isinstance(rows, list) and sample < len(rows) else None
            if isinstance(row, list):
                out.append([str(t) for t in row])
        return out

    # -- reactions ---------------------------------------------------------------------------

    @traitlets.validate("sample")
    def _check_sample(self, proposal: Any) -> int:
        value = proposal["value"]
        if value >= max(self.samples, 1):
            raise traitlets.TraitError(
                f"AttentionMaps.sample: {value} is not one of the {self.samples} probe samples"
            )
        return value

    @traitlets.validate("selected")
    def _check_selected(self, proposal: Any) -> list[int]:
        value = list(proposal["value"])
        if not value:
            return value
        heads = max(self._heads, 1)
        if (
            len(value) != 2
            or any(isinstance(v, bool) for v in value)
            or not 0 <= value[0] < max(len(self.layers), 1)
            or not 0 <= value[1] < heads
        ):
            raise traitlets.TraitError(
                f"AttentionMaps.selected: {value!r} is not [layer index, head] within "
                f"{len(self.layers)} layers and {heads} heads (or [] for none)"
            )
        return value

    @reacts_to("step", "sample")
    def _on_step(self, change: Any) -> None:
        self._fill_maps()

    # -- the data, for people and other tools ----------------------------------------------

    def _grid(self) -> np.ndarray:
        if not self.maps:
            return np.zeros((0, 0, 0, 0), dtype=np.float32)
        return np.asarray(array_from_payload(self.maps), dtype=np.float32)

    def _pick(self, layer: int | str | None, head: int | None) -> tuple[list[int], list[int]]:
        """Layer indices and heads asked for (None: every one), checked against the maps."""
        grid = self._grid()
        layers, heads = list(range(grid.shape[0])), list(range(grid.shape[1]))
        if isinstance(layer, str):
            if layer not in self.layers:
                raise ValueError(
                    f"AttentionMaps: no layer {layer!r}; layers: {', '.join(self.layers)}"
                )
            layer = self.layers.index(layer)
        if layer is not None:
            if layer not in layers:
                raise ValueError(f"AttentionMaps: layer index {layer} outside 0..{len(layers) - 1}")
            layers = [int(layer)]
        if head is not None:
            if head not in heads:
                raise ValueError(f"AttentionMaps: head {head} outside 0..{len(heads) - 1}")
            heads = [int(head)]
        return layers, heads

    def data(self, layer: int | str | None = None, head: int | None = None) -> Any:
        """The shown sample's attention maps at the capture shown, one row per weight.

        Columns ``step, sample, layer, head, query, key, query_token, key_token,
        weight``. By default every map of the grid (layers x heads x queries x
        keys rows: 37 million for 12 layers of 12 heads over 512 tokens);
        ``layer`` (a name or an index) and ``head`` narrow it to one layer, one
        head, or one map. The view's menu saves less as CSV: the map opened large
        (else every map of the grid), stopping at a row limit it names.
        """
        columns = ["step", "sample", "layer", "head", "query", "key"]
        columns += ["query_token", "key_token", "weight"]
        grid = self._grid()
        if not grid.size:
            return frame([], columns)
        layers, heads = self._pick(layer, head)
        parts: dict[str, list[Any]] = {c: [] for c in columns}
        for li in layers:
            n_h, n_q, n_k = self._extent(li, grid)
            q_labels, k_labels = self._axis_labels(li, n_q, n_k)
            own = [h for h in heads if h < n_h]
            sub = grid[li, own, :n_q, :n_k]
            hi, qi, ki = (a.reshape(-1) for a in np.indices(sub.shape))
            parts["step"].append(np.full(sub.size, self.shown_step, dtype=np.int64))
            parts["sample"].append(np.full(sub.size, self.sample, dtype=np.int64))
            parts["layer"].append(np.full(sub.size, self.layers[li], dtype=object))
            parts["head"].append(np.asarray(own, dtype=np.int64)[hi])
            parts["query"].append(qi)
            parts["key"].append(ki)
            parts["query_token"].append(np.asarray(q_labels, dtype=object)[qi])
            parts["key_token"].append(np.asarray(k_labels, dtype=object)[ki])
            parts["weight"].append(sub.reshape(-1).astype(np.float64))
        return frame({c: np.concatenate(v) for c, v in parts.items()}, columns)

    def _extent(self, layer: int, grid: np.ndarray) -> tuple[int, int, int]:
        """``(heads, queries, keys)`` of a layer's maps: its own, within the grid."""
        extent = self.extents[layer] if layer < len(self.extents) else None
        if extent and len(extent) == 3:
            return tuple(min(int(e), n) for e, n in zip(extent, grid.shape[1:], strict=True))
        return grid.shape[1], grid.shape[2], grid.shape[3]

    def _axis_labels(self, layer: int, n_q: int, n_k: int) -> tuple[list[str], list[str]]:
        pair = self.axis_tokens[layer] if layer < len(self.axis_tokens) else None
        if pair and len(pair) == 2 and len(pair[0]) == n_q and len(pair[1]) == n_k:
            return list(pair[0]), list(pair[1])
        return [str(i) for i in range(n_q)], [str(i) for i in range(n_k)]

    def figure(self, layer: int | str | None = None, head: int | None = None) -> Any:
        """One map (default: the one opened large, else the first layer's first head)
        as a bqplot ``GridHeatMap``: rows are queries, columns keys."""
        if not self._grid().size:
            raise ValueError(f"AttentionMaps.figure: no maps at or before step {self.step}")
        if layer is None and head is None and self.selected:
            layer, head = self.selected
        layers, heads = self._pick(0 if layer is None else layer, 0 if head is None else head)
        _, n_q, n_k = self._extent(layers[0], self._grid())
        grid = self._grid()[layers[0], heads[0], :n_q, :n_k]
        return heatmap_figure(
            grid,
            title=f"{self.layers[layers[0]]} head {heads[0]}, sample {self.sample}, "
            f"step {self.shown_step}",
            row_label="query",
            column_label="key",
        )


AttentionMaps._css = view_css(
    """
.nbviz-attn { display: flex; flex-direction: column; gap: 8px; }
.nbviz-attn-main { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.nbviz-attn-grid { display: grid; gap: 4px; align-items: center; }
.nbviz-attn-rowname { font-size: 0.85em; text-align: right; padding-right: 4px;
  max-width: 180px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.nbviz-attn-colname { font-size: 0.85em; text-align: center; }
.nbviz-attn-cell { cursor: pointer; border: 2px solid transparent; display: block; }
.nbviz-attn-cell.nbviz-selected { border-color: #d81b60; }
.nbviz-attn-cell.nbviz-collapsed { outline: 2px dashed #c62828; }
.nbviz-attn-cell.nbviz-uniform { outline: 2px dashed #1565c0; }
.nbviz-attn-cell.nbviz-dead { outline: 2px solid #616161; opacity: 0.55; }
.nbviz-attn-cell, .nbviz-attn-nohead { justify-self: center; }
.nbviz-attn-detail { display: flex; flex-direction: column; gap: 6px; max-width: 520px; }
.nbviz-attn-big { cursor: crosshair; }
.nbviz-attn-tokens { display: flex; flex-wrap: wrap; gap: 2px; font-family: monospace; }
.nbviz-attn-strip { display: flex; flex-wrap: wrap; gap: 2px; align-items: baseline;
  width: 100%; }
.nbviz-attn-striplabel { font-family: sans-serif; font-size: 0.85em; min-width: 4.5em;
  color: var(--jp-ui-font-color2, #616161); }
.nbviz-attn-token.nbviz-attn-key { cursor: default; }
.nbviz-attn-token { padding: 1px 3px; border-radius: 3px; cursor: pointer;
  border: 1px solid var(--jp-border-color2, #e0e0e0); }
.nbviz-attn-token.nbviz-query { border-color: #d81b60; font-weight: 700; }
.nbviz-attn-caption { font-size: 0.9em; color: var(--jp-ui-font-color2, #616161); }
.nbviz-attn-flags { font-size: 0.9em; }
.nbviz-toolbar input[type=range] { width: 220px; }
"""
)
