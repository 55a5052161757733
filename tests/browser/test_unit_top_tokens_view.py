"""A language model's unit in the LayerBrowser, in a real JupyterLab: the unit explorer
lists the tokens a unit was most active on as text strips (the context as text, the token
highlighted, the value), a click on a unit's bar lists another unit's, a click on a strip
opens its sample, and a token whose text is markup stays text. The console stays clean
(the fixture fails the test on an error), and no dialog opens."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from notebook_page import ARTIFACTS
from playwright.sync_api import expect
from unit_token_runs import HOSTILE, top_token_run

import nbviz

LAYER = "blocks.0.mlp.act"


def opacity(span: Any) -> float:
    """The alpha of a span's background ("rgb(...)" is opaque)."""
    parts = re.findall(r"[\d.]+", span.evaluate("s => getComputedStyle(s).backgroundColor"))
    return float(parts[3]) if len(parts) == 4 else 1.0


def test_the_unit_explorer_shows_a_units_top_tokens_in_their_context(nb, tmp_path: Path) -> None:
    run_dir, ref = top_token_run(tmp_path / "lm")
    with nbviz.open_run(run_dir) as run:
        frame = run.top_tokens(LAYER)
    # a unit one of whose top tokens is the hostile one (else one with it in a context)
    hits = frame[frame["token"] == HOSTILE]
    if not len(hits):
        hits = frame[[HOSTILE in c for c in frame["context"]]]
    unit = int(hits["unit"].iloc[0])
    rows = frame[frame["unit"] == unit].to_dict("records")
    dialogs: list[str] = []
    nb.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    nb.run(
        "top_tokens.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(run_dir)!r})\n"
            f"lb = nbviz.LayerBrowser(run, selected_layer={LAYER!r}, live=False)\n"
            f"lb.unit = {unit}\n"
            "lb",
        ],
        ready=".nbviz-lb-strip",
    )
    page = nb.page
    view = page.locator(".nbviz-lb").first
    units = view.locator(".nbviz-lb-units")
    expect(units).to_contain_text(f"evaluation of step {ref['step']}, top 8 tokens per unit")
    # the section's title says what it shows: tokens, not samples
    expect(view.locator(".nbviz-lb-units-title")).to_have_text(
        "what each unit responds to: the tokens it was most active on, in their context"
    )
    strips = units.locator(".nbviz-lb-strip")
    expect(strips).to_have_count(len(rows))
    for i, row in enumerate(rows):
        strip = strips.nth(i)
        assert strip.get_attribute("data-id") == str(row["id"])
        assert strip.get_attribute("data-position") == str(row["position"])
        assert float(strip.get_attribute("data-value")) == pytest.approx(row["value"], rel=1e-6)
        texts = strip.locator(".nbviz-lb-ctx").all_text_contents()
        assert texts == row["context"]
        hit = strip.locator(".nbviz-lb-ctx-hit")
        expect(hit).to_have_count(1)
        assert hit.text_content() == row["token"]
    # markup in a token's text stays text: no element made of it, no handler run
    hostile = units.locator(".nbviz-lb-ctx", has_text="onerror")
    assert hostile.count() >= 1
    assert hostile.first.text_content() == HOSTILE
    expect(units.locator("img")).to_have_count(0)
    # the strongest token is highlighted more strongly than the weakest
    alpha = [opacity(strips.nth(i).locator(".nbviz-lb-ctx-hit")) for i in (0, len(rows) - 1)]
    assert alpha[0] > alpha[1]
    units.screenshot(path=str(ARTIFACTS / "unit-top-tokens.png"))

    # a click on a strip opens its sample, as a click on a sample card does
    strips.first.click()
    nb.wait_kernel("lb.map_id", str(rows[0]["id"]))
    expect(units.locator(f'.nbviz-lb-sample-maps[data-id="{rows[0]["id"]}"]')).to_be_visible()
    expect(strips.first).to_have_class(re.compile("nbviz-active"))

    # another unit chosen by its number lists its own tokens
    other = (unit + 1) % 64
    box = units.locator(".nbviz-lb-unit-input")
    box.fill(str(other))
    box.press("Enter")
    nb.wait_kernel("lb.unit", str(other))
    expect(units.locator(f'.nbviz-lb-strips[data-unit="{other}"]')).to_be_visible()
    first = frame[(frame["unit"] == other) & (frame["rank"] == 0)].iloc[0]
    expect(units.locator(".nbviz-lb-strip").first).to_have_attribute(
        "data-position", str(first["position"])
    )
    assert dialogs == []
    nb.screenshot("unit-top-tokens-page")


def test_a_layer_without_top_tokens_says_so_in_words(nb, tmp_path: Path) -> None:
    run_dir, _ = top_token_run(tmp_path / "lm")
    nb.run(
        "no_top_tokens.ipynb",
        [
            "import nbviz\n"
            f"lb = nbviz.LayerBrowser(nbviz.open_run({str(run_dir)!r}), selected_layer='pos', "
            "live=False)\nlb",
        ],
        ready=".nbviz-lb-units-empty",
    )
    expect(nb.page.locator(".nbviz-lb-units-empty").first).to_contain_text("No top tokens of 'pos'")
    expect(nb.page.locator(".nbviz-lb-units-title").first).to_have_text(
        "what each unit responds to"
    )
