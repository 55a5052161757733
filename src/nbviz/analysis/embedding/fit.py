"""``project``: a matrix's rows laid out in 2-d by one method.

Rows whose features hold NaN or Inf get NaN coordinates and take no part in
the fit. Above ``fit_size`` finite rows the method is fitted on a sample and
the rest are placed into its map (:mod:`~nbviz.analysis.embedding.sampling`);
fewer than three rows, or one feature, fall back to PCA.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from nbviz.analysis.embedding.methods import METHOD_LABELS, resolve_params
from nbviz.analysis.embedding.pca import pca
from nbviz.analysis.embedding.progress import CancelToken, Progress, ProgressFn
from nbviz.analysis.embedding.sampling import fit_note, sample_indices
from nbviz.analysis.embedding.tsne import tsne
from nbviz.analysis.embedding.umap import umap

__all__ = ["Projection", "project"]


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
    report = Progress(progress, cancel)
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
        out = pca(Xf, fit, p)
    elif method == "tsne":
        out = tsne(Xf, fit, p, init_f, report, n_jobs)
    else:
        out = umap(Xf, fit, p, init_f, report)
    coords[rows] = out.astype(np.float32)
    report(1.0, f"{METHOD_LABELS[method]}: done")
    return Projection(coords=coords, method=method, params=p, n=n, fitted_on=len(fit))
