"""A view on its own, watching a training loop in the same kernel, moves on to the newest
step as the run grows, unless a person moved it back; in a Dashboard the scrubber follows
the run and the views follow the scrubber (a view of sparser captures never pulls it back)."""

from __future__ import annotations

import time
from pathlib import Path

import torch
from training import named_mlp, random_batches, sgd_step

import nbviz


def wait_until(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def train(run: nbviz.Run, model: torch.nn.Module, start: int, stop: int) -> None:
    """Steps ``start..stop-1`` of plain SGD, each loss logged; then flush."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, (x, y) in zip(range(start, stop), random_batches(stop - start, seed=start)):
        run.log(step, train_loss=sgd_step(model, opt, x, y))
    run.flush()


def test_views_on_their_own_move_on_to_the_newest_capture(tmp_path: Path) -> None:
    run = nbviz.Run(tmp_path / "live")
    model = named_mlp(12, 16, 5)
    run.watch(model, every=5)
    train(run, model, 0, 10)
    browser = nbviz.LayerBrowser(run)
    histograms = nbviz.Histograms(run, signal="activations")
    assert browser.step == 5
    train(run, model, 10, 30)
    newest = int(run.steps("activation")[-1])
    assert newest == 25
    wait_until(lambda: browser.step == newest)
    wait_until(lambda: histograms.step == int(run.recorded_steps("histograms:activation")[-1]))
    assert browser.current  # the table shows the values at the new step
    browser.close()
    histograms.close()
    run.close()


def test_a_view_moved_back_stays_where_the_person_put_it(tmp_path: Path) -> None:
    run = nbviz.Run(tmp_path / "live")
    model = named_mlp(12, 16, 5)
    run.watch(model, every=5)
    train(run, model, 0, 20)
    browser = nbviz.LayerBrowser(run)
    browser.step = 5
    train(run, model, 20, 40)
    wait_until(lambda: browser._newest == [35])  # the view saw the run grow
    assert browser.step == 5
    browser.close()
    run.close()


def test_in_a_dashboard_the_views_leave_following_to_the_scrubber(tmp_path: Path) -> None:
    run = nbviz.Run(tmp_path / "live")
    model = named_mlp(12, 16, 5)
    run.watch(model, every=5)
    train(run, model, 0, 12)
    dash = nbviz.Dashboard(run)
    assert not dash.layers.follow_newest and not dash.histograms.follow_newest
    train(run, model, 12, 23)
    wait_until(lambda: dash.scrubber.step == 22)
    # the layer browser's newest capture is 20: it does not pull the scrubber back to it
    wait_until(lambda: dash.layers._newest == [20])
    assert dash.layers.step == 11  # its own step is the scrubber's, moved in the browser
    dash.close()
    run.close()
