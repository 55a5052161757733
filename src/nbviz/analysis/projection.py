"""Embedding projections: 2-d layouts by PCA, t-SNE or UMAP, aligned over training, cached.

Methods
    ``"pca"``  principal components in numpy (linear, fast: the first thing on screen).
    ``"tsne"`` openTSNE. Measured here against scikit-learn's ``TSNE`` on a 64-d,
               10-cluster mixture (2 cores): about the same at 2,000 points (7 s),
               2.4x faster at 10,000 (40 s against 98 s), and only openTSNE can
               embed new points into a fitted map (needed for large N below),
               report progress and stop on request (its callbacks).
    ``"umap"`` umap-learn, imported on first use only (its import and JIT take
               20-35 s in a fresh process).

Parameters (``resolve_params`` fills in defaults and refuses unknown names)
    every method: ``seed`` (int), ``fit_size`` (int, default 20,000)
    tsne: ``perplexity`` (30), ``metric`` ("euclidean"), ``n_iter`` (500)
    umap: ``n_neighbors`` (15), ``min_dist`` (0.1), ``metric`` ("euclidean")
    ``metric`` is one of ``METRICS``. The same matrix, method and parameters
    give the same layout, bit for bit.

Large N
    Above ``fit_size`` points a method is fitted on a sample of ``fit_size``
    points (chosen by ``seed``) and the other points are placed into that map:
    ``PCA.transform``, openTSNE's ``TSNEEmbedding.transform`` (each new point
    optimised against the fitted ones), ``UMAP.transform``. ``Projection.note``
    says so ("fitted on 20,000 of 100,000 points").

Alignment over training (``compute_layout(..., align=True)``, the default)
    The layout at step t is the one at the previous recorded step carried
    forward: t-SNE and UMAP start from the previous layout (points matched by
    id; new ids are placed by a least-squares map from their PCA position),
    and every method's result is then rotated, reflected, scaled and shifted
    onto the previous layout (orthogonal Procrustes with scaling, on the ids
    both steps share). Clusters then form in place instead of jumping between
    steps. The first recorded step is the anchor, so the layout at a step
    depends on every earlier step: viewing step t computes (once) and caches
    the layouts of all recorded steps up to t.

Cache
    ``compute_layout`` stores each layout in the run (``run.put_projection``)
    under a key that hashes the run, split, layer, step, method, parameters and,
    for aligned layouts, the recorded steps it was chained over; a second view
    reads it back instead of computing (``cached_layout`` only reads).
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib.util
import json
import logging
import math
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = [
    "DEFAULT_PARAMS",
    "FIT_SIZE",
    "METHODS",
    "METHOD_LABELS",
    "METRICS",
    "Layout",
    "MethodUnavailableError",
    "Projection",
    "ProjectionCancelled",
    "align_layout",
    "cached_layout",
    "compute_layout",
    "layout_key",
    "method_unavailable",
    "procrustes",
    "project",
    "resolve_params",
    "sample_indices",
]

METHODS = ("pca", "tsne", "umap")
METHOD_LABELS = {"pca": "PCA", "tsne": "t-SNE", "umap": "UMAP"}
METRICS = ("euclidean", "cosine", "manhattan", "correlation")
FIT_SIZE = 20_000
"""Above this many points a method is fitted on a sample of this size (``fit_size``)."""
_PCA_EXACT_DIMS = 1_024

# Bump when a method's computation changes, so layouts cached by an older nbviz are redone.
_ALGORITHM_VERSION = 1

DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "pca": {"seed": 0, "fit_size": FIT_SIZE},
    "tsne": {
        "perplexity": 30.0,
        "metric": "euclidean",
        "n_iter": 500,
        "seed": 0,
        "fit_size": FIT_SIZE,
    },
    "umap": {
        "n_neighbors": 15,
        "min_dist": 0.1,
        "metric": "euclidean",
        "seed": 0,
        "fit_size": FIT_SIZE,
    },
}

_PACKAGES = {"tsne": ("openTSNE", "openTSNE"), "umap": ("umap", "umap-learn")}

ProgressFn = Callable[[float, str], None]
"""``progress(fraction in [0, 1], message)``."""


class CancelToken(Protocol):
    """Anything with ``is_set()`` (a ``threading.Event``): set means stop."""

    def is_set(self) -> bool: ...


class ProjectionCancelled(Exception):
    """A projection stopped because its cancel token was set."""


class MethodUnavailableError(RuntimeError):
    """The package behind a method is missing or fails to import; the message says which."""


# ---------------------------------------------------------------------- parameters


def _check_method(method: str) -> str:
    if method not in METHODS:
        close = difflib.get_close_matches(str(method), METHODS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"unknown projection method {method!r}{hint}; choose one of {', '.join(METHODS)}"
        )
    return method


def _as_int(name: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float, np.floating)):
        raise TypeError(f"projection parameter {name} must be an integer, got {value!r}")
    if float(value) != int(value):
        raise ValueError(f"projection parameter {name} must be an integer, got {value!r}")
    if int(value) < lo:
        raise ValueError(f"projection parameter {name} must be >= {lo}, got {value!r}")
    return int(value)


def _as_float(name: str, value: Any, lo: float, hi: float, lo_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"projection parameter {name} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < lo or v > hi or (lo_open and v == lo):
        bound = f"({lo}, {hi}]" if lo_open else f"[{lo}, {hi}]"
        raise ValueError(f"projection parameter {name} must be in {bound}, got {value!r}")
    return v


def resolve_params(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The full, checked parameters of ``method``: defaults overlaid with ``params``.

    Raises ValueError naming an unknown parameter (and the valid ones) or a
    value out of range, TypeError for a value of the wrong type.
    """
    _check_method(method)
    out = dict(DEFAULT_PARAMS[method])
    for name, value in dict(params or {}).items():
        if name not in out:
            close = difflib.get_close_matches(str(name), list(out), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(
                f"{METHOD_LABELS[method]} has no parameter {name!r}{hint}; "
                f"its parameters are {', '.join(out)}"
            )
        out[name] = value
    out["seed"] = _as_int("seed", out["seed"], 0)
    out["fit_size"] = _as_int("fit_size", out["fit_size"], 100)
    if "metric" in out and out["metric"] not in METRICS:
        raise ValueError(
            f"projection parameter metric must be one of {', '.join(METRICS)}, "
            f"got {out['metric']!r}"
        )
    if method == "tsne":
        out["perplexity"] = _as_float("perplexity", out["perplexity"], 0.0, 1e4, lo_open=True)
        out["n_iter"] = _as_int("n_iter", out["n_iter"], 1)
    if method == "umap":
        out["n_neighbors"] = _as_int("n_neighbors", out["n_neighbors"], 2)
        out["min_dist"] = _as_float("min_dist", out["min_dist"], 0.0, 1.0)
    return out


def method_unavailable(method: str) -> str | None:
    """None when ``method`` can run here, else a readable reason (nothing is imported)."""
    _check_method(method)
    if method == "pca":
        return None
    module, package = _PACKAGES[method]
    if importlib.util.find_spec(module) is None:
        return (
            f"{METHOD_LABELS[method]} is unavailable: the {package} package is not "
            f"installed (pip install {package})"
        )
    return None


def _import(method: str) -> Any:
    module, package = _PACKAGES[method]
    reason = method_unavailable(method)
    if reason:
        raise MethodUnavailableError(reason)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(module)
    except Exception as exc:  # a broken install (numba, llvmlite, a C extension)
        raise MethodUnavailableError(
            f"{METHOD_LABELS[method]} is unavailable: importing {package} failed with "
            f"{type(exc).__name__}: {exc} (reinstall it: pip install --force-reinstall {package})"
        ) from exc


# ---------------------------------------------------------------------- projecting


@dataclass(frozen=True)
class Projection:
    """A 2-d layout of a matrix's rows.

    ``coords`` is float32 ``(n, 2)``; rows whose features had NaN or Inf are NaN.
    ``fitted_on`` counts the rows the method was fitted on (the rest were placed
    into the fitted map); ``params`` are the resolved parameters.
    """

    coords: np.ndarray
    method: str
    params: dict[str, Any]
    n: int
    fitted_on: int

    @property
    def note(self) -> str:
        """ "fitted on 20,000 of 100,000 points" when fitted on a sample, else ""."""
        return fit_note(self.fitted_on, self.n)


def fit_note(fitted_on: int, n: int) -> str:
    """The sentence a view shows when a layout was fitted on a sample."""
    return "" if fitted_on >= n else f"fitted on {fitted_on:,} of {n:,} points"


def sample_indices(n: int, fit_size: int, seed: int) -> np.ndarray:
    """Sorted indices of the rows a method is fitted on: all of them up to ``fit_size``."""
    if n <= fit_size:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=fit_size, replace=False))


class _Progress:
    """Maps a sub-task's progress into a slice [lo, hi] of the caller's."""

    def __init__(self, fn: ProgressFn | None, cancel: CancelToken | None) -> None:
        self.fn = fn
        self.cancel = cancel

    def __call__(self, fraction: float, message: str) -> None:
        self.check()
        if self.fn is not None:
            self.fn(min(max(float(fraction), 0.0), 1.0), message)

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise ProjectionCancelled("projection cancelled")

    def part(self, lo: float, hi: float) -> _Progress:
        outer = self

        class _Part(_Progress):
            def __call__(self, fraction: float, message: str) -> None:
                outer(lo + (hi - lo) * min(max(float(fraction), 0.0), 1.0), message)

        return _Part(None, self.cancel)


def project(
    matrix: Any,
    method: str = "pca",
    params: Mapping[str, Any] | None = None,
    *,
    init: np.ndarray | None = None,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    n_jobs: int | None = None,
) -> Projection:
    """Lay out the rows of ``matrix`` (``(n, d)``) in 2-d with ``method``.

    Parameters
    ----------
    init
        ``(n, 2)`` starting positions for t-SNE and UMAP (ignored by PCA); rows of
        non-finite features may hold anything.
    progress
        Called with ``(fraction, message)`` as the work advances.
    cancel
        Checked between stages and iterations; when set, ProjectionCancelled is raised.
    n_jobs
        Threads for t-SNE (default: the CPU count); the result does not depend on it.
    """
    p = resolve_params(method, params)
    X = np.asarray(matrix)
    if X.ndim == 1:
        X = X.reshape(-1, 1)
    if X.ndim != 2:
        raise ValueError(f"project: matrix must be 2-d (n, d), got shape {list(X.shape)}")
    if X.dtype.kind not in "fiub":
        raise TypeError(f"project: matrix must be numeric, got dtype {X.dtype}")
    n = X.shape[0]
    if init is not None:
        init = np.asarray(init, dtype=np.float64)
        if init.shape != (n, 2):
            raise ValueError(
                f"project: init must have shape [{n}, 2] like the matrix rows, "
                f"got {list(init.shape)}"
            )
    report = _Progress(progress, cancel)
    coords = np.full((n, 2), np.nan, dtype=np.float32)
    finite = np.isfinite(X).all(axis=1) if X.dtype.kind == "f" else np.ones(n, dtype=bool)
    rows = np.flatnonzero(finite)
    Xf = np.ascontiguousarray(X[rows], dtype=np.float32)
    init_f = None if init is None else init[rows]
    if init_f is not None and not np.isfinite(init_f).all():
        raise ValueError("project: init has NaN or Inf for rows whose features are finite")
    fit = sample_indices(len(rows), p["fit_size"], p["seed"])
    report(0.0, f"{METHOD_LABELS[method]}: starting")
    if len(rows) == 0:
        out = np.zeros((0, 2))
    elif len(rows) < 3 or Xf.shape[1] == 1 or method == "pca":
        out = _pca(Xf, fit, p)
    elif method == "tsne":
        out = _tsne(Xf, fit, p, init_f, report, n_jobs)
    else:
        out = _umap(Xf, fit, p, init_f, report)
    coords[rows] = out.astype(np.float32)
    report(1.0, f"{METHOD_LABELS[method]}: done")
    return Projection(coords=coords, method=method, params=p, n=n, fitted_on=len(fit))


def _pca(X: np.ndarray, fit: np.ndarray, p: Mapping[str, Any]) -> np.ndarray:
    """The first two principal components, fitted on the rows ``fit``.

    Plain numpy (importing scikit-learn costs ~2 s in a fresh kernel, more than
    the fit): the eigenvectors of the covariance for up to ``_PCA_EXACT_DIMS``
    features, a seeded randomized range finder (Halko et al.) above. Signs are
    fixed (largest loading positive), so the same data gives the same layout.
    """
    n, d = X.shape
    k = min(2, d, len(fit))
    out = np.zeros((n, 2))
    if k == 0 or len(fit) < 2:
        return out
    sample = X[fit].astype(np.float64)
    mean = sample.mean(axis=0)
    centred = sample - mean
    if d <= _PCA_EXACT_DIMS:
        _, vectors = np.linalg.eigh(centred.T @ centred)
        components = vectors[:, ::-1][:, :k]
    else:
        rng = np.random.default_rng(p["seed"])
        basis = centred @ rng.standard_normal((d, k + 10))
        for _ in range(4):  # power iterations sharpen the top of the spectrum
            basis, _ = np.linalg.qr(centred @ (centred.T @ basis))
        small = basis.T @ centred
        _, _, vt = np.linalg.svd(small, full_matrices=False)
        components = vt[:k].T
    biggest = np.argmax(np.abs(components), axis=0)
    components = components * np.sign(components[biggest, np.arange(k)])
    for lo in range(0, n, 100_000):  # float64 in slices: bounded memory at 1M rows
        rows = X[lo : lo + 100_000].astype(np.float64) - mean
        out[lo : lo + 100_000, :k] = rows @ components
    return out


def _rest(n: int, fit: np.ndarray) -> np.ndarray:
    mask = np.ones(n, dtype=bool)
    mask[fit] = False
    return np.flatnonzero(mask)


def _batches(idx: np.ndarray, size: int) -> Iterator[np.ndarray]:
    for start in range(0, len(idx), size):
        yield idx[start : start + size]


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        log.setLevel(level)


def _tsne(
    X: np.ndarray,
    fit: np.ndarray,
    p: Mapping[str, Any],
    init: np.ndarray | None,
    report: _Progress,
    n_jobs: int | None,
) -> np.ndarray:
    openTSNE = _import("tsne")
    n_fit = len(fit)
    perplexity = min(p["perplexity"], max((n_fit - 1) / 3.0, 1.0))
    ee_iter = 250
    total = ee_iter + p["n_iter"]
    fit_part = report.part(0.1, 0.9 if len(fit) < len(X) else 1.0)
    done = {"iters": 0}

    def callback(iteration: int, error: float, embedding: np.ndarray) -> bool:
        done["iters"] += 25
        if report.cancel is not None and report.cancel.is_set():
            return True  # openTSNE stops this phase; the check after fit raises
        fit_part(done["iters"] / total, f"t-SNE: iteration {min(done['iters'], total)}/{total}")
        return False

    if init is not None:
        start = init[fit] - init[fit].mean(axis=0)
        scale = float(start[:, 0].std()) or 1.0
        start = start / scale * 1e-4  # openTSNE's recommended starting spread
    else:
        start = "pca"
    tsne = openTSNE.TSNE(
        n_components=2,
        perplexity=perplexity,
        metric=p["metric"],
        n_iter=p["n_iter"],
        early_exaggeration_iter=ee_iter,
        initialization=start,
        random_state=p["seed"],
        n_jobs=n_jobs or os.cpu_count() or 1,
        callbacks=callback,
        callbacks_every_iters=25,
        verbose=False,
    )
    report(0.02, "t-SNE: nearest neighbours and affinities")
    with _quiet("openTSNE"):
        embedding = tsne.fit(X[fit])
    report.check()
    out = np.zeros((len(X), 2))
    rest = _rest(len(X), fit)
    if len(rest):
        place = report.part(0.9, 1.0)
        for i, batch in enumerate(_batches(rest, 10_000)):
            place(i * 10_000 / len(rest), f"t-SNE: placing {len(rest):,} more points")
            with _quiet("openTSNE"):
                # transform centres the fitted embedding in place: read it afterwards
                out[batch] = np.asarray(embedding.transform(X[batch]))
            report.check()
    out[fit] = np.asarray(embedding)
    return out


# umap-learn reports its epochs only through tqdm (``umap.layouts.tqdm``). To get
# progress and a cancel point per epoch, that name is replaced once by a proxy that
# hands the loop to the reporter registered for the calling thread and behaves
# exactly like tqdm for every other caller.
_UMAP_LOCK = threading.Lock()
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


def _umap(
    X: np.ndarray,
    fit: np.ndarray,
    p: Mapping[str, Any],
    init: np.ndarray | None,
    report: _Progress,
) -> np.ndarray:
    report(0.01, "UMAP: loading umap-learn (the first time takes a while)")
    umap = _import("umap")
    n_fit = len(fit)
    sampled = n_fit < len(X)
    phase = {"part": report.part(0.3, 0.85 if sampled else 1.0), "label": "layout"}

    def on_epoch(i: int, total: int) -> None:
        phase["part"](i / max(total, 1), f"UMAP: {phase['label']} epoch {i}/{total}")

    start: Any = "spectral"
    if init is not None:
        start = np.ascontiguousarray(init[fit], dtype=np.float32)
    reducer = umap.UMAP(
        n_components=2,
        n_neighbors=min(p["n_neighbors"], n_fit - 1),
        min_dist=p["min_dist"],
        metric=p["metric"],
        random_state=p["seed"],
        transform_seed=p["seed"],
        init=start,
        verbose=False,
    )
    out = np.zeros((len(X), 2))
    with _UMAP_LOCK:
        hooked = _install_epoch_hook(umap)
        me = threading.get_ident()
        if hooked:
            _EPOCH_REPORTERS[me] = on_epoch
        try:
            report(0.05, "UMAP: nearest neighbours")
            with _quiet("umap"):
                out[fit] = reducer.fit_transform(X[fit])
            report.check()
            rest = _rest(len(X), fit)
            if len(rest):
                phase["part"], phase["label"] = report.part(0.85, 1.0), "placing points,"
                report(0.85, f"UMAP: placing {len(rest):,} more points")
                with _quiet("umap"):
                    out[rest] = reducer.transform(X[rest])
        finally:
            _EPOCH_REPORTERS.pop(me, None)
    return out


# ---------------------------------------------------------------------- alignment


def procrustes(
    source: np.ndarray, target: np.ndarray, *, scaling: bool = True
) -> tuple[np.ndarray, float, np.ndarray, np.ndarray, np.ndarray]:
    """Orthogonal Procrustes with scaling: ``s * (source - mu_s) @ R + mu_t ~ target``.

    ``source`` and ``target`` are ``(m, 2)`` with matching rows. Returns
    ``(R, s, mu_s, mu_t, aligned_source)``; R may include a reflection (a layout's
    mirror image is the same layout).
    """
    a = np.asarray(source, dtype=np.float64)
    b = np.asarray(target, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(
            f"procrustes: source and target need the same (m, k) shape, got "
            f"{list(a.shape)} and {list(b.shape)}"
        )
    mu_s, mu_t = a.mean(axis=0), b.mean(axis=0)
    A, B = a - mu_s, b - mu_t
    norm = float((A**2).sum())
    if norm == 0.0 or len(a) < 2:
        R = np.eye(a.shape[1])
        return R, 1.0, mu_s, mu_t, A + mu_t
    U, S, Vt = np.linalg.svd(A.T @ B)
    R = U @ Vt
    s = float(S.sum() / norm) if scaling else 1.0
    return R, s, mu_s, mu_t, s * A @ R + mu_t


def align_layout(
    coords: np.ndarray, ids: np.ndarray, ref_coords: np.ndarray, ref_ids: np.ndarray
) -> np.ndarray:
    """``coords`` moved onto ``ref_coords`` by the Procrustes fit on the ids both share.

    Every row is transformed (new ids too); with fewer than 3 shared, finite
    points the layout is returned unchanged.
    """
    coords = np.asarray(coords, dtype=np.float64)
    here, there = _match(ids, ref_ids)
    ok = np.isfinite(coords[here]).all(axis=1) & np.isfinite(ref_coords[there]).all(axis=1)
    here, there = here[ok], there[ok]
    if len(here) < 3:
        return coords.astype(np.float32)
    R, s, mu_s, mu_t, _ = procrustes(coords[here], np.asarray(ref_coords, np.float64)[there])
    return (s * (coords - mu_s) @ R + mu_t).astype(np.float32)


def _match(ids: np.ndarray, ref_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``(i, j)`` with ``ids[i] == ref_ids[j]``."""
    ids = np.asarray(ids)
    ref_ids = np.asarray(ref_ids)
    if len(ids) == len(ref_ids) and np.array_equal(ids, ref_ids):
        idx = np.arange(len(ids))
        return idx, idx
    order = np.argsort(ref_ids, kind="stable")
    pos = np.searchsorted(ref_ids[order], ids)
    pos = np.clip(pos, 0, max(len(ref_ids) - 1, 0))
    hit = (ref_ids[order][pos] == ids) if len(ref_ids) else np.zeros(len(ids), dtype=bool)
    return np.flatnonzero(hit), order[pos[hit]]


def _warm_start(matrix: np.ndarray, ids: np.ndarray, prev: Layout, seed: int) -> np.ndarray | None:
    """Starting positions from the previous layout; new ids via a map from their PCA position."""
    here, there = _match(ids, prev.ids)
    prev_xy = np.asarray(prev.coords, dtype=np.float64)[there]
    ok = np.isfinite(prev_xy).all(axis=1)
    here, prev_xy = here[ok], prev_xy[ok]
    if len(here) < 3:
        return None
    init = np.full((len(ids), 2), np.nan)
    init[here] = prev_xy
    missing = np.flatnonzero(~np.isfinite(init).all(axis=1))
    if len(missing):
        X = np.asarray(matrix, dtype=np.float64)
        finite = np.isfinite(X).all(axis=1)
        pca = np.zeros((len(ids), 2))
        pca[finite] = _pca(
            X[finite], sample_indices(int(finite.sum()), FIT_SIZE, seed), {"seed": seed}
        )
        design = np.c_[pca[here], np.ones(len(here))]
        coef, *_ = np.linalg.lstsq(design, prev_xy, rcond=None)
        init[missing] = np.c_[pca[missing], np.ones(len(missing))] @ coef
    return init


# ---------------------------------------------------------------------- layouts of a run


class _RunLike(Protocol):
    def meta(self, key: str | None = None, default: Any = None) -> Any: ...
    def embedding_layers(self, split: str = "val", kind: str | None = None) -> list[str]: ...
    def embedding_steps(self, split: str = "val", layer: str | None = None) -> np.ndarray: ...
    def embeddings(
        self, step: int | None, split: str = "val", layer: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]: ...
    def projection(self, key: str) -> tuple[np.ndarray, dict[str, Any]] | None: ...
    def put_projection(
        self,
        key: str,
        split: str,
        layer: str,
        step: int,
        method: str,
        params: dict[str, Any],
        matrix: np.ndarray,
    ) -> bool: ...


@dataclass(frozen=True)
class Layout:
    """The layout of one recorded embedding: ``coords[i]`` is where sample ``ids[i]`` goes."""

    ids: np.ndarray
    coords: np.ndarray
    step: int
    split: str
    layer: str
    method: str
    params: dict[str, Any]
    align: bool
    fitted_on: int
    key: str
    cached: bool = field(default=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def note(self) -> str:
        """ "fitted on 20,000 of 100,000 points" when fitted on a sample, else ""."""
        return fit_note(self.fitted_on, self.n)


def _run_identity(run: _RunLike) -> str:
    created = run.meta("created")
    if created is None:
        return str(getattr(run, "run_dir", "run"))
    return json.dumps(created)


def layout_key(
    run: _RunLike | str,
    split: str,
    layer: str,
    step: int,
    method: str,
    params: Mapping[str, Any] | None = None,
    chain: Sequence[int] | None = None,
) -> str:
    """The cache key of a layout: a hash of run, split, layer, step, method, parameters
    and (aligned layouts) the recorded steps up to ``step`` it is chained over."""
    identity = run if isinstance(run, str) else _run_identity(run)
    payload = {
        "v": _ALGORITHM_VERSION,
        "run": identity,
        "split": split,
        "layer": layer,
        "step": int(step),
        "method": method,
        "params": resolve_params(method, params),
        "chain": None if chain is None else [int(s) for s in chain],
    }
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return f"layout-{method}-{digest[:40]}"


def _resolve_layer(run: _RunLike, split: str, layer: str | None) -> str:
    if layer is not None:
        return layer
    layers = run.embedding_layers(split, "embedding")
    if not layers:
        raise ValueError(f"no embeddings recorded for split {split!r}")
    return layers[0]


def _chain(run: _RunLike, split: str, layer: str, step: int) -> list[int]:
    steps = [int(s) for s in run.embedding_steps(split, layer)]
    if int(step) not in steps:
        shown = ", ".join(map(str, steps[:10])) + (" ..." if len(steps) > 10 else "")
        raise ValueError(
            f"no embeddings of {layer!r} ({split}) at step {step}; recorded steps: "
            f"{shown or 'none'}"
        )
    return [s for s in steps if s <= int(step)]


def _load(run: _RunLike, key: str, step: int, split: str, layer: str) -> Layout | None:
    hit = run.projection(key)
    if hit is None:
        return None
    coords, meta = hit
    info = meta.get("params") or {}
    ids, _ = run.embeddings(step, split, layer)
    if len(ids) != len(coords):  # the embedding was logged again with other rows
        return None
    return Layout(
        ids=np.asarray(ids),
        coords=np.asarray(coords, dtype=np.float32),
        step=int(step),
        split=split,
        layer=layer,
        method=meta["method"],
        params={k: v for k, v in info.items() if k not in ("align", "fitted_on", "n")},
        align=bool(info.get("align", False)),
        fitted_on=int(info.get("fitted_on", len(ids))),
        key=key,
        cached=True,
    )


def cached_layout(
    run: _RunLike,
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
    return _load(run, key, step, split, layer)


def compute_layout(
    run: _RunLike,
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
    report = _Progress(progress, cancel)
    recorded = _chain(run, split, layer, step)  # refuses a step that is not recorded
    chain = recorded if align else [int(step)]
    keys = [
        layout_key(run, split, layer, s, method, p, chain[: i + 1] if align else None)
        for i, s in enumerate(chain)
    ]
    start = len(chain) - 1
    prev: Layout | None = None
    while start >= 0:
        prev = _load(run, keys[start], chain[start], split, layer)
        if prev is not None:
            break
        start -= 1
        if not align:
            break
    if prev is not None and start == len(chain) - 1:
        return prev
    todo = list(range(start + 1, len(chain)))
    label = METHOD_LABELS[method]
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
            init = _warm_start(matrix, ids, prev, p["seed"])
        proj = project(
            matrix, method, p, init=init, progress=step_progress, cancel=cancel, n_jobs=n_jobs
        )
        coords = proj.coords
        if prev is not None and align:
            coords = align_layout(coords, ids, prev.coords, prev.ids)
        stored = {**p, "align": align, "fitted_on": proj.fitted_on, "n": len(ids)}
        run.put_projection(keys[i], split, layer, s, method, stored, coords)
        prev = Layout(
            ids=np.asarray(ids),
            coords=coords,
            step=s,
            split=split,
            layer=layer,
            method=method,
            params=p,
            align=align,
            fitted_on=proj.fitted_on,
            key=keys[i],
            cached=False,
        )
    report(1.0, f"{label}: done")
    assert prev is not None
    return prev
