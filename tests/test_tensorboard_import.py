"""nbviz.from_tensorboard: TensorBoard logs written by torch's SummaryWriter, read back as runs."""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorboard")

import nbviz  # noqa: E402
from nbviz.cli import main as cli  # noqa: E402
from nbviz.importers.event_files import EventFileError  # noqa: E402
from nbviz.importers.tensorboard import layer_and_signal  # noqa: E402

torch = pytest.importorskip("torch")
from torch.utils.tensorboard import SummaryWriter  # noqa: E402

STEPS = (0, 10, 20)


def _values(step: int) -> np.ndarray:
    return np.random.default_rng(step).normal(0.1 * step, 1.0, 500).astype(np.float32)


def _image(step: int) -> np.ndarray:
    img = np.zeros((3, 12, 16), dtype=np.uint8)
    img[0, :, : step % 16 + 1] = 255  # a red band whose width is the step
    img[2, step % 12] = 200
    return img


def _write_log(logdir: Path, loss_scale: float = 1.0) -> None:
    with SummaryWriter(str(logdir)) as w:
        for step in STEPS:
            w.add_scalar("loss/train", loss_scale / (step + 1), step)
            w.add_scalar("loss/val", loss_scale * 1.5 / (step + 1), step)
            w.add_histogram("fc1.weight", _values(step), step, bins=24)
            w.add_histogram("grads/fc1.weight", _values(step + 1) * 1e-3, step)
            w.add_image("inputs", _image(step), step)


@pytest.fixture()
def logdir(tmp_path: Path) -> Path:
    _write_log(tmp_path / "tb")
    return tmp_path / "tb"


def test_scalars_read_back_with_their_steps_values_and_wall_times(logdir, tmp_path):
    run = nbviz.from_tensorboard(logdir, tmp_path / "run")
    frame = run.scalars()
    train = frame[frame["name"] == "loss/train"]
    assert train["step"].tolist() == list(STEPS)
    expected = np.float32([1.0 / (s + 1) for s in STEPS])  # TensorBoard stores float32
    np.testing.assert_array_equal(train["value"].to_numpy(np.float32), expected)
    assert train["wall_time"].between(1e9, 1e10).all()
    assert sorted(run.scalar_names()) == ["loss/train", "loss/val"]


def _tensorboard_buckets(logdir: Path, tag: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """TensorBoard's own reading of a histogram tag: step -> (edges, counts)."""
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(logdir), size_guidance={ea.HISTOGRAMS: 0})
    acc.Reload()
    out = {}
    for event in acc.Histograms(tag):
        h = event.histogram_value
        counts = np.asarray(h.bucket)
        nz = np.flatnonzero(counts)
        inner = np.asarray(h.bucket_limit)[nz[0] : nz[-1]]
        out[event.step] = (np.concatenate([[h.min], inner, [h.max]]), counts[nz[0] : nz[-1] + 1])
    return out


def test_uniform_histograms_keep_their_bins_exactly(logdir, tmp_path):
    run = nbviz.from_tensorboard(logdir, tmp_path / "run")
    assert run.histogram_steps("fc1.weight", "weight").tolist() == list(STEPS)
    source = _tensorboard_buckets(logdir, "fc1.weight")
    for step in STEPS:
        counts, edges = np.histogram(_values(step), bins=24)
        got_edges, got_counts = run.histogram("fc1.weight", "weight", step)
        np.testing.assert_array_equal(got_counts, counts)
        np.testing.assert_allclose(got_edges, edges, rtol=0, atol=1e-6)
        # bit for bit what the log holds (float32 edges, which a float64 range would not give)
        np.testing.assert_array_equal(got_edges, source[step][0])
        np.testing.assert_array_equal(got_counts, source[step][1])


def test_unequal_bins_are_kept_exactly(logdir, tmp_path):
    """torch's default bins ("tensorflow") are exponential: run.histogram returns them as logged."""
    run = nbviz.from_tensorboard(logdir, tmp_path / "run")
    source = _tensorboard_buckets(logdir, "grads/fc1.weight")
    assert sorted(source) == list(STEPS)
    for step in STEPS:
        tb_edges, tb_counts = source[step]
        assert not np.allclose(np.diff(tb_edges), np.diff(tb_edges)[0])  # really unequal
        edges, counts = run.histogram("fc1.weight", "gradient", step)
        np.testing.assert_array_equal(edges, tb_edges)
        np.testing.assert_array_equal(counts, tb_counts)
        assert edges.dtype == np.float64 and counts.dtype == np.int64


def test_views_draw_unequal_bins_rebinned_keeping_every_count_in_place(logdir, tmp_path):
    """What the Histograms view draws: uniform bins per step, each source bucket's mass kept.

    Within a source bucket the mass is spread evenly (TensorBoard's own display rule), so
    the drawn cumulative counts equal TensorBoard's, interpolated, up to rounding.
    """
    run = nbviz.from_tensorboard(logdir, tmp_path / "run")
    assert any("grads/fc1.weight" in n for n in run.meta("import_notes"))
    source = _tensorboard_buckets(logdir, "grads/fc1.weight")
    view = nbviz.Histograms(run, signal="gradients")
    assert view.layer == "fc1.weight" and view.empty == "" and view.missing == ""
    rows = run.histogram_rows("fc1.weight", "gradient")
    assert rows.steps.tolist() == list(STEPS)
    for i, step in enumerate(STEPS):
        tb_edges, tb_counts = source[step]
        counts = rows.counts[i]
        edges = np.linspace(rows.lo[i], rows.hi[i], len(counts) + 1)
        assert counts.sum() == tb_counts.sum() == 500
        assert (edges[0], edges[-1]) == (tb_edges[0], tb_edges[-1])
        stored = np.concatenate([[0], np.cumsum(counts)])
        theirs = np.interp(edges, tb_edges, np.concatenate([[0], np.cumsum(tb_counts)]))
        assert np.max(np.abs(stored - theirs)) <= 1.0
        view.step = step  # the view's histogram at the linked step: that uniform row
        assert view.current["step"] == step
        assert (view.current["lo"], view.current["hi"]) == (tb_edges[0], tb_edges[-1])
        drawn = np.frombuffer(view.current["counts"]["data"], dtype="<f8")
        np.testing.assert_array_equal(drawn, counts)
    history = np.frombuffer(view.data["counts"]["data"], dtype="<f4").reshape(len(STEPS), -1)
    np.testing.assert_allclose(history.sum(axis=1), 500, rtol=1e-6)


def test_images_become_samples_of_their_tag_with_the_step_as_id(logdir, tmp_path):
    from PIL import Image

    run = nbviz.from_tensorboard(logdir, tmp_path / "run")
    frame = run.samples(split="inputs")
    assert frame["id"].tolist() == list(STEPS)
    for step, payload in zip(frame["id"], frame["payload"]):
        pixels = np.asarray(Image.open(io.BytesIO(payload)).convert("RGB"))
        np.testing.assert_array_equal(pixels, np.moveaxis(_image(int(step)), 0, -1))


def test_histogram_tags_name_a_layer_and_a_signal():
    assert layer_and_signal("fc1.weight") == ("fc1.weight", "weight")
    assert layer_and_signal("grads/fc1.weight") == ("fc1.weight", "gradient")
    assert layer_and_signal("fc1.weight.grad") == ("fc1.weight", "gradient")
    assert layer_and_signal("activations/conv1") == ("conv1", "activation")
    assert layer_and_signal("weights/fc2.bias") == ("fc2.bias", "weight")


def test_several_runs_under_a_logdir_come_back_as_a_list(tmp_path):
    _write_log(tmp_path / "tb" / "lr_0.1", loss_scale=1.0)
    _write_log(tmp_path / "tb" / "lr_0.01", loss_scale=2.0)
    runs = nbviz.from_tensorboard(tmp_path / "tb", tmp_path / "runs")
    assert [r.name for r in runs] == ["lr_0.01", "lr_0.1"]
    assert [r.path for r in runs] == [tmp_path / "runs" / "lr_0.01", tmp_path / "runs" / "lr_0.1"]
    first = runs[0].scalars("loss/train")["value"].iloc[0]
    assert first == pytest.approx(2.0)
    table = nbviz.RunsTable(runs)  # the views that compare runs take the list
    assert table is not None
    nbviz.LossCurves(runs)


def test_the_views_read_an_imported_run(logdir, tmp_path):
    run = nbviz.from_tensorboard(logdir, tmp_path / "run")
    view = nbviz.Histograms(run, signal="gradients")
    assert view.layer == "fc1.weight"
    nbviz.Histograms(run, signal="weights")


def test_an_imported_runs_layer_table_claims_no_zero_fraction(tmp_path):
    """Activation histograms alone (no statistics): the layer table names no step for
    a zero fraction, though the probe measures it at the histograms' steps."""
    with SummaryWriter(str(tmp_path / "tb")) as w:
        for step in STEPS:
            w.add_histogram("activations/fc1", _values(step), step)
    run = nbviz.from_tensorboard(tmp_path / "tb", tmp_path / "run")
    assert len(run.recorded_steps("histograms:activation")) == len(STEPS)
    view = nbviz.LayerBrowser(run, live=False)
    assert view.current["zero_frac"]["step"] == -1


def test_importing_again_replaces_the_run(logdir, tmp_path):
    nbviz.from_tensorboard(logdir, tmp_path / "run").close()
    with SummaryWriter(str(tmp_path / "other")) as w:
        w.add_scalar("accuracy", 0.5, 3)
    again = nbviz.from_tensorboard(tmp_path / "other", tmp_path / "run")
    assert again.scalar_names() == ["accuracy"]
    assert again.recorded_layers(table="histograms") == []


def test_cli_import_tb_writes_the_run_and_says_what_it_holds(logdir, tmp_path, capsys):
    assert cli(["import-tb", str(logdir), "-o", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "2 scalar series, 2 histogram series" in out
    assert nbviz.open_run(tmp_path / "out").scalar_names() == ["loss/train", "loss/val"]


# ------------------------------------------------------------------ damaged and hostile
def _event_file(logdir: Path, logdir_ok: Path) -> tuple[Path, bytes]:
    logdir.mkdir(parents=True)
    source = next(logdir_ok.glob("*tfevents*"))
    return logdir / source.name, source.read_bytes()


def _masked_crc(data: bytes) -> int:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    return masked_crc32c(data)


def _damaged(kind: str, good: bytes) -> bytes:
    if kind == "random bytes":
        return np.random.default_rng(0).integers(0, 256, 4000, dtype=np.uint8).tobytes()
    if kind == "truncated":
        return good[: len(good) // 2]
    if kind == "flipped byte":
        bad = bytearray(good)
        bad[len(good) // 2] ^= 0xFF
        return bytes(bad)
    # a header with a valid checksum claiming a terabyte: the reader would try to allocate it
    header = struct.pack("<Q", 1 << 40)
    return good + header + struct.pack("<I", _masked_crc(header)) + b"x" * 64


@pytest.mark.parametrize("kind", ["random bytes", "truncated", "flipped byte", "huge length"])
def test_a_damaged_event_file_gives_a_clear_error(logdir, tmp_path, kind):
    path, good = _event_file(tmp_path / "bad", logdir)
    path.write_bytes(_damaged(kind, good))
    with pytest.raises(EventFileError, match=r"events\.out\.tfevents.*(damaged|not a TensorBoard)"):
        nbviz.from_tensorboard(tmp_path / "bad", tmp_path / "run")
    assert cli(["import-tb", str(tmp_path / "bad"), "-o", str(tmp_path / "cli")]) == 1


@pytest.mark.parametrize("kind", ["truncated", "flipped byte", "huge length"])
def test_lenient_import_keeps_the_records_before_the_damage(logdir, tmp_path, kind):
    path, good = _event_file(tmp_path / "bad", logdir)
    path.write_bytes(_damaged(kind, good))
    run = nbviz.from_tensorboard(tmp_path / "bad", tmp_path / "run", strict=False)
    notes = run.meta("import_notes")
    assert any("imported" in n for n in notes)
    if kind == "huge length":  # everything before the hostile record is there
        assert run.scalars("loss/train")["step"].tolist() == list(STEPS)


def _write_events(logdir: Path, values: list) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(logdir))
    for step, value in enumerate(values):
        summary = summary_pb2.Summary(value=[value])
        writer.add_event(event_pb2.Event(step=step, wall_time=1.7e9 + step, summary=summary))
    writer.close()


def _hostile_values() -> dict:
    from tensorboard.compat.proto import summary_pb2

    def histo(limits: list, counts: list) -> summary_pb2.Summary.Value:
        proto = summary_pb2.HistogramProto(min=0, max=1, bucket_limit=limits, bucket=counts)
        return summary_pb2.Summary.Value(tag="h", histo=proto)

    def image(width: int, height: int, data: bytes) -> summary_pb2.Summary.Value:
        proto = summary_pb2.Summary.Image(width=width, height=height, encoded_image_string=data)
        return summary_pb2.Summary.Value(tag="i", image=proto)

    return {
        "buckets without limits": histo([1], [1, 2]),
        "NaN counts": histo([0.5, 1], [1, np.nan]),
        "edges out of order": histo([0.9, 0.1, 1], [1, 1, 1]),
        "not an image": image(4, 4, b"<script>alert(1)</script>"),
        "a gigapixel image": image(100_000, 100_000, b""),
    }


@pytest.mark.parametrize("kind", list(_hostile_values()))
def test_a_hostile_value_gives_a_clear_error_or_is_skipped_with_a_note(tmp_path, kind):
    from tensorboard.compat.proto import summary_pb2

    ok = summary_pb2.Summary.Value(tag="loss", simple_value=0.5)
    _write_events(tmp_path / "tb", [ok, _hostile_values()[kind]])
    with pytest.raises(EventFileError, match=r"record \d+, tag '(h|i)'"):
        nbviz.from_tensorboard(tmp_path / "tb", tmp_path / "run")
    run = nbviz.from_tensorboard(tmp_path / "tb", tmp_path / "run", strict=False)
    assert run.scalars("loss")["value"].tolist() == [0.5]
    assert any("skipped" in n for n in run.meta("import_notes"))


def test_a_logdir_without_event_files_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no TensorBoard event files"):
        nbviz.from_tensorboard(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        nbviz.from_tensorboard(tmp_path / "missing")


def test_without_tensorboard_the_error_names_the_extra(logdir):
    code = (
        "import sys; sys.modules['tensorboard'] = None\n"
        "import nbviz\n"
        f"try:\n    nbviz.from_tensorboard({str(logdir)!r})\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    ).stdout
    assert "needs the 'tensorboard' package, which is not installed" in out
    assert "pip install 'nbviz[tensorboard]'" in out


def test_damaged_stored_bins_are_a_clear_error_and_the_views_still_draw(logdir, tmp_path):
    import sqlite3

    from nbviz.store import RunFileError

    nbviz.from_tensorboard(logdir, tmp_path / "run").close()
    conn = sqlite3.connect(tmp_path / "run" / "run.sqlite")
    with conn:
        where = "step = ? AND sid = (SELECT id FROM series WHERE signal = 'gradient')"

        def edges(step: int) -> np.ndarray:
            row = conn.execute(f"SELECT edges FROM histogram_bins WHERE {where}", (step,))
            return np.frombuffer(row.fetchone()[0], "<f8").copy()

        nan_edge = edges(10)
        nan_edge[3] = np.nan
        backwards = edges(20)[::-1]
        for step, blob in ((0, b"\x01\x02"), (10, nan_edge.tobytes()), (20, backwards.tobytes())):
            conn.execute(f"UPDATE histogram_bins SET edges = ? WHERE {where}", (blob, step))
    conn.close()
    run = nbviz.open_run(tmp_path / "run")
    faults = {0: "2 bytes of edges", 10: "a non-finite edge", 20: "edges that decrease"}
    for step, fault in faults.items():
        with pytest.raises(RunFileError, match=f"'fc1.weight'/gradient at step {step} .*{fault}"):
            run.histogram("fc1.weight", "gradient", step)
    view = nbviz.Histograms(run, signal="gradients")  # it draws the uniform rows
    for step in STEPS:
        view.step = step
        assert view.current["step"] == step
        assert np.frombuffer(view.current["counts"]["data"], "<f8").sum() == 500
    nbviz.Dashboard(run)


def test_histogram_bins_that_cannot_be_kept_name_their_tag_and_step(tmp_path):
    from nbviz.importers import event_files as ef
    from nbviz.importers.tensorboard import _write_histograms
    from nbviz.store import Writer

    edges = np.array([0.0, 1.0, 2.0, 3.0])
    good = ef.Histogram("fc1.weight", 0, 0.0, edges, np.array([1.0, 2.0, 3.0]))
    bad = ef.Histogram("fc1.weight", 7, 0.0, edges, np.array([1.0, -1.0, 2.0]))
    writer = Writer(tmp_path / "run")
    try:
        with pytest.raises(
            ValueError,
            match=r"histogram 'fc1.weight' at step 7: histogram bins: a count that is negative",
        ):
            _write_histograms(writer, {"fc1.weight": {0: good, 7: bad}}, [])
    finally:
        writer.close()
