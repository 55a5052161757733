"""The report of a run whose embeddings are damaged, opened offline: the other views are
there and work, and the page says, where the Dashboard lists what it leaves out, that
the projector is not shown and why."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from notebook_page import ARTIFACTS
from playwright.sync_api import expect


def open_damaged_report(
    new_page: Callable[..., Any], source: Path, tmp_path: Path, damage: Callable[[Any], None]
) -> Any:
    """A copy of the run ``source`` with ``damage(connection)`` done to its file, written as
    a report and opened offline (anything but the page's own file refused)."""
    from nbviz.report import write_report

    run = tmp_path / "run"
    shutil.copytree(source, run)
    con = sqlite3.connect(run / "run.sqlite")
    damage(con)
    con.commit()
    con.close()
    info = write_report(run, tmp_path / "report.html", max_steps=10)
    page = new_page(offline=True)
    page.context.route(
        "**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort()
    )
    page.goto(Path(info.path).resolve().as_uri())
    page.wait_for_selector("#nbviz-report-root[data-nbviz-ready=true]")
    return page


def test_report_of_damaged_embeddings_shows_the_other_views_and_says_what_is_not_shown(
    new_page: Callable[..., Any], demo_run_path: Path, tmp_path: Path
) -> None:
    page = open_damaged_report(
        new_page,
        demo_run_path,
        tmp_path,
        lambda con: con.execute("UPDATE embeddings SET matrix = substr(matrix, 1, 17)"),
    )
    notes = page.locator(".nbviz-dashboard-notes")
    expect(notes).to_be_visible()
    expect(notes).to_contain_text("Not shown: EmbeddingProjector:")
    expect(notes).to_contain_text("does not decode")
    expect(page.locator(".nbviz-loss-curves")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "report-damaged-embeddings.png"))
    page.locator('.nbviz-dash-tab[data-key="layers"]').click()
    expect(page.locator(".nbviz-layer-browser .nbviz-lb-table tbody tr").first).to_be_visible()
    page.locator('.nbviz-dash-tab[data-key="predictions"]').click()
    expect(page.locator(".nbviz-confusion")).to_be_visible()
    expect(page.locator(".nbviz-projector")).to_have_count(0)


def test_report_of_a_damaged_histogram_draws_the_others_and_names_the_step(
    new_page: Callable[..., Any], demo_run_path: Path, tmp_path: Path
) -> None:
    uri = f"{(demo_run_path / 'run.sqlite').as_uri()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as con:
        (bad,) = con.execute(
            "SELECT DISTINCT step FROM histograms ORDER BY step LIMIT 1 OFFSET 1"
        ).fetchone()
    page = open_damaged_report(
        new_page,
        demo_run_path,
        tmp_path,
        lambda con: con.execute(
            "UPDATE histograms SET counts = substr(counts, 1, 3) WHERE step = ?", (bad,)
        ),
    )
    page.locator('.nbviz-dash-tab[data-key="layers"]').click()
    notice = page.locator(".nbviz-histograms .nbviz-hist-notice")
    expect(notice).to_contain_text(f"do not decode and are left out (step {bad})")
    expect(page.locator(".nbviz-histograms canvas").first).to_be_visible()
    page.locator(".nbviz-histograms").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "report-damaged-histogram.png"), full_page=True)
