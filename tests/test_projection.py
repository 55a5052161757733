"""Projections: deterministic per seed, computed once and cached, aligned over training."""

from __future__ import annotations

import numpy as np
import pytest

import nbviz
from nbviz.analysis import projection as P


def blobs(n: int, d: int = 16, k: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points of ``d`` dims around ``k`` well separated centres, and their class."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=8.0, size=(k, d))
    labels = rng.integers(0, k, size=n)
    return (centres[labels] + rng.normal(size=(n, d))).astype(np.float32), labels


def rotating_run(path, steps=4, n=300, d=16, seed=0):
    """A run whose embedding at each step is the same cloud, rotated and jittered a little:
    the picture does not change, so a good layout should barely move."""
    X, labels = blobs(n, d, seed=seed)
    rng = np.random.default_rng(seed + 1)
    run = nbviz.Run(path)
    for s in range(steps):
        q, _ = np.linalg.qr(rng.normal(size=(d, d)))
        Xs = X @ q + rng.normal(scale=0.05, size=X.shape)
        run.log_embeddings(s * 10, Xs, ids=np.arange(n) + 1000, split="val")
    run.flush()
    return run, labels


def mean_step_displacement(layouts) -> float:
    out = []
    for a, b in zip(layouts, layouts[1:]):
        out.append(float(np.linalg.norm(a.coords - b.coords, axis=1).mean()))
    return float(np.mean(out))


def spread(coords: np.ndarray) -> float:
    return float(np.linalg.norm(coords - coords.mean(axis=0), axis=1).mean())


class TestProject:
    def test_pca_is_deterministic_and_separates_clusters(self):
        X, labels = blobs(500)
        a = P.project(X, "pca")
        b = P.project(X, "pca")
        assert a.coords.dtype == np.float32 and a.coords.shape == (500, 2)
        np.testing.assert_array_equal(a.coords, b.coords)
        # each cluster is compact compared with the whole layout
        within = np.mean([spread(a.coords[labels == c]) for c in range(4)])
        assert within < 0.5 * spread(a.coords)

    def test_tsne_is_deterministic_for_a_seed_and_depends_on_it(self):
        X, _ = blobs(300)
        params = {"seed": 3, "n_iter": 150}
        a = P.project(X, "tsne", params, n_jobs=1)
        b = P.project(X, "tsne", params, n_jobs=2)
        c = P.project(X, "tsne", {"seed": 4, "n_iter": 150}, n_jobs=1)
        np.testing.assert_array_equal(a.coords, b.coords)
        assert not np.allclose(a.coords, c.coords)

    def test_umap_is_deterministic_for_a_seed(self):
        X, _ = blobs(300)
        a = P.project(X, "umap", {"seed": 1})
        b = P.project(X, "umap", {"seed": 1})
        np.testing.assert_array_equal(a.coords, b.coords)
        assert np.isfinite(a.coords).all()

    def test_rows_with_nan_or_inf_get_nan_coordinates_and_the_rest_are_laid_out(self):
        X, _ = blobs(200)
        X[5, 3] = np.nan
        X[7, 0] = np.inf
        out = P.project(X, "pca").coords
        assert np.isnan(out[[5, 7]]).all()
        assert np.isfinite(np.delete(out, [5, 7], axis=0)).all()

    def test_above_fit_size_the_method_is_fitted_on_a_sample_and_says_so(self):
        X, labels = blobs(1_000)
        proj = P.project(X, "tsne", {"fit_size": 200, "n_iter": 100}, n_jobs=2)
        assert proj.fitted_on == 200
        assert proj.note == "fitted on 200 of 1,000 points"
        assert np.isfinite(proj.coords).all()
        # the placed points land by their own cluster
        fit = P.sample_indices(1_000, 200, 0)
        rest = np.setdiff1d(np.arange(1_000), fit)
        centres = np.array([proj.coords[fit][labels[fit] == c].mean(axis=0) for c in range(4)])
        nearest = np.linalg.norm(proj.coords[rest][:, None, :] - centres[None], axis=2).argmin(
            axis=1
        )
        assert (nearest == labels[rest]).mean() > 0.95

    def test_progress_is_reported_and_a_cancel_stops_the_work(self):
        X, _ = blobs(300)
        seen: list[float] = []
        P.project(X, "tsne", {"n_iter": 100}, progress=lambda f, m: seen.append(f), n_jobs=1)
        assert seen[0] == 0.0 and seen[-1] == 1.0 and len(seen) > 5
        assert seen == sorted(seen)

        class Stop:
            def is_set(self):
                return True

        with pytest.raises(P.ProjectionCancelled):
            P.project(X, "tsne", {"n_iter": 100}, cancel=Stop(), n_jobs=1)

    @pytest.mark.parametrize(
        ("method", "params", "message"),
        [
            ("tsme", None, "'tsme'"),
            ("tsne", {"perplexty": 5}, "did you mean 'perplexity'"),
            ("umap", {"min_dist": 2.0}, "min_dist"),
            ("tsne", {"metric": "cosin"}, "metric must be one of"),
        ],
    )
    def test_bad_arguments_name_the_offending_value(self, method, params, message):
        with pytest.raises(ValueError, match=message):
            P.resolve_params(method, params)

    def test_a_matrix_of_the_wrong_shape_is_refused(self):
        with pytest.raises(ValueError, match=r"2-d \(n, d\)"):
            P.project(np.zeros((3, 4, 5)), "pca")


class TestLayoutsOfARun:
    def test_a_layout_is_computed_once_and_then_read_from_the_run(self, tmp_path, monkeypatch):
        run, _ = rotating_run(tmp_path / "r", steps=2)
        calls = []
        real = P.project
        monkeypatch.setattr(P, "project", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
        first = P.compute_layout(run, 10, method="pca")
        assert len(calls) == 2  # step 0 (the anchor) then step 10
        assert not first.cached
        again = P.compute_layout(run, 10, method="pca")
        assert len(calls) == 2 and again.cached
        np.testing.assert_array_equal(first.coords, again.coords)
        # another reader of the same directory, after the run closed: still no work
        run.close()
        view = nbviz.open_run(tmp_path / "r")
        hit = P.cached_layout(view, 10, method="pca")
        assert hit is not None and hit.cached
        np.testing.assert_array_equal(hit.coords, first.coords)
        P.compute_layout(view, 0, method="pca")
        assert len(calls) == 2

    def test_other_parameters_are_another_cache_entry(self, tmp_path):
        run, _ = rotating_run(tmp_path / "r", steps=1)
        P.compute_layout(run, 0, method="tsne", params={"n_iter": 100})
        assert P.cached_layout(run, 0, method="tsne", params={"n_iter": 100}) is not None
        assert P.cached_layout(run, 0, method="tsne", params={"n_iter": 120}) is None
        assert P.cached_layout(run, 0, method="tsne", params={"n_iter": 100, "seed": 1}) is None

    @pytest.mark.parametrize("method", ["pca", "tsne"])
    def test_alignment_keeps_the_layout_in_place_across_steps(self, tmp_path, method):
        run, _ = rotating_run(tmp_path / "r", steps=4)
        params = {"n_iter": 200} if method == "tsne" else None
        aligned = [P.compute_layout(run, s, method=method, params=params) for s in (0, 10, 20, 30)]
        loose = [
            P.compute_layout(run, s, method=method, params=params, align=False)
            for s in (0, 10, 20, 30)
        ]
        moved, jumped = mean_step_displacement(aligned), mean_step_displacement(loose)
        scale = spread(aligned[0].coords)
        # the same cloud each step: aligned layouts barely move, unaligned ones jump
        assert moved < 0.5 * jumped, (moved, jumped)
        assert moved < 0.2 * scale, (moved, scale)

    def test_new_ids_at_a_later_step_are_placed_and_aligned(self, tmp_path):
        X, _ = blobs(200)
        run = nbviz.Run(tmp_path / "r")
        run.log_embeddings(0, X[:150], ids=np.arange(150))
        run.log_embeddings(5, X[50:], ids=np.arange(50, 200))
        run.flush()
        lay = P.compute_layout(run, 5, method="tsne", params={"n_iter": 100})
        assert lay.n == 150 and np.isfinite(lay.coords).all()
        np.testing.assert_array_equal(lay.ids, np.arange(50, 200))

    def test_a_step_without_embeddings_is_refused_with_the_recorded_steps(self, tmp_path):
        run, _ = rotating_run(tmp_path / "r", steps=2)
        with pytest.raises(ValueError, match=r"at step 5; recorded steps: 0, 10"):
            P.compute_layout(run, 5)

    def test_a_run_without_embeddings_says_so(self, tmp_path):
        run = nbviz.Run(tmp_path / "r")
        with pytest.raises(ValueError, match="no embeddings recorded for split 'val'"):
            P.compute_layout(run, 0)
