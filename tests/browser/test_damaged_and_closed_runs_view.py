"""A person's view of a run that is damaged, hostile or was closed under it, in a real
JupyterLab: a sample whose stored bytes do not decode says so on its card (the others are
shown), a click on a view whose run was closed is answered in words, not silence or a
crash, a Dashboard with a tampered table shows the other views and says why one is left
out, a run that diverged reads so in the RunsTable, and text of any length stays in place."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import numpy as np
from notebook_page import ARTIFACTS
from playwright.sync_api import expect
from test_hostile_run_values import small_run
from test_partial_nonfinite_layers import partial_nan_run

STDERR = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'


def test_damaged_samples_and_a_closed_run_are_said_in_words(nb, tmp_path: Path) -> None:
    damaged = small_run(tmp_path / "damaged")
    conn = sqlite3.connect(damaged / "run.sqlite")
    conn.execute("UPDATE samples SET payload = X'3C696D67' WHERE id = 1")  # "<img", 4 bytes
    conn.commit()
    conn.close()
    closing = small_run(tmp_path / "closing")
    labels = small_run(tmp_path / "labels")
    conn = sqlite3.connect(labels / "run.sqlite")
    conn.execute("UPDATE predictions SET label = '<b>x</b>'")  # a crafted class label
    conn.commit()
    conn.close()
    nb.run(
        "damaged.ipynb",
        [
            "import nbviz\n"
            f"bad = nbviz.open_run({str(damaged)!r})\n"
            "g = nbviz.SampleGallery(bad, ids=[0, 1, 2]); g",
            f"run = nbviz.open_run({str(closing)!r})\ncm = nbviz.ConfusionMatrix(run, step=3); cm",
            "run.close()",
            f"dash = nbviz.Dashboard(nbviz.open_run({str(labels)!r})); dash",
        ],
        ready=".nbviz-confusion canvas.nbviz-cm-canvas",
    )
    page = nb.page
    page.set_viewport_size({"width": 1280, "height": 1600})

    gallery = page.locator(".nbviz-gallery").first
    expect(gallery.locator(".nbviz-gallery-card")).to_have_count(3)
    card = gallery.locator(".nbviz-gallery-card:has(.nbviz-sample-damaged)")
    expect(card).to_have_count(1)
    expect(card.locator(".nbviz-sample-damaged")).to_have_text(
        "stored sample does not decode: from_blob: 4 bytes do not hold an array of shape [8] "
        "and dtype <f4 (32 bytes)"
    )
    expect(gallery.locator(".nbviz-gallery-values")).to_have_count(2)  # the others: values
    gallery.screenshot(path=str(ARTIFACTS / "damaged-sample-card.png"))

    # the run was closed in the cell above; a click on the matrix is answered in words
    cm = page.locator(".nbviz-confusion").first
    canvas = cm.locator("canvas.nbviz-cm-canvas")
    box = canvas.bounding_box()
    assert box is not None
    canvas.click(position={"x": box["width"] / 6, "y": box["height"] / 6})
    # (the cell's samples are what the click asks for: their gallery says it)
    expect(cm.locator(".nbviz-gallery .nbviz-message-error")).to_have_text(
        f"SampleGallery: the run at {closing} is closed (run.close(), or the end of its "
        f"`with` block): read it again with nbviz.open_run('{closing}')"
    )
    expect(page.locator(STDERR)).to_have_count(0)  # no traceback from the poller or a thread

    # a Dashboard whose predictions table was tampered with: the loss curves are shown,
    # and the views of the predictions are left out with the reason, the label as text
    dash = page.locator(".nbviz-dashboard").last
    expect(dash.locator(".nbviz-dash-pending")).to_contain_text(
        "Not shown: ConfusionMatrix: "
        f"{labels / 'run.sqlite'}: predictions: a stored value does not decode: a stored "
        "integer is '<b>x</b>', not a number"
    )
    expect(dash.locator(".nbviz-loss-curves")).to_be_visible()
    dash.screenshot(path=str(ARTIFACTS / "damaged-table-dashboard.png"))
    cm.screenshot(path=str(ARTIFACTS / "closed-run-click.png"))


def test_a_diverged_run_with_a_huge_config_value_reads_in_the_runs_table(
    nb, tmp_path: Path
) -> None:
    import math

    import nbviz

    hostile = '<img src=x onerror="window.pwned=1">'
    with nbviz.Run(tmp_path / "diverged", config={"note": "x" * 100_000, hostile: hostile}) as run:
        for s in range(20):
            run.log(s, train_loss=1.0 / (s + 1) if s < 8 else math.inf if s < 12 else math.nan)
    with nbviz.Run(tmp_path / "fine", config={"note": "short", hostile: "b"}) as run:
        for s in range(20):
            run.log(s, train_loss=1.0 / (s + 1))
    partial = partial_nan_run(tmp_path / "partial")
    with nbviz.Run(tmp_path / "named") as run:  # a class name of 100,000 characters
        names = ["a" * 100_000, hostile, "c"]
        run.log_samples(np.zeros((30, 4), np.float32), np.arange(30) % 3, class_names=names)
        run.log_predictions(
            0, np.eye(3, dtype=np.float32)[(np.arange(30) + 1) % 3], np.arange(30) % 3
        )
    view = nb.run(
        "runs.ipynb",
        [
            "import nbviz\n"
            f"runs = [nbviz.open_run({str(tmp_path / 'diverged')!r}), "
            f"nbviz.open_run({str(tmp_path / 'fine')!r})]\n"
            "rt = nbviz.RunsTable(runs); rt",
            f"cm = nbviz.ConfusionMatrix(nbviz.open_run({str(tmp_path / 'named')!r})); cm",
            f"lb = nbviz.LayerBrowser(nbviz.open_run({str(partial)!r})); lb",
        ],
        ready=".nbviz-runs-table:has(.nbviz-rt-table tbody tr)",
    ).first
    page = nb.page
    rows = view.locator(".nbviz-rt-table tbody tr")
    expect(rows).to_have_count(2)
    diverged = rows.filter(has_text="diverged")
    # the final loss of the run that diverged is said to end NaN, counted
    expect(diverged.locator("td.nbviz-rt-bad").first).to_have_text(
        "ends NaN @19 (12 NaN/Inf; last finite 0.125 @7)"
    )
    # the 100,000-character value is cut: the run's name stays on screen beside it
    name = diverged.locator("td").first
    expect(name).to_have_text("diverged")
    scroll = view.locator(".nbviz-rt-scroll").bounding_box()
    box = name.bounding_box()
    assert scroll is not None and box is not None
    assert box["x"] >= scroll["x"] - 1 and box["x"] + box["width"] <= scroll["x"] + scroll["width"]
    assert view.locator("td.nbviz-rt-config").first.evaluate("e => e.offsetWidth") < 400
    # sorting by a column keeps the text as text
    view.locator("th", has_text="final train_loss").click()
    expect(view.locator(".nbviz-rt-table th.nbviz-rt-config").first).to_have_text(hostile)
    assert page.evaluate("() => window.pwned || 0") == 0
    view.screenshot(path=str(ARTIFACTS / "runs-table-diverged.png"))

    # the most confused pairs: one line each, cut with an ellipsis, the whole in the title
    pair = page.locator(".nbviz-cm-confused button").first
    expect(pair).to_have_attribute("title", re.compile(r"^a{1999}"))
    assert pair.evaluate("b => b.scrollWidth > b.clientWidth && b.offsetHeight < 40")
    assert page.evaluate("() => window.pwned || 0") == 0

    # NaN in only some layers: counted on those rows (layer 0's bias too), not on layer 3
    lb = page.locator(".nbviz-layer-browser")
    first = lb.locator('.nbviz-lb-row[data-layer="0"]')
    expect(first.locator(".nbviz-lb-nonfinite")).to_have_text(
        ["\u26a0 32 non-finite", "", "\u26a0 1 non-finite"]  # zero fraction, grad, update
    )
    expect(lb.locator('.nbviz-lb-row[data-layer="3"] .nbviz-lb-nonfinite')).to_have_text(
        ["", "", ""]
    )
    lb.screenshot(path=str(ARTIFACTS / "partial-nan-layers.png"))
