"""The embedding projector in a real JupyterLab: 100k points drawn with WebGL, a box
dragged over them selects exactly the points inside, in the kernel."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from playwright.sync_api import expect

import nbviz


def big_run(path: Path, n: int = 100_000, k: int = 10) -> Path:
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=6.0, size=(k, 16))
    labels = rng.integers(0, k, size=n)
    feats = (centres[labels] + rng.normal(size=(n, 16))).astype(np.float32)
    logits = np.eye(k, dtype=np.float32)[labels] * 3 + rng.normal(size=(n, k)).astype(np.float32)
    with nbviz.Run(path) as run:
        run.log_predictions(10, logits, labels, ids=np.arange(n))
        run.log_embeddings(10, feats, ids=np.arange(n))
    return path


def test_box_select_on_100k_points_sets_the_ids_inside(nb, tmp_path: Path) -> None:
    run_dir = big_run(tmp_path / "big")
    view = nb.run(
        "projector.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(run_dir)!r})\n"
            "pj = nbviz.EmbeddingProjector(run, method='pca')\n"
            "pj",
        ],
        ready=".nbviz-projector",
    )
    page = nb.page
    expect(view).to_have_attribute("data-drawn", "100000", timeout=60_000)
    expect(view.locator(".nbviz-pj-step")).to_have_text("step 10")
    expect(view.locator(".nbviz-projector-legend > span")).to_have_count(10)
    nb.screenshot("projector-100k")

    view.locator(".nbviz-pj-mode-box").click()
    stage = view.locator(".nbviz-projector-stage")
    box = stage.bounding_box()
    assert box is not None and box["width"] > 200
    x0, y0 = box["x"] + 0.35 * box["width"], box["y"] + 0.3 * box["height"]
    x1, y1 = box["x"] + 0.6 * box["width"], box["y"] + 0.65 * box["height"]
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, (y0 + y1) / 2, steps=4)
    page.mouse.move(x1, y1, steps=4)
    page.mouse.up()
    n = int(nb.wait_kernel("len(pj.selected_ids)", lambda v: int(v) > 0, timeout=60))
    polygon = json.loads(view.get_attribute("data-last-box") or "null")
    xs, ys = [p[0] for p in polygon], [p[1] for p in polygon]
    nb.run_code(
        "f = pj.points_frame()\n"
        f"inside = f[(f.x >= {min(xs)!r}) & (f.x <= {max(xs)!r}) & "
        f"(f.y >= {min(ys)!r}) & (f.y <= {max(ys)!r})]\n"
        "expected = sorted(int(i) for i in inside.id)"
    )
    assert nb.kernel_eval("len(expected)") == str(n)
    assert nb.kernel_eval("expected == pj.selected_ids") == "True"
    expect(view.locator(".nbviz-pj-selected")).to_contain_text(f"{n:,} selected")
    # the selection reaches the gallery, highest loss first
    losses = "list(f.set_index('id').loss.reindex(pj.gallery.ids))"
    assert nb.kernel_eval(f"{losses} == sorted({losses}, reverse=True)") == "True"
    assert int(nb.kernel_eval("len(pj.gallery.ids)")) == min(n, 2000)

    # clearing empties the selection in the kernel
    view.locator(".nbviz-pj-clear").click()
    nb.wait_kernel("len(pj.selected_ids)", "0", timeout=60)

    # colour by correct/wrong redraws with a two-entry legend
    view.locator(".nbviz-pj-color").select_option("correct")
    nb.wait_kernel("pj.color_by", "'correct'", timeout=60)
    expect(view.locator(".nbviz-projector-legend > span")).to_have_count(2)


def test_a_chosen_method_replaces_pca_when_ready(nb, demo_run_path: Path) -> None:
    view = nb.run(
        "projector-tsne.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(demo_run_path)!r})\n"
            "pj = nbviz.EmbeddingProjector(run, method='pca', params={'seed': 7})\n"
            "pj",
        ],
        ready=".nbviz-projector",
    )
    expect(view).to_have_attribute("data-method", "pca", timeout=30_000)
    n = nb.kernel_eval("pj.points['n']")
    view.locator(".nbviz-pj-method").select_option("tsne")
    nb.wait_kernel("pj.method", "'tsne'", timeout=60)
    expect(view).to_have_attribute("data-method", "tsne", timeout=120_000)
    assert view.get_attribute("data-drawn") == n
    expect(view.locator(".nbviz-pj-stop")).to_be_hidden()  # nothing left to stop
    view.locator(".nbviz-pj-color").select_option("correct")
    nb.screenshot("projector-tsne")
    assert nb.kernel_eval("pj.params['seed']") == "7"  # kept across the change of method


def test_a_label_set_reaching_2_31_lists_the_classes_it_has_and_shows_one(
    nb, tmp_path: Path
) -> None:
    top = 2**31 - 1
    labels = np.array([top] * 30 + [100_000] * 20 + [0] * 10)
    rng = np.random.default_rng(0)
    with nbviz.Run(tmp_path / "huge") as run:
        run.log_predictions(10, labels, labels)  # predicted classes, no class names
        run.log_embeddings(10, rng.normal(size=(60, 8)) + labels[:, None] % 7)
    view = nb.run(
        "projector-huge.ipynb",
        [
            "import nbviz\n"
            f"run = nbviz.open_run({str(tmp_path / 'huge')!r})\n"
            "pj = nbviz.EmbeddingProjector(run, method='pca')\n"
            "pj",
        ],
        ready=".nbviz-projector",
    )
    expect(view).to_have_attribute("data-drawn", "60", timeout=60_000)
    options = view.locator(".nbviz-pj-class option")
    expect(options).to_have_count(4)  # all classes, then the three it has, most points first
    assert options.all_inner_texts() == ["all classes", f"class {top}", "class 100000", "class 0"]
    legend = view.locator(".nbviz-projector-legend")
    expect(legend).to_contain_text('2,147,483,648 classes share 20 colours: "show" picks one')
    view.locator(".nbviz-pj-class").select_option(str(top))
    nb.wait_kernel("pj.filter_class", str(top), timeout=60)
    nb.screenshot("projector-huge-label-set")
