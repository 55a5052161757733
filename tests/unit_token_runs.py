"""A watched GPT-style model evaluated token by token, for the top-token tests (Python and
browser): what the run stores is checked against the layers' outputs computed here."""

from __future__ import annotations

from pathlib import Path

import torch
from training import lm_steps

import nbviz

HOSTILE = "<img src=x onerror=alert(1)>"
"""A token whose text is markup: it must stay text wherever it is shown."""


def top_token_run(path: Path, steps: int = 12) -> tuple[Path, dict]:
    """A small GPT trained a few steps under ``run.watch``, then evaluated once on 10
    samples of 9 tokens in two batches, with padding: sample 1 ends in three ignored
    targets (-100), sample 6 in four masked positions. Token 3's text is :data:`HOSTILE`.

    Returns the run directory (closed) and the reference: ``inputs``, ``padding`` and
    ``outputs`` (each watched layer's ``(N, T, F)`` output on the evaluated inputs,
    by name), ``words`` and ``step``.
    """
    from reference_models import GPT, GPTConfig, token_batch

    config = GPTConfig(vocab=24, context=10, width=16, heads=2, blocks=1)
    torch.manual_seed(0)
    model = GPT(config)
    words = [f"w{i}" for i in range(config.vocab)]
    words[3] = HOSTILE
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ids = token_batch(torch.Generator().manual_seed(5), 10, 10, config.vocab)
    ids[2, 4] = 3  # the hostile token among the inputs
    inputs, targets = ids[:, :-1], ids[:, 1:].clone()
    targets[1, 6:] = -100
    mask = torch.ones_like(targets, dtype=torch.bool)
    mask[6, 5:] = False
    loader = [
        {"input": inputs[a:b], "target": targets[a:b], "mask": mask[a:b]}
        for a, b in ((0, 9), (9, 10))  # 9 > k samples: the peaks prune; 1: they need not
    ]
    with nbviz.Run(path) as run:
        run.watch(model, every=4)
        lm_steps(run, model, opt, torch.Generator().manual_seed(1), steps, batch=8)
        run.evaluate(steps - 1, model, loader, tokens=words)
        outputs: dict[str, torch.Tensor] = {}
        handles = [
            m.register_forward_hook(
                lambda m, a, out, name=name: outputs.__setitem__(name, out.detach().clone())
            )
            for name, m in model.named_modules()
            if name
        ]
        model.eval()
        with torch.no_grad():
            model(inputs)
        for h in handles:
            h.remove()
    padding = (targets == -100) | ~mask
    return Path(path), {
        "inputs": inputs,
        "padding": padding,
        "outputs": outputs,
        "words": words,
        "step": steps - 1,
    }
