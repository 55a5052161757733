"""When a probe captures what: statistics every ``every`` steps, histograms every
``hist_every`` (by default the first multiple of ``every`` from 10 up), their edges fixed."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from training import mlp, random_batches, sgd_step

import nbviz


def train(model, n_steps, run, **watch):
    """``n_steps`` SGD steps of ``model`` watched with ``watch``, each logged."""
    probe = run.watch(model, **watch)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step, (x, y) in enumerate(random_batches(n_steps)):
        run.log(step, train_loss=sgd_step(model, opt, x, y))
    probe.close()


@pytest.mark.parametrize(
    ("every", "hist_every", "histogram_steps"),
    [
        (1, None, [0, 10, 20]),
        (3, None, [0, 12, 24]),
        (1, 1, list(range(25))),
        (5, 5, [0, 5, 10, 15, 20]),
    ],
)
def test_histograms_below_every_10_default_to_the_first_multiple_of_every_from_10(
    tmp_path, every, hist_every, histogram_steps
):
    torch.manual_seed(0)
    model = mlp()
    options = {} if hist_every is None else {"hist_every": hist_every}
    with nbviz.Run(tmp_path / "run") as run:
        train(model, 25, run, every=every, **options)
        run.flush()
        stats_steps = list(run.steps("activation"))
        rows = run.histogram_rows("0", "activation")
        recorded = run.meta("probe")["hist_every"]
    assert stats_steps == list(range(0, 25, every))  # statistics at every capture
    assert list(rows.steps) == histogram_steps
    assert recorded == histogram_steps[1] - histogram_steps[0]


def test_histogram_edges_stay_fixed_and_keep_out_of_range_counts(tmp_path):
    torch.manual_seed(0)
    model = mlp()
    with nbviz.Run(tmp_path / "run") as run:
        train(model, 30, run, every=5, hist_every=5)
        run.flush()
        rows = run.histogram_rows("0", "activation")
    assert len(rows.steps) == 6
    assert np.all(rows.lo == rows.lo[0]) and np.all(rows.hi == rows.hi[0])
    totals = rows.counts.sum(axis=1) + rows.underflow + rows.overflow
    assert np.all(totals == 8 * 32)
