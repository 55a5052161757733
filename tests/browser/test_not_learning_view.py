"""A run that learned nothing, in a real JupyterLab: the HealthReport's verdict says the
loss stayed at chance and points at the data, where it would have said "healthy"."""

from __future__ import annotations

from pathlib import Path

import torch
from playwright.sync_api import expect
from training import named_mlp, sgd_step

import nbviz


def random_label_run(path: Path) -> Path:
    """Digits through an MLP whose every batch gets labels drawn afresh: nothing to learn."""
    from nbviz.demo import load_digits

    d = load_digits(seed=0)
    x = torch.from_numpy(d.x_train).flatten(1)
    torch.manual_seed(0)
    model = named_mlp(64, 64, 32, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    with nbviz.Run(path) as run:
        run.watch(model, every=10, optimizer=opt)
        for step in range(150):
            idx = torch.randint(0, len(x), (64,), generator=gen)
            labels = torch.randint(0, 10, (64,), generator=gen)
            run.log(step, train_loss=sgd_step(model, opt, x[idx], labels))
    return path


def test_a_loss_at_chance_is_the_verdict_with_what_to_check(nb, tmp_path):
    torch.set_num_threads(1)
    run = random_label_run(tmp_path / "run")
    nb.run(
        "not_learning.ipynb",
        [f"import nbviz\nhr = nbviz.HealthReport(nbviz.open_run({str(run)!r}), live=False)\nhr"],
        ready=".nbviz-health .nbviz-hr-verdict",
    )
    report = nb.page.locator(".nbviz-health")
    first = report.locator(".nbviz-hr-verdict").first
    expect(first).to_have_attribute("data-cause", "data")
    expect(first.locator(".nbviz-hr-advice")).to_contain_text("one small batch")
    root = report.locator("li.nbviz-hr-root[data-check='not_learning']")
    expect(root).to_have_count(1)
    expect(root).to_contain_text("stayed at chance for 10 outputs")
    nb.screenshot("health-report-not-learning")
