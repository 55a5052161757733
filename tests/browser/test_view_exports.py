"""The download menu of a view saves, as CSV, the same table its ``data()`` gives in Python:
clicked in real Chromium, the saved file read back and compared with the kernel's frame."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from notebook_page import ARTIFACTS
from playwright.sync_api import expect


def download(nb, view, fmt: str) -> tuple[str, bytes]:
    """Click ``view``'s menu and its ``fmt`` item; the saved file's name and bytes."""
    view.locator(".nbviz-export-button").first.click()
    with nb.page.expect_download() as info:
        view.locator(f'.nbviz-export-item[data-format="{fmt}"]').first.click()
    got = info.value
    return got.suggested_filename, Path(got.path()).read_bytes()


def rows_of(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))


def test_confusion_matrix_csv_is_its_data_frame(nb, demo_run_path: Path) -> None:
    view = nb.run(
        "cm_export.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(demo_run_path)!r})\n"
            "cm = nbviz.ConfusionMatrix(run)\n"
            "cm",
        ],
        ready=".nbviz-confusion",
    )
    expect(view.locator("canvas.nbviz-cm-canvas")).to_have_count(1)
    name, data = download(nb, view, "csv")
    assert name == "confusion_matrix.csv"
    rows = rows_of(data)
    assert rows[0] == ["step", "true", "predicted", "true_name", "predicted_name", "count", "rate"]
    assert len(rows) - 1 == int(nb.kernel_eval("len(cm.data())")) == 100
    expected = nb.kernel_eval(
        "'|'.join(f'{r.true},{r.predicted},{r.true_name},{r.count}' "
        "for r in cm.data().itertuples())"
    ).strip("'")
    assert "|".join(f"{r[1]},{r[2]},{r[3]},{r[5]}" for r in rows[1:]) == expected
    rates = nb.kernel_eval("[round(x, 9) for x in cm.data()['rate']]")
    assert [round(float(r[6]), 9) for r in rows[1:]] == eval(rates)  # noqa: S307 (a list literal)
    name, png = download(nb, view, "png")
    assert name == "confusion_matrix.png" and png[:8] == b"\x89PNG\r\n\x1a\n"


def test_histograms_csv_is_the_histogram_at_the_step(nb, demo_run_path: Path) -> None:
    view = nb.run(
        "hist_export.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(demo_run_path)!r})\n"
            "h = nbviz.Histograms(run, signal='weights')\n"
            "h",
        ],
        ready=".nbviz-histograms",
    )
    expect(view.locator(".nbviz-hist-current")).not_to_be_empty()
    name, data = download(nb, view, "csv")
    assert name == "histograms.csv"
    rows = rows_of(data)
    assert rows[0] == ["layer", "signal", "step", "bin", "lo", "hi", "count"]
    frame = nb.kernel_eval(
        "[(r.layer, r.step, r.bin, round(r.lo, 6), round(r.hi, 6), r.count) "
        "for r in h.histogram().itertuples()]"
    )
    got = [
        (r[0], int(r[2]), int(r[3]), round(float(r[4]), 6), round(float(r[5]), 6), float(r[6]))
        for r in rows[1:]
    ]
    assert got == [tuple(x) for x in eval(frame)]  # noqa: S307 (a list literal)
    assert all(r[1] == "weights" for r in rows[1:])
    name, png = download(nb, view, "png")
    assert name == "histograms.png" and png[:8] == b"\x89PNG\r\n\x1a\n"
    (ARTIFACTS / "histograms-download.png").write_bytes(png)
    name, svg = download(nb, view, "svg")
    assert name == "histograms.svg" and svg.startswith(b"<?xml")
    assert b"<path" in svg and b"weights over steps" in svg
    nb.screenshot("histograms-export")


def test_health_report_csv_is_its_findings(nb, nan_run_path: Path) -> None:
    view = nb.run(
        "health_export.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(nan_run_path)!r})\n"
            "hr = nbviz.HealthReport(run)\n"
            "hr",
        ],
        ready=".nbviz-health",
    )
    expect(view.locator(".nbviz-hr-list li").first).to_be_visible()
    name, data = download(nb, view, "csv")
    assert name == "health_report.csv"
    rows = rows_of(data)
    assert rows[0] == [
        "id",
        "check",
        "layer",
        "step",
        "severity",
        "message",
        "cause",
        "root",
        "advice",
        "evidence",
    ]
    ids = nb.kernel_eval("'|'.join(hr.data()['id'])").strip("'")
    assert "|".join(r[0] for r in rows[1:]) == ids
    messages = nb.kernel_eval("hr.data()['message'].tolist()")
    assert [r[5] for r in rows[1:]] == eval(messages)  # noqa: S307 (a list literal)
    assert "nonfinite" in {r[1] for r in rows[1:]}
    # the menu offers CSV only: the findings are a list, not a drawing
    view.locator(".nbviz-export-button").first.click()
    expect(view.locator(".nbviz-export-item")).to_have_count(1)
    nb.screenshot("health-export-menu")


def test_projector_csv_comes_from_the_kernel_with_ids(nb, demo_run_path: Path) -> None:
    view = nb.run(
        "pj_export.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(demo_run_path)!r})\n"
            "pj = nbviz.EmbeddingProjector(run, method='pca', color_by='confidence')\n"
            "pj",
        ],
        ready=".nbviz-projector",
    )
    expect(view.locator(".nbviz-pj-step")).not_to_be_empty()
    name, data = download(nb, view, "csv")
    assert name == "embedding_projector.csv"
    rows = rows_of(data)
    assert rows[0] == ["id", "x", "y", "label", "pred", "loss", "confidence", "color"]
    ids = nb.kernel_eval("pj.data()['id'].tolist()")
    assert [int(float(r[0])) for r in rows[1:]] == eval(ids)  # noqa: S307 (a list literal)
    assert all(r[6] == r[7] for r in rows[1:])  # coloured by confidence
    name, png = download(nb, view, "png")
    assert name == "embedding_projector.png" and png[:8] == b"\x89PNG\r\n\x1a\n"
    (ARTIFACTS / "projector-download.png").write_bytes(png)
