"""The diagnosis in a real JupyterLab: the HealthReport's verdict, a root finding opened to
the findings that follow from it, and a point of the DataMap opening its sample."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from playwright.sync_api import expect
from training import flipped_digits, named_mlp, sgd_step

import nbviz


def spike_run(path: Path) -> Path:
    """Digits through a ReLU MLP at lr=10: the loss blows up and a ReLU layer dies."""
    from nbviz.demo import load_digits

    d = load_digits(seed=0)
    x, y = torch.from_numpy(d.x_train).flatten(1), torch.from_numpy(d.y_train)
    torch.manual_seed(0)
    model = named_mlp(64, 64, 32, 10)
    opt = torch.optim.SGD(model.parameters(), lr=10.0)
    gen = torch.Generator().manual_seed(1)
    with nbviz.Run(path) as run:
        run.watch(model, every=5, optimizer=opt)
        for step in range(80):
            idx = torch.randint(0, len(y), (64,), generator=gen)
            run.log(step, train_loss=sgd_step(model, opt, x[idx], y[idx]))
    return path


def noisy_run(path: Path) -> tuple[Path, np.ndarray]:
    """15% of the digits' training labels flipped, the training split evaluated per epoch."""
    d, x, y, flipped = flipped_digits(0.15)
    torch.manual_seed(0)
    model = named_mlp(64, 64, 10)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(1)
    with nbviz.Run(path, class_names=[str(i) for i in range(10)]) as run:
        run.watch(model, every=10, optimizer=opt)
        run.log_samples(d.x_train[:, 0], y, split="train")
        step = 0
        for _ in range(10):
            for idx in torch.randperm(len(y), generator=gen).split(64):
                run.log(step, train_loss=sgd_step(model, opt, x[idx], y[idx]))
                step += 1
            run.evaluate(step - 1, model, [(x, y)], split="train", samples=False)
    return path, flipped


def test_the_verdict_a_root_opened_to_its_consequences_and_a_data_map_point(nb, tmp_path):
    torch.set_num_threads(1)
    spike = spike_run(tmp_path / "spike")
    noisy, flipped = noisy_run(tmp_path / "noisy")
    nb.run(
        "diagnosis.ipynb",
        [
            "import nbviz\n"
            f"hr = nbviz.HealthReport(nbviz.open_run({str(spike)!r}), live=False)\n"
            "hr",
            f"dm = nbviz.DataMap(nbviz.open_run({str(noisy)!r}), color_by='suspect', live=False)\n"
            "dm",
        ],
    )
    page = nb.page

    # the verdict first: the learning rate, with what to try
    report = page.locator(".nbviz-health")
    first = report.locator(".nbviz-hr-verdict").first
    expect(first).to_have_attribute("data-cause", "learning_rate")
    expect(first.locator(".nbviz-hr-sentence")).to_contain_text("The learning rate")
    expect(first.locator(".nbviz-hr-advice")).to_contain_text("Lower the learning rate")

    # the root, closed: its consequences are folded under it
    root = report.locator("li.nbviz-hr-root").first
    expect(root).to_have_attribute("data-check", "learning_rate_too_high")
    toggle = root.locator(":scope > .nbviz-hr-toggle")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    children = root.locator(":scope > .nbviz-hr-children")
    expect(children).to_be_hidden()
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(children).to_be_visible()
    dead = children.locator("li.nbviz-hr-consequence[data-check='dead_units']").first
    expect(dead).to_be_visible()
    expect(children.locator("li[data-check='stuck_weights']").first).to_be_visible()
    expect(children).not_to_contain_text("optimizer was given")
    root_id = root.get_attribute("data-id")
    nb.wait_kernel("hr.expanded", repr([root_id]), timeout=60)
    nb.screenshot("health-report-verdict")

    # a click on a consequence goes to its layer and step
    layer = dead.get_attribute("data-layer")
    dead.locator(".nbviz-hr-head").click()
    nb.wait_kernel("hr.layer", repr(layer), timeout=60)
    expect(dead).to_have_class("nbviz-hr-item nbviz-hr-consequence nbviz-active")

    # the data map: the first suspect's point, clicked, opens its sample in the gallery
    view = page.locator(".nbviz-datamap")
    expect(view).to_have_attribute("data-drawn", "1348")
    where = view.get_attribute("data-first-suspect")
    assert where is not None
    px, py = (float(v) for v in where.split(","))
    box = view.locator(".nbviz-dm-stage canvas").bounding_box()
    assert box is not None
    view.scroll_into_view_if_needed()
    box = view.locator(".nbviz-dm-stage canvas").bounding_box()
    page.mouse.click(box["x"] + px, box["y"] + py)
    picked = nb.wait_kernel("dm.selected_ids", lambda v: v != "[]", timeout=60)
    (chosen,) = eval(picked)  # noqa: S307 - a list of ints printed by the kernel
    # the sample under the click: the first suspect or one drawn on the same spot
    spot = nb.kernel_eval(
        f"dm.dynamics.set_index('id').loc[{chosen}, ['variability', 'confidence']].tolist()"
    )
    first = nb.kernel_eval("dm.dynamics.set_index('id').loc[dm.suspects[0]['id'], "
                           "['variability', 'confidence']].tolist()")  # fmt: skip
    assert np.allclose(eval(spot), eval(first), atol=0.01)  # noqa: S307
    card = view.locator(".nbviz-dm-gallery .nbviz-gallery-card")
    expect(card).to_have_count(1)
    expect(card.locator(".nbviz-gallery-id")).to_have_text(f"#{chosen}")
    expect(card.locator("img")).to_be_visible()
    assert chosen in flipped
    card.scroll_into_view_if_needed()  # the picture shows the sample the click opened
    nb.screenshot("data-map-sample")
