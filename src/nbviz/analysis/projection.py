"""Embedding projections: 2-d layouts by PCA, t-SNE or UMAP, aligned over training, cached.

This module is the way in: :func:`compute_layout` and :func:`cached_layout`
give the layout of an embedding a run recorded, and every public name of the
parts in :mod:`nbviz.analysis.embedding` is here too (``project``,
``resolve_params``, ``procrustes``, ...).

Methods (:mod:`~nbviz.analysis.embedding.methods`)
    ``"pca"``  principal components in numpy (linear, fast: the first thing on screen).
    ``"tsne"`` openTSNE (faster than scikit-learn's here, and it can embed new
               points into a fitted map, report progress and stop on request).
    ``"umap"`` umap-learn, imported on first use only (20-35 s in a fresh process).

Parameters (``resolve_params`` fills in defaults and refuses unknown names)
    every method: ``seed`` (int), ``fit_size`` (int, default 20,000)
    tsne: ``perplexity`` (30), ``metric`` ("euclidean"), ``n_iter`` (500)
    umap: ``n_neighbors`` (15), ``min_dist`` (0.1), ``metric`` ("euclidean")
    ``metric`` is one of ``METRICS``. The same matrix, method and parameters
    give the same layout, bit for bit.

Large N (:mod:`~nbviz.analysis.embedding.sampling`)
    Above ``fit_size`` points a method is fitted on a sample of ``fit_size``
    points (chosen by ``seed``) and the other points are placed into that map:
    ``PCA.transform``, openTSNE's ``TSNEEmbedding.transform``, ``UMAP.transform``.
    ``Projection.note`` says so ("fitted on 20,000 of 100,000 points").

Alignment over training (``compute_layout(..., align=True)``, the default)
    The layout at step t is the one at the previous recorded step carried
    forward (:mod:`~nbviz.analysis.embedding.align`): warm-started from it and
    then fitted onto it by Procrustes on the ids both steps share, so clusters
    form in place instead of jumping between steps. The first recorded step is
    the anchor, so the layout at a step depends on every earlier step: viewing
    step t computes (once) and caches the layouts of all recorded steps up to t.

Cache (:mod:`~nbviz.analysis.embedding.layout`)
    ``compute_layout`` stores each layout in the run under a key that hashes
    the run, split, layer, step, method, parameters and, for aligned layouts,
    the recorded steps it was chained over; a second view reads it back instead
    of computing (``cached_layout`` only reads).

Progress (:mod:`~nbviz.analysis.embedding.progress`)
    ``progress(fraction, message)`` is called as the work advances, and a set
    ``cancel`` token stops it with ProjectionCancelled (the projector's
    background job uses both).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from nbviz.analysis.embedding.align import align_layout, procrustes, warm_start
from nbviz.analysis.embedding.fit import Projection, project
from nbviz.analysis.embedding.layout import (
    Layout,
    layout_key,
    load_layout,
    run_identity,
    stored_params,
)
from nbviz.analysis.embedding.methods import (
    DEFAULT_PARAMS,
    FIT_SIZE,
    METHOD_LABELS,
    METHODS,
    METRICS,
    MethodUnavailableError,
    method_unavailable,
    resolve_params,
)
from nbviz.analysis.embedding.progress import (
    CancelToken,
    Progress,
    ProgressFn,
    ProjectionCancelled,
)
from nbviz.analysis.embedding.sampling import fit_note, sample_indices

if TYPE_CHECKING:
    from nbviz.store import Reader

__all__ = [
    "DEFAULT_PARAMS",
    "FIT_SIZE",
    "METHODS",
    "METHOD_LABELS",
    "METRICS",
    "CancelToken",
    "Layout",
    "MethodUnavailableError",
    "Projection",
    "ProjectionCancelled",
    "ProgressFn",
    "align_layout",
    "cached_layout",
    "compute_layout",
    "fit_note",
    "layout_key",
    "method_unavailable",
    "procrustes",
    "project",
    "resolve_params",
    "sample_indices",
]


def _resolve_layer(run: Reader, split: str, layer: str | None) -> str:
    if layer is not None:
        return layer
    layers = run.embedding_layers(split, "embedding")
    if not layers:
        raise ValueError(f"no embeddings recorded for split {split!r}")
    return layers[0]


def _chain(run: Reader, split: str, layer: str, step: int) -> list[int]:
    """The recorded steps up to ``step``, which must be one of them."""
    steps = [int(s) for s in run.embedding_steps(split, layer)]
    if int(step) not in steps:
        shown = ", ".join(map(str, steps[:10])) + (" ..." if len(steps) > 10 else "")
        raise ValueError(
            f"no embeddings of {layer!r} ({split}) at step {step}; recorded steps: "
            f"{shown or 'none'}"
        )
    return [s for s in steps if s <= int(step)]


def cached_layout(
    run: Reader,
    step: int,
    *,
    split: str = "val",
    layer: str | None = None,
    method: str = "pca",
    params: Mapping[str, Any] | None = None,
    align: bool = True,
) -> Layout | None:
    """The cached layout for these arguments, or None; never computes."""
    layer = _resolve_layer(run, split, layer)
    p = resolve_params(method, params)
    chain = _chain(run, split, layer, step)
    key = layout_key(run, split, layer, step, method, p, chain if align else None)
    return load_layout(run, key, step, split, layer)


def compute_layout(
    run: Reader,
    step: int,
    *,
    split: str = "val",
    layer: str | None = None,
    method: str = "pca",
    params: Mapping[str, Any] | None = None,
    align: bool = True,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    n_jobs: int | None = None,
) -> Layout:
    """The layout of the embedding recorded at ``step``, from the run's cache or computed.

    With ``align`` the layouts of the earlier recorded steps that are not cached
    yet are computed first (see the module docstring); each one is cached as
    it is done, so a cancelled run keeps what it finished.
    """
    layer = _resolve_layer(run, split, layer)
    p = resolve_params(method, params)
    report = Progress(progress, cancel)
    recorded = _chain(run, split, layer, step)  # refuses a step that is not recorded
    chain = recorded if align else [int(step)]
    identity = run_identity(run)
    keys = [
        layout_key(identity, split, layer, s, method, p, chain[: i + 1] if align else None)
        for i, s in enumerate(chain)
    ]
    start = len(chain) - 1
    prev: Layout | None = None
    while start >= 0:  # the latest layout of the chain already cached, if any
        prev = load_layout(run, keys[start], chain[start], split, layer)
        if prev is not None:
            break
        start -= 1
        if not align:
            break
    if prev is not None and start == len(chain) - 1:
        return prev
    todo = list(range(start + 1, len(chain)))
    for k, i in enumerate(todo):
        s = chain[i]
        part = report.part(k / len(todo), (k + 1) / len(todo))
        where = (
            f" (step {s}: {k + 1} of {len(todo)}, aligned over training)" if len(todo) > 1 else ""
        )

        def step_progress(
            fraction: float, message: str, _part: Any = part, _w: str = where
        ) -> None:
            _part(fraction, message + _w)

        report.check()
        ids, matrix = run.embeddings(s, split, layer)
        init = None
        if prev is not None and method != "pca":
            init = warm_start(matrix, ids, prev.coords, prev.ids, p["seed"])
        proj = project(
            matrix, method, p, init=init, progress=step_progress, cancel=cancel, n_jobs=n_jobs
        )
        coords = proj.coords
        if prev is not None and align:
            coords = align_layout(coords, ids, prev.coords, prev.ids)
        stored = stored_params(p, align, proj.fitted_on, len(ids))
        run.put_projection(keys[i], split, layer, s, method, stored, coords)
        prev = Layout.from_stored(keys[i], ids, coords, s, split, layer, method, stored)
    report(1.0, f"{METHOD_LABELS[method]}: done")
    assert prev is not None
    return prev
