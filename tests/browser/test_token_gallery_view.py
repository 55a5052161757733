"""A language model's evaluation in a real JupyterLab: the gallery shows each sample's tokens
coloured by their loss with the scale's legend, a hover on a token shows its loss and the
model's top predictions, and a click in the detail pins them. The console stays clean (the
fixture fails the test on an error)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from notebook_page import ARTIFACTS
from playwright.sync_api import expect
from training import token_loss_run

import nbviz

RGB = re.compile(r"rgb\((\d+), (\d+), (\d+)\)")


def background(token: Any) -> str:
    return token.evaluate("s => getComputedStyle(s).backgroundColor")


def test_the_gallery_colours_tokens_by_loss_and_shows_their_top_predictions(
    nb, tmp_path: Path
) -> None:
    run_dir, ref = token_loss_run(tmp_path / "lm", top_k=4)
    nb.run(
        "tokens.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(run_dir)!r})\n"
            "gallery = nbviz.SampleGallery(run)\n"
            "gallery",
        ],
        ready=".nbviz-gallery .nbviz-token",
    )
    page = nb.page
    gallery = page.locator(".nbviz-gallery").first
    cards = gallery.locator(".nbviz-gallery-card")
    expect(cards).to_have_count(12)
    # the legend: the scale from 0, no non-finite losses in this evaluation
    legend = gallery.locator(".nbviz-gallery-token-legend")
    expect(legend).to_contain_text(re.compile(r"token loss 0.*\+"))
    expect(legend).not_to_contain_text("non-finite")

    # sample 1: six real tokens, then three of padding (no token: not drawn)
    card = gallery.locator('.nbviz-gallery-card[data-id="1"]')
    tokens = card.locator(".nbviz-token")
    expect(tokens).to_have_count(6)
    with nbviz.open_run(run_dir) as run:
        rows = run.token_losses(ref["step"], ids=[1, 4]).to_dict("records")
    token = tokens.nth(2)
    assert token.get_attribute("data-position") == "2"
    assert token.text_content() == rows[2]["token"]
    assert float(token.get_attribute("data-loss")) == pytest.approx(rows[2]["loss"], rel=1e-5)
    colour = background(token)
    assert RGB.match(colour), colour
    # a higher loss is a darker colour
    losses = [float(t.get_attribute("data-loss")) for t in tokens.all()]
    shade = [sum(map(int, RGB.match(background(t)).groups())) for t in tokens.all()]
    lo, hi = losses.index(min(losses)), losses.index(max(losses))
    assert shade[lo] > shade[hi]

    # hover: the token's loss and the model's top predictions
    token.hover()
    tip = gallery.locator(".nbviz-token-tip")
    expect(tip).to_be_visible()
    expect(tip).to_contain_text(f'"{rows[2]["token"]}" at 2: loss')
    tops = tip.locator(".nbviz-token-top-text")
    expect(tops).to_have_count(4)
    assert tops.all_text_contents() == rows[2]["top_tokens"]
    p0 = 100 * rows[2]["top_probs"][0]
    expect(tip.locator(".nbviz-token-top").first).to_contain_text(f"{p0:.1f}%")
    gallery.scroll_into_view_if_needed()
    page.mouse.move(0, 0)
    expect(tip).to_be_hidden()

    # sample 4's detail: its padding tokens shown unstyled; a click on a token pins its
    # loss and top predictions
    gallery.locator('.nbviz-gallery-card[data-id="4"]').click()
    detail = gallery.locator(".nbviz-gallery-detail")
    strip = detail.locator(".nbviz-gallery-detail-tokens")
    expect(strip.locator(".nbviz-token")).to_have_count(9)
    pads = strip.locator(".nbviz-token-pad")
    expect(pads).to_have_count(6)
    assert pads.first.get_attribute("data-loss") == ""
    assert background(pads.first) == "rgba(0, 0, 0, 0)"  # no colour: not a loss
    expect(detail.locator(".nbviz-token-legend")).to_contain_text("padding")
    row = next(r for r in rows if r["id"] == 4 and r["position"] == 1)
    strip.locator('.nbviz-token[data-position="1"]').click()
    pinned = detail.locator(".nbviz-token-info")
    expect(pinned).to_have_attribute("data-position", "1")
    expect(pinned).to_contain_text(f'"{row["token"]}" at 1: loss')
    assert pinned.locator(".nbviz-token-top-text").all_text_contents() == row["top_tokens"]
    strip.locator('.nbviz-token[data-position="1"]').hover()
    expect(tip).to_be_visible()
    gallery.screenshot(path=str(ARTIFACTS / "token-gallery.png"))


def test_non_finite_token_losses_have_their_own_colour_and_count(nb, tmp_path: Path) -> None:
    path = tmp_path / "bad"
    with nbviz.Run(path) as run:
        run.log_token_losses(
            0,
            [[0.5, float("inf"), 1.0, 0.0], [float("nan"), 2.0, 0.25, 0.0]],
            [[1, 2, 3, 0], [4, 5, 1, 0]],
            mask=[[1, 1, 1, 0], [1, 1, 1, 0]],
            top_ids=[[[1, 2]] * 4, [[3, 4]] * 4],
            top_probs=[[[0.5, 0.25]] * 4, [[0.5, 0.25]] * 4],
            tokens=["<pad>", "<b>bold</b>", " b", "c", "d", "e"],
        )
    nb.run(
        "bad_tokens.ipynb",
        [f"import nbviz\nnbviz.SampleGallery(nbviz.open_run({str(path)!r}))"],
        ready=".nbviz-gallery .nbviz-token",
    )
    gallery = nb.page.locator(".nbviz-gallery").first
    expect(gallery.locator(".nbviz-gallery-token-legend")).to_contain_text("2 non-finite")
    bad = gallery.locator('.nbviz-gallery-card[data-id="0"] .nbviz-token[data-position="1"]')
    expect(bad).to_have_attribute("data-loss", "+Inf")
    assert background(bad) == "rgb(232, 17, 79)"
    expect(gallery.locator('.nbviz-gallery-card[data-id="1"]')).to_contain_text(
        "1 non-finite token loss"
    )
    # the text from data is text, never markup; padding unstyled
    first = gallery.locator('.nbviz-gallery-card[data-id="0"] .nbviz-token').first
    expect(first).to_have_text("<b>bold</b>")
    assert first.locator("b").count() == 0
    pad = gallery.locator('.nbviz-gallery-card[data-id="0"] .nbviz-token-pad')
    expect(pad).to_have_text("<pad>")
    gallery.screenshot(path=str(ARTIFACTS / "token-gallery-nonfinite.png"))
