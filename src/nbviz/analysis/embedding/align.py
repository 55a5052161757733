"""Layouts carried over training, so that clusters form in place instead of jumping.

The layout at step t is the one at the previous recorded step carried forward:
t-SNE and UMAP start from the previous layout (:func:`warm_start`: points matched
by id; new ids are placed by a least-squares map from their PCA position), and
every method's result is then rotated, reflected, scaled and shifted onto the
previous layout (:func:`align_layout`: orthogonal Procrustes with scaling, on
the ids both steps share).
"""

from __future__ import annotations

import numpy as np

from nbviz.analysis.embedding.methods import FIT_SIZE
from nbviz.analysis.embedding.pca import pca
from nbviz.analysis.embedding.sampling import sample_indices

__all__ = ["align_layout", "procrustes", "warm_start"]


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


def warm_start(
    matrix: np.ndarray,
    ids: np.ndarray,
    ref_coords: np.ndarray,
    ref_ids: np.ndarray,
    seed: int,
) -> np.ndarray | None:
    """Starting positions from a previous layout; new ids via a map from their PCA position.

    None when fewer than 3 ids are shared with a finite previous position.
    """
    here, there = _match(ids, ref_ids)
    prev_xy = np.asarray(ref_coords, dtype=np.float64)[there]
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
        xy = np.zeros((len(ids), 2))
        xy[finite] = pca(
            X[finite], sample_indices(int(finite.sum()), FIT_SIZE, seed), {"seed": seed}
        )
        design = np.c_[xy[here], np.ones(len(here))]
        coef, *_ = np.linalg.lstsq(design, prev_xy, rcond=None)
        init[missing] = np.c_[xy[missing], np.ones(len(missing))] @ coef
    return init
