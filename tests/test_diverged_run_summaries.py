"""A run that diverged, summed up: in the RunsTable the final value of a series that ended
NaN/Inf is said as such (with the step and the count), not only its last finite value; in
``nbviz info`` each series counts its NaN/Inf and says from which step."""

from __future__ import annotations

import math
from pathlib import Path

import nbviz


def diverged(path: Path, steps: int = 20) -> Path:
    """A closed run whose loss is finite to step 7, +Inf at 8..11 and NaN from 12 on."""
    with nbviz.Run(path, overwrite=True, config={"lr": 0.1}) as run:
        for s in range(steps):
            v = 1.0 / (s + 1) if s < 8 else math.inf if s < 12 else math.nan
            run.log(s, train_loss=v, val_acc=0.5)
    return path


def test_a_series_that_ended_nan_says_where_beside_its_last_finite_value(tmp_path: Path) -> None:
    short, long = diverged(tmp_path / "short"), diverged(tmp_path / "long", steps=5000)
    runs = [nbviz.open_run(short), nbviz.open_run(long)]
    table = nbviz.RunsTable(runs)
    short_row, long_row = table.rows
    assert short_row["ends"] == {"final:train_loss": {"value": "NaN", "step": 19}}
    assert short_row["nonfinite"]["final:train_loss"] == 12
    assert short_row["cells"]["final:train_loss"] == 1.0 / 8  # the last finite, kept for sorting
    assert short_row["steps"]["final:train_loss"] == 7
    # a long run read from its summaries says the same
    assert long_row["ends"] == {"final:train_loss": {"value": "NaN", "step": 4999}}
    assert "final:val_acc" not in short_row["ends"]  # a series that ends finite
    table.close()
    for run in runs:
        run.close()


def test_a_series_that_ended_inf_names_its_sign(tmp_path: Path) -> None:
    with nbviz.Run(tmp_path / "run") as run:
        run.log(0, train_loss=1.0)
        run.log(1, train_loss=-math.inf)
    with nbviz.open_run(tmp_path / "run") as run:
        table = nbviz.RunsTable([run])
        assert table.rows[0]["ends"] == {"final:train_loss": {"value": "-Inf", "step": 1}}
        table.close()


def test_the_text_summary_counts_a_series_nan_and_inf_from_the_step_they_began(
    tmp_path: Path,
) -> None:
    from nbviz.summary_text import run_summary

    with nbviz.open_run(diverged(tmp_path / "run")) as run:
        text = run_summary(run, findings=False)
    line = next(t for t in text.splitlines() if t.lstrip().startswith("train_loss"))
    # min and max over the finite values (never "max inf"), then the count and where from
    assert (
        line.split()
        == (
            "train_loss 20 steps last nan min 0.125 max 1 (steps 0..19), 12 NaN/Inf from step 8"
        ).split()
    )
