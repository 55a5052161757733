"""UMAP by umap-learn, fitted on a sample and the other points placed by ``UMAP.transform``.

umap-learn is imported on first use only (its import and JIT take a minute in
a fresh process, seconds once its compiled code is cached: see
:mod:`~nbviz.analysis.embedding.jit_cache`, whose note the first fit reports).
It reports its epochs only through tqdm
(``umap.layouts.tqdm``): to get progress and a cancel point per epoch, that name
is replaced once by a proxy that hands the loop to the reporter registered for
the calling thread and behaves exactly like tqdm for every other caller.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from nbviz.analysis.embedding import jit_cache
from nbviz.analysis.embedding.methods import import_method, quiet
from nbviz.analysis.embedding.neighbours import exact_neighbours
from nbviz.analysis.embedding.progress import Progress
from nbviz.analysis.embedding.sampling import rest

__all__ = ["umap"]

_UMAP_LOCK = threading.Lock()
_FITTED: list[bool] = []  # not empty once a fit ran in this process (numba compiled)
_EPOCH_REPORTERS: dict[int, Callable[[int, int], None]] = {}


class _TqdmProxy:
    def __init__(self, original: Any) -> None:
        self.original = original

    def __call__(self, iterable: Iterable[Any] | None = None, *args: Any, **kwargs: Any) -> Any:
        reporter = _EPOCH_REPORTERS.get(threading.get_ident())
        if reporter is None or iterable is None:
            return self.original(iterable, *args, **kwargs)
        items = list(iterable)

        def walk() -> Iterator[Any]:
            for i, item in enumerate(items):
                reporter(i, len(items))
                yield item

        return walk()


def _install_epoch_hook(umap_module: Any) -> bool:
    layouts = getattr(umap_module, "layouts", None)
    original = getattr(layouts, "tqdm", None)
    if layouts is None or original is None:
        return False
    if not isinstance(original, _TqdmProxy):
        layouts.tqdm = _TqdmProxy(original)
    return True


def umap(
    X: np.ndarray,
    fit: np.ndarray,
    p: Mapping[str, Any],
    init: np.ndarray | None,
    report: Progress,
) -> np.ndarray:
    """The UMAP layout (float64 ``(n, 2)``) of every row, fitted on the rows ``fit``.

    ``init``: starting positions (of every row) or None for a spectral start.
    One UMAP fit runs at a time (the epoch hook is process-wide).
    """
    first = not _FITTED
    if first:  # the kernel's first fit: say what it costs while it runs
        note = jit_cache.first_fit_note(jit_cache.prepare())
        warm = jit_cache.cache_is_warm()
    report(0.01, note if first else "UMAP: starting")
    with jit_cache.caching_numba() if first else contextlib.nullcontext():
        package = import_method("umap")
    if first:
        jit_cache.cache_compiled()
    cost = ""
    if first:
        cost = " (first fit in this kernel: " + (
            "reading compiled code from the cache)" if warm else "compiling, about a minute)"
        )
    n_fit = len(fit)
    sampled = n_fit < len(X)
    phase = {"part": report.part(0.3, 0.85 if sampled else 1.0), "label": "layout"}

    def on_epoch(i: int, total: int) -> None:
        phase["part"](i / max(total, 1), f"UMAP: {phase['label']} epoch {i}/{total}")

    start: Any = "spectral"
    if init is not None:
        start = np.ascontiguousarray(init[fit], dtype=np.float32)
    k = min(p["n_neighbors"], n_fit - 1)
    # every row fitted, none placed later: exact neighbours (scikit-learn, no compiling)
    # instead of pynndescent's search, whose numba code cannot be cached across kernels
    knn: tuple[Any, ...] = (None, None, None)
    if not sampled and k >= 2:
        report(0.03, f"UMAP: nearest neighbours{cost}")
        knn = exact_neighbours(X[fit], k, p["metric"])
    reducer = package.UMAP(
        n_components=2,
        n_neighbors=k,
        precomputed_knn=knn,
        min_dist=p["min_dist"],
        metric=p["metric"],
        random_state=p["seed"],
        transform_seed=p["seed"],
        init=start,
        verbose=False,
    )
    out = np.zeros((len(X), 2))
    with _UMAP_LOCK:
        hooked = _install_epoch_hook(package)
        me = threading.get_ident()
        if hooked:
            _EPOCH_REPORTERS[me] = on_epoch
        try:
            what = "neighbour graph" if knn[0] is not None else "nearest neighbours"
            report(0.05, f"UMAP: {what}{cost}")
            with quiet("umap"):
                out[fit] = reducer.fit_transform(X[fit])
            _FITTED.append(True)
            report.check()
            others = rest(len(X), fit)
            if len(others):
                phase["part"], phase["label"] = report.part(0.85, 1.0), "placing points,"
                report(0.85, f"UMAP: placing {len(others):,} more points")
                with quiet("umap"):
                    out[others] = reducer.transform(X[others])
        finally:
            _EPOCH_REPORTERS.pop(me, None)
    return out
