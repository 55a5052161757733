"""Runs that are broken or were tampered with: each read refuses with words naming the file
and the value, or the view says what is wrong; nothing reaches a view as a value it cannot
show, and nothing raises from a thread."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import nbviz
from nbviz.store import DB_NAME, RunClosedError, RunFileError, SchemaError


def small_run(path: Path) -> Path:
    """A closed run with 6 array samples, their predictions at step 3 and two losses."""
    with nbviz.Run(path, overwrite=True) as run:
        rng = np.random.default_rng(0)
        run.log_samples(rng.normal(size=(6, 8)).astype(np.float32), np.arange(6) % 3)
        run.log_predictions(3, rng.normal(size=(6, 3)).astype(np.float32), np.arange(6) % 3)
        run.log(0, train_loss=1.0)
        run.log(3, train_loss=0.5)
    return path


def tampered(path: Path, *sql: str) -> Path:
    """``path``'s run with ``sql`` run on its file, as a stranger's tool would."""
    conn = sqlite3.connect(path / DB_NAME)
    for statement in sql:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path


def test_a_stored_negative_step_is_refused_naming_the_file_and_the_step(tmp_path: Path) -> None:
    run_dir = tampered(
        small_run(tmp_path / "run"),
        "INSERT INTO predictions SELECT split, -3, id, label, pred, loss, confidence "
        "FROM predictions WHERE step = 3",
    )
    with nbviz.open_run(run_dir) as run:
        with pytest.raises(RunFileError, match=r"run\.sqlite: .*step or id is -3, outside 0\.\."):
            run.prediction_steps()
        # the view says the same thing, not "step must be an integer in 0..", an argument
        with pytest.raises(RunFileError, match=r"-3, outside"):
            nbviz.ConfusionMatrix(run)


def test_a_stored_step_past_2_to_the_53_is_refused(tmp_path: Path) -> None:
    run_dir = tampered(
        small_run(tmp_path / "run"),
        f"UPDATE predictions SET step = {2**62} WHERE step = 3",
    )
    with nbviz.open_run(run_dir) as run:
        with pytest.raises(RunFileError, match=rf"step or id is {2**62}, outside"):
            run.prediction_steps()


def test_a_fractional_stored_integer_is_called_not_a_whole_number(tmp_path: Path) -> None:
    run_dir = tampered(small_run(tmp_path / "run"), "UPDATE predictions SET label = 1.5")
    with nbviz.open_run(run_dir) as run:
        with pytest.raises(RunFileError, match=r"a stored integer is 1\.5, not a whole number"):
            run.predictions(3)


def test_a_sample_whose_payload_does_not_decode_says_so_on_its_card(tmp_path: Path) -> None:
    run_dir = tampered(
        small_run(tmp_path / "run"),
        "UPDATE samples SET payload = X'89504E470D0A1A0A0000' WHERE id < 2",
    )
    with nbviz.open_run(run_dir) as run:
        gallery = nbviz.SampleGallery(run)
        cards = {item["id"]: item for item in gallery.items}
        assert cards[0]["kind"] == "damaged"
        assert cards[0]["text"] == (
            "stored sample does not decode: from_blob: 10 bytes do not hold an array of "
            "shape [8] and dtype <f4 (32 bytes)"
        )
        assert cards[2]["kind"] == "array"  # the others are shown as they are
        gallery.close()


def test_a_run_copied_without_its_log_while_written_says_to_copy_the_log(
    tmp_path: Path,
) -> None:
    run = nbviz.Run(tmp_path / "run")
    run.log(0, train_loss=1.0)
    run.flush()  # committed into run.sqlite-wal; nothing checkpointed into run.sqlite yet
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(tmp_path / "run" / DB_NAME, copy / DB_NAME)
    run.close()
    with pytest.raises(SchemaError, match=r"holds no tables at all; .*copy the whole run"):
        nbviz.open_run(copy)


def test_reading_a_closed_run_says_how_to_read_it_again(tmp_path: Path) -> None:
    with nbviz.Run(tmp_path / "run") as run:
        run.log(0, train_loss=1.0)
    again = rf"is closed \(run\.close\(\), .*nbviz\.open_run\('{tmp_path / 'run'}'\)"
    with pytest.raises(RunClosedError, match=again):
        run.scalars()
    with pytest.raises(RunClosedError, match=again):
        nbviz.LossCurves(run)


def test_a_view_moved_after_its_run_closed_says_so_in_its_error(tmp_path: Path) -> None:
    run = nbviz.open_run(small_run(tmp_path / "run"))
    view = nbviz.ConfusionMatrix(run)
    run.close()
    view.step = 0  # what the scrubber sends: answered with words, nothing raised
    assert view.error.startswith(f"ConfusionMatrix: the run at {tmp_path / 'run'} is closed")
    view.close()


def test_a_dashboard_with_one_damaged_table_shows_the_other_views_and_says_why(
    tmp_path: Path,
) -> None:
    run_dir = tampered(small_run(tmp_path / "run"), "UPDATE predictions SET label = 'x'")
    with nbviz.open_run(run_dir) as run:
        dash = nbviz.Dashboard(run)
        assert "loss_curves" in dash.views and "confusion" not in dash.views
        assert (
            f"Not shown: ConfusionMatrix: {run_dir / DB_NAME}: predictions: a stored value "
            "does not decode: a stored integer is 'x', not a number"
        ) in dash.pending
        dash.close()


def test_a_meta_value_of_the_wrong_kind_or_not_json_is_named_in_plain_words(
    tmp_path: Path,
) -> None:
    run_dir = tampered(
        small_run(tmp_path / "run"),
        "INSERT OR REPLACE INTO meta(key, value) VALUES ('class_names', '5')",
        "INSERT OR REPLACE INTO meta(key, value) VALUES ('config', '{not json')",
    )
    with nbviz.open_run(run_dir) as run:
        with pytest.raises(RunFileError, match=r"meta value 'class_names' is 5 \(an int\) where"):
            _ = run.class_names
        with pytest.raises(
            RunFileError, match=r"meta value 'config' is unreadable: '\{not json' is not JSON text"
        ):
            _ = run.config
