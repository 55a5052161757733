"""UMAP's numba code cached across kernels: where, whose choice wins, and that it is written."""

from __future__ import annotations

import os
import sys
import threading
import types
from pathlib import Path

import pytest

from nbviz.analysis.embedding import jit_cache


def test_the_cache_goes_under_the_user_cache_folder(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    config = sys.modules.get("numba.core.config")
    if config is not None:  # numba read its settings already: prepare() tells it too
        monkeypatch.setattr(config, "CACHE_DIR", "")
    path = jit_cache.prepare()
    assert path.parts[-2:] == ("nbviz", "numba")
    assert str(path).startswith(str(tmp_path))  # platformdirs follows XDG_CACHE_HOME
    assert os.environ["NUMBA_CACHE_DIR"] == str(path)
    if config is not None:
        assert config.CACHE_DIR == str(path)


def test_a_users_own_numba_cache_dir_is_kept(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    assert jit_cache.prepare() == tmp_path / "mine"
    assert jit_cache.cache_dir() == tmp_path / "mine"


def test_uncached_umap_functions_get_a_disk_cache(monkeypatch, tmp_path: Path) -> None:
    numba = pytest.importorskip("numba")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(numba.core.config, "CACHE_DIR", str(tmp_path))
    module = types.ModuleType("umap._nbviz_test")

    def add_one(x):
        return x + 1

    module.add_one = numba.njit(add_one)
    monkeypatch.setitem(sys.modules, "umap._nbviz_test", module)
    assert jit_cache.cache_compiled() >= 1
    assert module.add_one(1) == 2
    assert list(tmp_path.rglob("*add_one*.nbi")), "the compiled code was not written"
    assert jit_cache.cache_compiled() == 0  # already cached: nothing more to do
    assert "compiling" in jit_cache.first_fit_note(tmp_path / "empty")


def test_exact_neighbours_are_each_rows_nearest_itself_first() -> None:
    import numpy as np

    from nbviz.analysis.embedding.neighbours import exact_neighbours

    X = np.random.default_rng(0).normal(size=(50, 4)).astype(np.float32)
    idx, dist = exact_neighbours(X, 5, "euclidean")
    full = np.linalg.norm(X[:, None] - X[None], axis=2)
    assert idx.shape == (50, 5) and idx.dtype == np.int32
    assert (idx[:, 0] == np.arange(50)).all() and np.allclose(dist[:, 0], 0)
    assert (np.sort(idx, axis=1) == np.sort(np.argsort(full, axis=1)[:, :5], axis=1)).all()
    with pytest.raises(ValueError, match=r"metric must be one of .* got 'hamming'"):
        exact_neighbours(X, 5, "hamming")


def test_overlapping_blocks_in_two_threads_leave_numba_as_it_was() -> None:
    numba = pytest.importorskip("numba")
    own = numba.njit, numba.jit
    first_in, second_in, first_out = (threading.Event() for _ in range(3))

    def first() -> None:
        with jit_cache.caching_numba():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with jit_cache.caching_numba():
            second_in.set()
            first_out.wait(10)  # the first block ends while this one is open

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert (numba.njit, numba.jit) == own
