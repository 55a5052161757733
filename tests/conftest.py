"""Shared fixtures: real runs recorded by real torch models into real SQLite files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def demo_run_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The digits demo, shortened: 3 epochs with a probe and an evaluation each."""
    from nbviz.demo import record_demo

    return record_demo(tmp_path_factory.mktemp("demo") / "run", epochs=3, every=5)


@pytest.fixture()
def demo_run(demo_run_path: Path):
    """A read-only view of the demo run (fresh per test)."""
    import nbviz

    run = nbviz.open_run(demo_run_path)
    yield run
    run.close()


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op thread for a module of tiny models: the machine's cores are shared.

    Use with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def nan_run_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run that hit NaN at step 7 (see ``training.nan_run``); read it with ``open_run``."""
    from training import nan_run

    return nan_run(tmp_path_factory.mktemp("nan") / "run")


@pytest.fixture(scope="session")
def count_vm_steps() -> Callable[[Any, Callable[[], Any]], tuple[int, Any]]:
    """``count_vm_steps(reader, action) -> (vm_steps, result)``: the SQLite virtual-machine
    steps ``action()`` runs on the connection of ``reader`` (a run or a ``Reader``) in this
    thread, and what it returned.

    A read's cost counted, not timed: the same on a busy machine. The connection's own
    progress handler (its read budget) is put back afterwards.
    """
    from nbviz.store.connection import _PROGRESS_OPS

    def count(reader: Any, action: Callable[[], Any]) -> tuple[int, Any]:
        conn = reader._conn()
        ticks = [0]

        def tick() -> int:
            ticks[0] += 1
            return 0

        conn.set_progress_handler(tick, 10)
        try:
            result = action()
        finally:
            conn.set_progress_handler(conn._over_budget, _PROGRESS_OPS)
        return ticks[0] * 10, result

    return count


@pytest.fixture(scope="session")
def vm_steps(count_vm_steps) -> Callable[[Any, Callable[[], Any]], int]:
    """``vm_steps(reader, action)``: only the steps of ``count_vm_steps``."""
    return lambda reader, action: count_vm_steps(reader, action)[0]


@pytest.fixture(params=["cpu_checks", "branch_free"])
def read_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test both ways a probe reads a tensor: CPU reads of 0-d results, and the
    accelerators' branch-free path (``tensor_stats.cheap_to_read`` false)."""
    if request.param == "branch_free":
        from nbviz.probes import tensor_stats

        monkeypatch.setattr(tensor_stats, "cheap_to_read", lambda t: False)
    return request.param
