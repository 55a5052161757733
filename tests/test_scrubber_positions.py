"""The scrubber's positions on the wire: arithmetic runs, bounded however long the run.

A run logged every step is one run (a few hundred bytes at 100k steps);
irregular steps are sent exactly while they fit in ``MAX_RUNS`` runs, else every
k-th of them; the kernel's own steps and moves stay exact either way.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import nbviz
from nbviz.store import Writer
from nbviz.widgets.step_runs import MAX_RUNS, expand_runs, runs_payload, step_runs
from nbviz.widgets.wire import array_from_payload


def _scalar_run(path: Path, steps: np.ndarray) -> Path:
    with Writer(path, commit_interval=0.5) as w:
        for lo in range(0, len(steps), 20_000):
            part = steps[lo : lo + 20_000]
            w.insert("scalars", [("train_loss", int(s), 1.0 / (1 + int(s)), 0.0) for s in part])
    return path


def _wire_bytes(value: dict) -> int:
    """JSON text plus binary buffers, as ipywidgets sends a trait."""
    from ipywidgets.widgets.widget import _remove_buffers

    state, _paths, buffers = _remove_buffers({"positions": value})
    return len(json.dumps(state).encode()) + sum(memoryview(b).nbytes for b in buffers)


def _positions(scrubber: nbviz.StepScrubber) -> np.ndarray:
    return expand_runs(array_from_payload(scrubber.positions["runs"]).reshape(-1, 3))


@pytest.mark.parametrize(
    "steps",
    [
        [],
        [7],
        [3, 9],
        [0, 1, 2, 3, 10, 20, 30, 31],
        [0, 2, 4, 5, 6, 100, 1000, 1001, 1002, 2**33],
        list(range(0, 1000, 10)) + list(range(1000, 1100)),
    ],
)
def test_runs_give_the_steps_back(steps: list[int]) -> None:
    runs = step_runs(np.array(steps, dtype=np.int64))
    assert expand_runs(runs).tolist() == steps
    assert len(runs) <= max(1, len(steps))


def test_random_steps_round_trip_in_few_runs() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        steps = np.unique(rng.integers(0, 400, rng.integers(1, 80)))
        runs = step_runs(steps)
        np.testing.assert_array_equal(expand_runs(runs), steps)
        assert len(runs) <= len(steps) // 2 + 1  # a run holds two steps but perhaps the last


def test_a_scrubber_over_100k_regular_steps_sends_a_few_hundred_bytes(tmp_path: Path) -> None:
    run = nbviz.open_run(_scalar_run(tmp_path / "run", np.arange(100_000)))
    scrubber = nbviz.StepScrubber(run, live=False)
    try:
        assert _wire_bytes(scrubber.positions) < 300, scrubber.positions
        assert (scrubber.positions["total"], scrubber.positions["every"]) == (100_000, 1)
        np.testing.assert_array_equal(_positions(scrubber), np.arange(100_000))
        # the kernel's steps and moves are as they were
        assert scrubber.step == 99_999 and len(scrubber.steps) == 100_000
        assert scrubber.next(-3) == 99_996 and scrubber.next(1) == 99_997
        scrubber.step = 500
        assert scrubber.next(10) == 510
        assert scrubber.stride == 250  # 400 ticks of play over the run
    finally:
        scrubber.close()
        run.close()


def test_irregular_steps_are_sent_exactly_while_they_fit(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    steps = np.unique(rng.integers(0, 50_000, 600))
    run = nbviz.open_run(_scalar_run(tmp_path / "run", steps))
    scrubber = nbviz.StepScrubber(run, live=False)
    try:
        assert scrubber.positions["every"] == 1
        np.testing.assert_array_equal(_positions(scrubber), steps)
        scrubber.step = int(steps[10]) + 1  # between two positions
        assert scrubber.next(1) == steps[11] and scrubber.next(-1) == steps[10]
    finally:
        scrubber.close()
        run.close()


def test_many_irregular_steps_send_every_kth_within_a_bound(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    steps = np.unique(rng.integers(0, 5_000_000, 60_000))
    run = nbviz.open_run(_scalar_run(tmp_path / "run", steps))
    scrubber = nbviz.StepScrubber(run, live=False)
    try:
        payload = scrubber.positions
        shown = _positions(scrubber)
        every = payload["every"]
        assert payload["total"] == len(steps) and every > 1
        assert _wire_bytes(payload) <= MAX_RUNS * 3 * 8 + 200
        np.testing.assert_array_equal(shown[:-1], steps[::every][: len(shown) - 1])
        assert shown[-1] == steps[-1]
        # the kernel still has every step
        assert len(scrubber.steps) == len(steps)
        scrubber.step = int(steps[100])
        assert scrubber.next(1) == steps[101]
    finally:
        scrubber.close()
        run.close()


def test_the_payload_bound_holds_for_any_step_pattern() -> None:
    rng = np.random.default_rng(11)
    for n in (10, 5_000, 200_000):
        steps = np.unique(rng.integers(0, 10 * n, n))
        payload = runs_payload(steps, max_runs=64)
        runs = array_from_payload(payload["runs"]).reshape(-1, 3)
        assert len(runs) <= 64
        kept = expand_runs(runs)
        assert kept[-1] == steps[-1] and np.isin(kept, steps).all()


@pytest.mark.parametrize("max_runs", [2, 3])
def test_the_fewest_runs_allowed_still_keep_the_first_and_last_step(max_runs: int) -> None:
    steps = np.unique(np.random.default_rng(2).integers(0, 10_000, 500))
    runs = array_from_payload(runs_payload(steps, max_runs=max_runs)["runs"]).reshape(-1, 3)
    kept = expand_runs(runs)
    assert len(runs) <= max_runs and kept[0] == steps[0] and kept[-1] == steps[-1]


@pytest.mark.parametrize(
    ("max_runs", "error"),
    [(1, ValueError), (0, ValueError), (-4, ValueError), (2.5, TypeError), (True, TypeError)],
)
def test_fewer_than_two_runs_are_refused_naming_the_value(max_runs: object, error: type) -> None:
    steps = np.unique(np.random.default_rng(2).integers(0, 10_000, 500))
    with pytest.raises(error, match=rf"max_runs must be an integer >= 2, got {max_runs!r}"):
        runs_payload(steps, max_runs=max_runs)  # type: ignore[arg-type]


def test_the_union_of_recorded_steps_around_a_run_logged_every_step() -> None:
    from nbviz.widgets.run_index import _union

    rng = np.random.default_rng(13)
    for _ in range(100):
        first = int(rng.integers(0, 50))
        base = np.arange(first, first + int(rng.integers(1, 200)), dtype=np.int64)
        others = [np.unique(rng.integers(0, 300, rng.integers(0, 40))) for _ in range(3)]
        parts = [base, *others] if rng.random() < 0.5 else [*others, base]
        want = np.unique(np.concatenate(parts))
        np.testing.assert_array_equal(_union(parts), want)
    # a longest part with gaps: the sort of every part
    parts = [np.array([0, 2, 4, 6]), np.array([1, 2]), np.array([9])]
    np.testing.assert_array_equal(_union(parts), [0, 1, 2, 4, 6, 9])


@pytest.mark.parametrize("steps", [np.arange(5, 1_000_005), np.arange(0, 10_000_000, 10)])
def test_a_run_logged_every_k_steps_is_one_run(steps: np.ndarray) -> None:
    payload = runs_payload(steps)
    runs = array_from_payload(payload["runs"]).reshape(-1, 3)
    assert runs.tolist() == [[int(steps[0]), len(steps), int(steps[1] - steps[0])]]
    assert (payload["total"], payload["every"]) == (len(steps), 1)
