"""A segmentation model's run in the Dashboard: its samples by loss, and one line for each
view it has no data for that says why, not that the data is still to come."""

from __future__ import annotations

from pathlib import Path

from training import record_segmentation

import nbviz


def test_a_segmentation_run_shows_its_samples_and_says_why_other_views_are_out(
    tmp_path: Path,
) -> None:
    run = nbviz.open_run(record_segmentation(tmp_path / "seg"))
    assert run.predicts_classes("val") is False
    assert run.outputs(59).outputs.shape[1:] == (3, 8, 8)
    dash = nbviz.Dashboard(run, live=False)
    assert dash.samples is not None and dash.confusion is None and dash.projector is None
    lines = dash.pending.splitlines()
    assert (
        "Not shown: ConfusionMatrix: the predictions have no classes (a loss per sample: "
        "a language model, a class per position, or a model evaluated with loss_fn=...)"
    ) in lines
    assert any(
        line.startswith("Not shown: EmbeddingProjector: predictions but no embeddings")
        and "embed_layer=" in line
        for line in lines
    )
    dash.close()
