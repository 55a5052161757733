"""Details a person meets in the views, in a real JupyterLab: drag to zoom, legends,
axes and labels where a reader looks for them, text wrapped between words, views that
fit the output area, and a console and stderr that stay clean.

Each test saves a screenshot of what it checked in tests/browser/_artifacts/.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch
from notebook_page import screenshot
from playwright.sync_api import expect
from torch import nn

import nbviz

SENTENCES = [
    "the senate voted to adjourn the session early",
    "markets rallied after the announcement of new tariffs",
    "the striker scored twice in the second half",
    "researchers reported a faster method for protein folding",
    "heavy rain flooded several streets downtown overnight",
    "the orchestra performed a rarely heard symphony",
]

# a word split across two lines of its sample text (none expected)
SPLIT_WORDS = """(el) => {
  const node = el.firstChild;
  const split = [];
  const words = /\\S+/g;
  let m;
  while ((m = words.exec(node.textContent))) {
    const range = document.createRange();
    range.setStart(node, m.index);
    range.setEnd(node, m.index + m[0].length);
    const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
    if (tops.size > 1) split.push(m[0]);
  }
  return split;
}"""


def scalar_runs(root: Path) -> list[Path]:
    """Two runs: a noisy training loss every step, an epoch counter and a stepped lr
    every step, a validation loss once per epoch (every 40 steps)."""
    rng = np.random.default_rng(0)
    paths = []
    for k, name in enumerate(("baseline", "wider")):
        with nbviz.Run(root / name, name=name) as run:
            for s in range(200):
                trend = 2 * np.exp(-s / (60 + 30 * k))
                run.log(s, train_loss=float(trend + 0.15 * rng.normal()), epoch=s // 40)
                run.log(s, lr=0.1 / 10 ** (s // 100))
                if s % 40 == 39:
                    run.log(s, val_loss=float(trend + 0.3))
        paths.append(root / name)
    return paths


def text_run(path: Path, n: int = 240) -> Path:
    """Ten digit-named classes, text samples of whole words, predictions, embeddings."""
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 10, size=n)
    logits = np.eye(10, dtype=np.float32)[labels] * 2 + rng.normal(size=(n, 10)).astype(np.float32)
    texts = [" ".join(rng.permutation(SENTENCES)[:3]) for _ in range(n)]
    with nbviz.Run(path, class_names=[str(i) for i in range(10)]) as run:
        run.log_samples(texts, labels, ids=np.arange(n))
        run.log_predictions(5, logits, labels, ids=np.arange(n))
        run.log_embeddings(5, rng.normal(size=(n, 8)).astype(np.float32) + labels[:, None])
    return path


class ScaledMLP(nn.Module):
    """A parameter of the model itself (``scale``), then fc1 -> ReLU (half its units
    never fire) -> fc2."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(8))
        self.fc1 = nn.Linear(8, 32)
        self.act1 = nn.ReLU()
        self.fc2 = nn.Linear(32, 3)
        with torch.no_grad():
            self.fc1.bias[:16] = -20.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act1(self.fc1(x * self.scale)))


def probed_run(path: Path) -> Path:
    torch.manual_seed(0)
    model = ScaledMLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with nbviz.Run(path) as run:
        run.watch(model, every=2)
        for step in range(60):
            x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            run.log(step, train_loss=loss)
    return path


def domain(view) -> tuple[float, float] | None:
    text = view.get_attribute("data-domain") or ""
    return tuple(float(v) for v in text.split(",")) if text else None  # type: ignore[return-value]


def test_loss_curves_drag_zooms_shift_drag_pans_and_compare_mode_has_a_legend(
    nb, tmp_path: Path
) -> None:
    paths = scalar_runs(tmp_path)
    view = nb.run(
        "curves.ipynb",
        [
            "import nbviz\n"
            f"runs = [nbviz.open_run(p) for p in {[str(p) for p in paths]!r}]\n"
            "lc = nbviz.LossCurves(runs)\n"
            "lc"
        ],
        ready=".nbviz-loss-curves",
    )
    expect(view.locator(".nbviz-lc-canvas").first).to_be_visible()
    page = nb.page
    # one legend entry per run, each with its colour
    chips = view.locator(".nbviz-lc-run")
    expect(chips).to_have_count(2)
    expect(chips.nth(0)).to_contain_text("baseline")
    expect(chips.nth(1)).to_contain_text("wider")
    colours = [
        c.locator(".nbviz-swatch").evaluate("s => getComputedStyle(s).backgroundColor")
        for c in (chips.nth(0), chips.nth(1))
    ]
    assert colours[0] != colours[1] and "rgba(0, 0, 0, 0)" not in colours
    expect(view.locator(".nbviz-lc-hint")).to_contain_text("drag to zoom")
    expect(view.locator(".nbviz-lc-hint")).to_contain_text("shift-drag to pan")
    screenshot(view, "loss-curves-compare")

    canvas = view.locator(".nbviz-lc-canvas").first
    box = canvas.bounding_box()
    assert box is not None
    left, width = box["x"] + 58, box["width"] - 58 - 14  # the plot inside the axes
    y = box["y"] + box["height"] / 2
    page.mouse.move(left + 0.25 * width, y)
    page.mouse.down()
    page.mouse.move(left + 0.4 * width, y, steps=3)
    page.mouse.move(left + 0.5 * width, y, steps=3)
    screenshot(canvas, "loss-curves-drag-select")
    page.mouse.up()
    expect(view).not_to_have_attribute("data-domain", "")
    a, b = domain(view) or (0, 0)
    assert abs(a - 0.25 * 199) < 3 and abs(b - 0.5 * 199) < 3, (a, b)
    screenshot(view, "loss-curves-zoomed")

    # shift-drag pans: the same span, later steps
    page.keyboard.down("Shift")
    page.mouse.move(left + 0.6 * width, y)
    page.mouse.down()
    page.mouse.move(left + 0.4 * width, y, steps=4)
    page.mouse.up()
    page.keyboard.up("Shift")
    expect(view).not_to_have_attribute("data-domain", f"{a:.1f},{b:.1f}")
    a2, b2 = domain(view) or (0, 0)
    assert a2 > a and abs((b2 - a2) - (b - a)) < 0.5, (a, b, a2, b2)

    canvas.dblclick()
    expect(view).to_have_attribute("data-domain", "")


def test_text_samples_wrap_between_words_and_the_matrix_has_no_band_over_its_labels(
    nb, tmp_path: Path
) -> None:
    path = text_run(tmp_path / "text")
    view = nb.run(
        "confusion-text.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(path)!r})\n"
            "cm = nbviz.ConfusionMatrix(run)\n"
            "cm",
        ],
        ready=".nbviz-confusion",
    )
    expect(view.locator(".nbviz-cm-canvas")).to_be_visible()
    # the column labels (single digits) are no taller than the corner's two lines
    labels = view.locator(".nbviz-cm-collabels").bounding_box()
    assert labels is not None and labels["height"] <= 40, labels
    screenshot(view.locator(".nbviz-cm-scroll"), "confusion-digit-labels")
    # a cell: its samples, highest loss first, and the menu says so
    nb.run_code("t = int(run.predictions(5).label.mode()[0])\ncm.selected = [t, t]")
    cards = view.locator(".nbviz-gallery-card")
    expect(cards.first).to_be_visible()
    expect(view.locator(".nbviz-gallery-sort")).to_have_value("loss")
    texts = view.locator(".nbviz-gallery-text")
    expect(texts.first).to_be_visible()
    for i in range(min(texts.count(), 8)):
        assert texts.nth(i).evaluate(SPLIT_WORDS) == []
    view.locator(".nbviz-gallery-sort").scroll_into_view_if_needed()
    nb.screenshot("gallery-text-samples-sorted-by-loss")


def test_layer_browser_has_a_row_for_a_root_parameter_and_axes_on_the_dead_map(
    nb, tmp_path: Path
) -> None:
    path = probed_run(tmp_path / "probed")
    view = nb.run(
        "layers.ipynb",
        [
            f"import nbviz\nrun = nbviz.open_run({str(path)!r})\nlb = nbviz.LayerBrowser(run)\nlb",
        ],
        ready=".nbviz-layer-browser",
    )
    expect(view.locator(".nbviz-lb-row").first).to_be_visible()
    row = view.locator('.nbviz-lb-row[data-layer="scale"]')
    expect(row).to_be_visible()
    expect(row).to_contain_text("Parameter")
    nb.run_code("lb.selected_layer = 'act1'")
    units = view.locator(".nbviz-lb-dead-units")
    steps = view.locator(".nbviz-lb-dead-steps")
    expect(units).to_be_visible()
    expect(steps).to_be_visible()
    dead = view.locator("canvas.nbviz-lb-dead").bounding_box()
    ub, sb = units.bounding_box(), steps.bounding_box()
    assert dead and ub and sb
    assert ub["x"] + ub["width"] <= dead["x"] + 1 and abs(ub["height"] - dead["height"]) < 1
    assert sb["y"] >= dead["y"] + dead["height"] - 1 and abs(sb["width"] - dead["width"]) < 1
    screenshot(view.locator(".nbviz-lb-detail"), "dead-map-axes")
    screenshot(view.locator(".nbviz-lb-table"), "layer-browser-root-parameter")

    hist = nb.run_code("nbviz.Histograms(run, 'activations', layer='fc1')")
    expect(hist.locator(".nbviz-hist-ridge")).to_be_visible()
    expect(hist.locator(".nbviz-hist-title").first).to_contain_text("steps at the right")
    screenshot(hist.locator(".nbviz-hist-plots"), "ridge-step-labels")


def test_a_standalone_projector_fits_the_output_area_and_redraws_quietly(
    nb, tmp_path: Path
) -> None:
    path = text_run(tmp_path / "text", n=2000)
    view = nb.run(
        "projector-fit.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(path)!r})\n"
            "pj = nbviz.EmbeddingProjector(run, method='pca')\n"
            "pj",
        ],
        ready=".nbviz-projector",
    )
    expect(view).to_have_attribute("data-drawn", "2000")
    output = view.locator("xpath=ancestor::div[contains(@class, 'jp-OutputArea-output')]").first
    sizes = output.evaluate("o => [o.scrollWidth, o.clientWidth]")
    assert sizes[0] <= sizes[1], f"the output area scrolls sideways: {sizes}"
    stage = view.locator(".nbviz-projector-stage").bounding_box()
    area = output.bounding_box()
    assert stage and area and stage["x"] + stage["width"] <= area["x"] + area["width"] + 0.5
    # colours changed faster than a draw finishes: drawn one after another, no rejection
    nb.run_code(
        "import time\n"
        "for c in ['correct', 'label', 'confidence', 'loss', 'prediction', 'label']:\n"
        "    pj.color_by = c\n"
        "    time.sleep(0.03)"
    )
    nb.wait_kernel("pj.color_by", "'label'")
    expect(view.locator(".nbviz-projector-legend > span")).to_have_count(10)
    screenshot(output, "projector-standalone")
    # the fixture fails this test on any console error, unhandled rejection,
    # ResizeObserver loop or warning from nbviz's code (regl-scatterplot's keyMap)


def test_profiler_prints_nothing_to_stderr_and_its_two_step_times_say_what_they_are(
    nb, tmp_path: Path
) -> None:
    view = nb.run(
        "profiler-quiet.ipynb",
        [
            "import torch, nbviz\n"
            "from torch import nn\n"
            "torch.manual_seed(0)\n"
            "model = nn.Sequential(nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 4))\n"
            "opt = torch.optim.SGD(model.parameters(), lr=1e-3)\n"
            "x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))\n"
            "def step():\n"
            "    opt.zero_grad()\n"
            "    nn.functional.cross_entropy(model(x), y).backward()\n"
            "    opt.step()\n"
            "p = nbviz.Profiler(model, step, steps=3, warmup=1)\n"
            "p",
        ],
        timeout_ms=120_000,
        ready=".nbviz-profiler",
    )
    expect(view.locator(".nbviz-prof-steptime")).to_be_visible()
    cell = nb.page.locator(".jp-Notebook .jp-Cell").first
    expect(cell.locator('[data-mime-type="application/vnd.jupyter.stderr"]')).to_have_count(0)
    expect(view.locator(".nbviz-prof-stepnote")).to_have_text(
        re.compile(r"^mean of 3 profiled steps \(.+\) on cpu$")
    )
    expect(view.locator(".nbviz-prof-overhead")).to_contain_text(
        "median wall-clock time of 3 steps each"
    )
    screenshot(view.locator(".nbviz-prof-head"), "profiler-header")
