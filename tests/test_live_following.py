"""Views follow their run as a notebook is used: made before the first step, cells run
again, a run recorded afresh at the same path (``overwrite=True``)."""

from __future__ import annotations

import time
from pathlib import Path

from training import fit, named_mlp, random_batches

import nbviz
from nbviz.widgets.live import file_identity, following


def wait_until(predicate, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def record(run: nbviz.Run, steps: int, seed: int = 0) -> None:
    """The cell that trains: a model watched every 5 steps, its loss logged every step."""
    model = named_mlp(12, 16, 5)
    run.watch(model, every=5)
    fit(run, model, random_batches(steps, seed=seed))


def test_a_scrubber_made_before_the_first_step_moves_on_with_the_run(tmp_path: Path) -> None:
    run = nbviz.Run(tmp_path / "live")
    scrubber = nbviz.StepScrubber(run)
    assert scrubber.step == 0 and len(scrubber.steps) == 0
    for step in range(5):
        run.log(step, train_loss=1.0 / (step + 1))
    run.flush()
    wait_until(lambda: scrubber.step == 4)
    scrubber.close()
    run.close()


def test_a_dashboard_made_before_the_first_capture_gains_its_views(tmp_path: Path) -> None:
    run = nbviz.Run(tmp_path / "live", overwrite=True)
    dash = nbviz.Dashboard(run)
    assert dash.views == {} and dash.layers is None
    assert "Not shown: LayerBrowser: no captures in this run yet" in dash.pending
    record(run, 12)
    wait_until(lambda: {"loss_curves", "health", "layers", "histograms"} <= set(dash.views))
    assert [s["key"] for s in dash.sections] == ["overview", "layers"]
    wait_until(lambda: dash.scrubber.step == 11)
    assert "captures" not in dash.pending
    assert "predictions" in dash.pending
    # the new views are linked to the scrubber like the first ones
    assert {link.target[0] for link in dash.links} >= {dash.layers, dash.histograms}
    dash.close()
    run.close()


def test_rerunning_the_cells_in_one_kernel_the_new_dashboard_follows(tmp_path: Path) -> None:
    path = tmp_path / "live"
    run = nbviz.Run(path, overwrite=True)
    first = nbviz.Dashboard(run)
    record(run, 8)
    wait_until(lambda: first.scrubber.step == 7)
    old_file = file_identity(path)
    # the same three cells again: a fresh run at the same path, a probe, a dashboard
    run = nbviz.Run(path, overwrite=True)
    assert file_identity(path) != old_file
    second = nbviz.Dashboard(run)
    record(run, 40, seed=1)
    wait_until(lambda: second.scrubber.step == 39)
    wait_until(lambda: second.layers is not None)
    # the dashboard of the replaced run says so and shows the new run
    wait_until(lambda: first.scrubber is not None and first.scrubber.step == 39)
    assert "recorded afresh" in first.banner
    assert str(path) in first.banner
    assert first.run.run_dir == second.run.run_dir
    first.close()
    second.close()
    run.close()


def test_a_view_of_a_replaced_run_says_it_was_replaced(tmp_path: Path) -> None:
    path = tmp_path / "live"
    run = nbviz.Run(path, overwrite=True)
    run.log(0, train_loss=1.0)
    run.flush()
    curves = nbviz.LossCurves(run)
    assert following(curves)
    nbviz.Run(path, overwrite=True).log(0, train_loss=2.0)
    wait_until(lambda: curves.error != "")
    assert "was replaced" in curves.error and str(path) in curves.error
    assert not following(curves)
    curves.close()
    run.close()


def test_a_closed_dashboard_stops_following(tmp_path: Path) -> None:
    run = nbviz.Run(tmp_path / "live")
    dash = nbviz.Dashboard(run)
    dash.close()
    assert not following(dash)
    run.log(0, train_loss=1.0)
    run.flush()
    time.sleep(1.0)
    assert dash.views == {}
    run.close()
