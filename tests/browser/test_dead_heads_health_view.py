"""Dead attention heads of a Hugging Face model read in a real JupyterLab: the HealthReport
names the heads and their layer, and a click takes the browser to that layer."""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import expect

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

import tiny_hf  # noqa: E402

import nbviz  # noqa: E402

LAYER = "model.layers.1.self_attn"


def dead_head_run(path) -> None:
    """A tiny Llama whose key/value head 0 (query heads 0 and 1) is zeroed with what reads it."""
    model = tiny_hf.tiny_llama(kv_heads=2, vocab=40)
    attention = model.get_submodule(LAYER)
    with torch.no_grad():
        attention.v_proj.weight[:16] = 0
        attention.o_proj.weight[:, :32] = 0
    run = nbviz.Run(path)
    run.watch(model, every=2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    for step in range(12):
        ids = (torch.randint(0, 40, (8, 1), generator=gen) + torch.arange(12)) % 40
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.log(step, train_loss=loss)
    run.close()


def test_dead_heads_read_in_the_health_report(nb, tmp_path):
    torch.set_num_threads(1)
    dead_head_run(tmp_path / "run")
    nb.run(
        "dead_heads.ipynb",
        [
            "import nbviz\n"
            f"h = nbviz.HealthReport(nbviz.open_run({str(tmp_path / 'run')!r}), live=False)\n"
            "h"
        ],
    )
    report = nb.page.locator(".nbviz-health")
    expect(report).to_have_count(1)
    expect(report.locator(".nbviz-hr-verdict").first).to_have_attribute(
        "data-cause", "architecture"
    )
    item = report.locator("li.nbviz-hr-root[data-check='dead_heads']")
    expect(item).to_have_count(1)
    expect(item).to_have_attribute("data-layer", LAYER)
    expect(item.locator(".nbviz-hr-check")).to_have_text("dead heads")
    expect(item.locator(".nbviz-hr-message")).to_contain_text(
        f"Heads 0, 1 of the 4 of '{LAYER}' are dead"
    )
    item.locator(".nbviz-hr-head").click()
    nb.wait_kernel("h.layer", repr(LAYER), timeout=60)
    expect(item.locator(".nbviz-hr-evidence")).to_contain_text('"heads": [')
    nb.screenshot("health-report-dead-heads")
