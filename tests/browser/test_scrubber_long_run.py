"""The step scrubber over a 100k-step run in a real JupyterLab: its positions arrive as one
run of steps (a few bytes), and the keys, the buttons, the slider and play move through
every step, the kernel's ``step`` following. Between the thinned positions of a long
irregular run, a recorded step set from the kernel is said to be shown at one."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect

N_STEPS = 100_000


def _long_run(path: Path) -> Path:
    from nbviz.store import Writer

    with Writer(path, commit_interval=0.5) as w:
        for lo in range(0, N_STEPS, 20_000):
            w.insert(
                "scalars",
                [("train_loss", s, 1.0 / (1 + s), 0.0) for s in range(lo, lo + 20_000)],
            )
    return path


def test_keys_buttons_slider_and_play_move_through_a_long_run(nb, tmp_path: Path) -> None:
    path = _long_run(tmp_path / "long")
    nb.run(
        "scrub.ipynb",
        [
            "import nbviz\n"
            f"s = nbviz.StepScrubber(nbviz.open_run({str(path)!r}), live=False, fps=20)\ns",
        ],
    )
    page = nb.page
    root = page.locator(".nbviz-scrubber")
    label = root.locator(".nbviz-scrub-step")
    expect(label).to_have_text(re.compile(r"^step 99,999 · 100,000 of 100,000$"))
    assert nb.kernel_eval("s.positions['runs']['shape'], s.positions['every']") == "([3], 1)"

    root.focus()
    page.keyboard.press("Home")
    expect(root).to_have_attribute("data-step", "0")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("PageUp")
    expect(root).to_have_attribute("data-step", "11")
    expect(label).to_have_text(re.compile(r"^step 11 · 12 of 100,000$"))
    nb.wait_kernel("s.step", "11")
    page.keyboard.press("ArrowLeft")
    expect(root).to_have_attribute("data-step", "10")
    root.locator(".nbviz-scrub-last").click()
    expect(root).to_have_attribute("data-step", "99999")
    root.locator(".nbviz-scrub-back").click()
    expect(root).to_have_attribute("data-step", "99998")
    nb.wait_kernel("s.step", "99998")

    # the slider's middle is the middle step
    root.locator(".nbviz-scrub-slider").evaluate(
        "(s) => { s.value = '50000'; s.dispatchEvent(new Event('input')); }"
    )
    expect(root).to_have_attribute("data-step", "50000")
    nb.wait_kernel("s.step", "50000")

    # a step set in the kernel between positions shows the one at or before it
    nb.kernel_eval("setattr(s, 'step', 123456789) or s.step")
    expect(label).to_have_text(re.compile(r"^step 123,456,789 \(after 99,999\) · 100,000 of"))

    # play advances by the kernel's stride (250 positions: 400 ticks over the run)
    root.locator(".nbviz-scrub-first").click()
    expect(root).to_have_attribute("data-step", "0")
    root.locator(".nbviz-scrub-play").click()
    nb.wait_kernel("s.step", lambda v: int(v) >= 500 and int(v) % 250 == 0)
    root.locator(".nbviz-scrub-play").click()
    nb.wait_kernel("s.playing", "False")
    nb.screenshot("scrubber-long-run")


def test_a_recorded_step_between_thinned_positions_is_shown_at_one(nb, tmp_path: Path) -> None:
    import numpy as np

    from nbviz.store import Writer

    # irregular steps past MAX_RUNS runs: every k-th one is sent, the kernel keeps them all
    steps = np.unique(np.random.default_rng(4).integers(0, 60_000, 6_500))
    with Writer(tmp_path / "thin", commit_interval=0.5) as w:
        w.insert("scalars", [("train_loss", int(s), 1.0 / (1 + int(s)), 0.0) for s in steps])
    nb.run(
        "thin.ipynb",
        [
            "import nbviz\n"
            f"s = nbviz.StepScrubber(nbviz.open_run({str(tmp_path / 'thin')!r}), live=False)\ns",
        ],
    )
    label = nb.page.locator(".nbviz-scrubber .nbviz-scrub-step")
    expect(label).to_have_text(re.compile(r"\(1 in \d+ of 6,\d{3} steps\)$"))
    assert int(nb.kernel_eval("s.positions['every']")) > 1
    # a linked view sets a recorded step that was not sent: the label does not call it
    # unrecorded ("after"), it says where the slider shows it
    hidden = int(steps[1])
    nb.kernel_eval(f"setattr(s, 'step', {hidden}) or s.step")
    expect(label).to_have_text(
        re.compile(rf"^step {hidden:,} \(shown at {int(steps[0]):,}\) · 1 of [\d,]+ \(1 in")
    )
    nb.screenshot("scrubber-thinned-shown-at")
