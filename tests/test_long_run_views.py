"""The views read a bounded amount of a long run: building them, a layer click, a scrubber
move and a zoom cost about as much on a run 16 times longer.

Counted in SQLite virtual-machine steps on the run's connection (not timed), on
two runs written the same way (see ``test_store_summaries``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_store_summaries import LONG, SHORT, _write

import nbviz
from nbviz.widgets.layer_detail import DEAD_WINDOW


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("views")
    return {n: _write(root / f"run-{n}", n) for n in (SHORT, LONG)}


@pytest.fixture()
def opened(runs: dict[int, Path]) -> Iterator[dict[int, Any]]:
    out = {n: nbviz.open_run(p) for n, p in runs.items()}
    yield out
    for run in out.values():
        run.close()


@pytest.fixture()
def both(
    opened: dict[int, Any], vm_steps: Callable[..., int]
) -> Callable[[Callable[[Any, int], Any]], dict[int, int]]:
    """``both(action)``: the VM steps ``action(run, n)`` costs on each run, by run length."""

    def count(action: Callable[[Any, int], Any]) -> dict[int, int]:
        return {n: vm_steps(run, lambda run=run, n=n: action(run, n)) for n, run in opened.items()}

    return count


def test_loss_curves_build_and_zoom_read_summaries(both: Callable[..., dict[int, int]]) -> None:
    views: dict[int, Any] = {}
    build = both(
        lambda run, n: views.__setitem__(n, nbviz.LossCurves(run, max_points=64, live=False)),
    )
    assert build[LONG] <= 2 * build[SHORT], build
    zoom = both(lambda run, n: views[n].window(n // 2, n // 2 + n // 50))
    assert zoom[LONG] <= 2 * zoom[SHORT] + 500, zoom
    for view in views.values():
        assert all(len(s["steps"]["data"]) // 8 <= 64 for s in view.series)
        view.close()


def test_a_scrubber_move_and_a_layer_click_read_the_same_on_a_longer_run(
    opened: dict[int, Any], both: Callable[..., dict[int, int]], vm_steps: Callable[..., int]
) -> None:
    scrubbers = {n: nbviz.StepScrubber(run, live=False) for n, run in opened.items()}
    browsers = {n: nbviz.LayerBrowser(run, live=False) for n, run in opened.items()}
    click = both(lambda run, n: setattr(browsers[n], "selected_layer", "enc.1"))
    assert click[LONG] <= 2 * click[SHORT], click
    move = both(
        lambda run, n: [setattr(v, "step", n // 3) for v in (scrubbers[n], browsers[n])],
    )
    # beyond DEAD_WINDOW captures the dead-unit map reads the window around the new step:
    # a fixed number of rows (what the short run, read whole once, does not need again)
    window = DEAD_WINDOW + DEAD_WINDOW // 10
    dead = vm_steps(
        opened[LONG], lambda: opened[LONG].unit_stats("enc.1", "zero_frac", step_range=(0, window))
    )
    assert move[LONG] <= 1.5 * move[SHORT] + dead + 500, (move, dead)
    for view in [*scrubbers.values(), *browsers.values()]:
        view.close()


def test_a_dashboard_builds_from_about_as_much_of_a_run_sixteen_times_longer(
    opened: dict[int, Any], both: Callable[..., dict[int, int]]
) -> None:
    built: dict[int, Any] = {}
    build = both(lambda run, n: built.__setitem__(n, nbviz.Dashboard(run, live=False)))
    # the diagnosis (the HealthReport's findings) included, its losses read as outlines;
    # what grows is LossCurves' summaries up to their point budget (every row of the short
    # run, 2000 buckets at most of a long one): a whole read of the losses would be 16x
    assert build[LONG] <= 2.5 * build[SHORT], build
    for dash in built.values():
        dash.close()
