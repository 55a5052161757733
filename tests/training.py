"""Small models and training loops the tests share: real torch, a few steps, a real run.

Each helper is the standard loop a user writes (forward, backward,
``optimizer.step()``, ``run.log(step, train_loss=...)``), so a test reads as what
it checks rather than as the loop.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

import nbviz

Batch = tuple[torch.Tensor, torch.Tensor]


def random_batches(
    n: int, seed: int = 0, batch: int = 8, features: int = 12, classes: int = 5
) -> Iterator[Batch]:
    """``n`` batches of Gaussian inputs and uniform labels from one seeded generator."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(n):
        yield (
            torch.randn(batch, features, generator=g),
            torch.randint(0, classes, (batch,), generator=g),
        )


def mlp() -> nn.Sequential:
    """12 inputs, two ReLU layers of 32 units, 5 classes (``random_batches``' shapes)."""
    return nn.Sequential(
        nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 5)
    )


def named_mlp(*sizes: int, act: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """``fc1, act1, fc2, act2, ..., fcN``: named layers, no activation after the last."""
    layers: list[tuple[str, nn.Module]] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True), start=1):
        layers.append((f"fc{i}", nn.Linear(a, b)))
        if i < len(sizes) - 1:
            layers.append((f"act{i}", act()))
    return nn.Sequential(OrderedDict(layers))


def dead_relu_mlp(*sizes: int) -> nn.Sequential:
    """``named_mlp`` whose first ReLU never fires: fc1's bias is -10."""
    model = named_mlp(*sizes)
    with torch.no_grad():
        model.fc1.bias.fill_(-10.0)
    return model


def sgd_step(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = nn.functional.cross_entropy,
) -> torch.Tensor:
    """One training step: zero_grad, forward, loss, backward, optimizer step; the loss."""
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss


def fit(run: nbviz.Run, model: nn.Module, batches: Iterable[Batch], lr: float = 0.01) -> None:
    """Plain SGD over ``batches`` (step = index), logging each step's loss; then flush."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for step, (x, y) in enumerate(batches):
        run.log(step, train_loss=sgd_step(model, opt, x, y))
    run.flush()


def loss_only_run(path: Path) -> nbviz.Run:
    """A run that logged one training loss and nothing else (no captures, no predictions)."""
    run = nbviz.Run(path)
    run.log(0, train_loss=1.0)
    run.flush()
    return run


class ConvAutoencoder(nn.Module):
    """8x8 digits -> a 16-d code -> 8x8 digits (the code is the last Linear's input)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 64, 16)
        )
        self.decoder = nn.Sequential(nn.Linear(16, 64), nn.Unflatten(1, (1, 8, 8)), nn.Sigmoid())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


def record_autoencoder(path: Path, steps: int = 60, every: int = 20) -> Path:
    """Train ``ConvAutoencoder`` on the digits (watched), evaluating it with a per-sample MSE
    every ``every`` steps on the validation images (a loader of inputs alone)."""
    from nbviz.demo import load_digits

    data = load_digits()
    x_train, x_val = torch.from_numpy(data.x_train), torch.from_numpy(data.x_val)
    torch.manual_seed(0)
    model = ConvAutoencoder()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    val = [x_val[i : i + 64] for i in range(0, len(x_val), 64)]
    with nbviz.Run(path, overwrite=True) as run, run.watch(model, every=10):
        for step in range(steps):
            batch = x_train[(step * 64) % 1280 :][:64]
            loss = sgd_step(model, opt, batch, batch, nn.functional.mse_loss)
            run.log(step, train_loss=loss)
            if step % every == every - 1:
                run.evaluate(step, model, val, loss_fn=nn.MSELoss(reduction="none"))
    return path


def nan_run(path: Path, nan_at: int = 7, steps: int = 15) -> Path:
    """A run that hits NaN at step ``nan_at`` and stays there: a recorded, closed run.

    An MLP ``fc1, act1, fc2, act2, fc3`` (12 -> 32 -> 32 -> 5) watched at every step;
    before step ``nan_at`` one weight of ``fc1`` becomes NaN, so that step's
    ``fc1``/``act1`` outputs are NaN in one unit and everything downstream, the
    gradients and (after the optimizer step) every weight are NaN from then on.
    Evaluated on 200 samples at step 5 (finite) and step 10 (every logit and
    embedding NaN), with the ``act2`` output as the embedding.
    """
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x_all = torch.randn(449, 12, generator=g)
    y_all = torch.randint(0, 5, (449,), generator=g)
    xv, yv = x_all[:200], y_all[:200]
    loader = [(xv[i : i + 64], yv[i : i + 64]) for i in range(0, 200, 64)]
    model = named_mlp(12, 32, 32, 5)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with nbviz.Run(path, overwrite=True) as run:
        run.log_samples(xv.numpy(), yv.numpy())
        with run.watch(model, every=1, hist_every=1):
            for step in range(steps):
                if step == nan_at:
                    with torch.no_grad():
                        model.fc1.weight[0, 0] = float("nan")
                at = (step * 32) % 400
                loss = sgd_step(model, opt, x_all[at : at + 32], y_all[at : at + 32])
                run.log(step, train_loss=loss)
                if step in (5, 10):
                    run.evaluate(step, model, loader, embed_layer="act2")
    return path


def lm_steps(
    run: nbviz.Run,
    model: nn.Module,
    opt: torch.optim.Optimizer,
    gen: torch.Generator,
    steps: int,
    batch: int,
    before: Callable[[nn.Module, int], None] | None = None,
) -> None:
    """``steps`` next-token steps of a GPT-style ``model`` on synthetic text from ``gen``
    (``batch`` sequences of its context + 1), each loss logged; ``before(model, step)``
    runs ahead of each step (a fault planted by a test)."""
    from reference_models import next_token_loss, token_batch

    config = model.config
    for step in range(steps):
        if before is not None:
            before(model, step)
        ids = token_batch(gen, batch, config.context + 1, config.vocab)
        loss = next_token_loss(model(ids[:, :-1]), ids[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.log(step, train_loss=loss)


def flipped_digits(fraction: float = 0.15) -> tuple[Any, torch.Tensor, torch.Tensor, Any]:
    """The digits' training split with ``fraction`` of its labels flipped to another class:
    ``(digits, x flattened, noisy labels, indices flipped)``."""
    import numpy as np

    from nbviz.demo import load_digits

    d = load_digits(seed=0)
    x, y = torch.from_numpy(d.x_train).flatten(1), torch.from_numpy(d.y_train)
    rng = np.random.default_rng(0)
    flipped = rng.choice(len(y), int(fraction * len(y)), replace=False)
    y[flipped] = torch.from_numpy((y[flipped].numpy() + rng.integers(1, 10, len(flipped))) % 10)
    return d, x, y, flipped


def language_model_run(
    path: Path, steps: int = 12, every: int = 3, collapse: tuple[int, int] | None = None
) -> Path:
    """A small GPT-style model trained on synthetic text, its attention recorded.

    ``collapse=(block, head)`` plants a collapsed head: that head's query and key
    projections scaled up 60x, so each query puts nearly all its weight on one key.
    Returns the run directory (closed).
    """
    from reference_models import GPT, GPTConfig, token_batch

    config = GPTConfig(vocab=48, context=10, width=32, heads=4, blocks=2)
    torch.manual_seed(0)
    model = GPT(config)
    if collapse is not None:
        block, head = collapse
        d = config.width // config.heads
        with torch.no_grad():
            qkv = model.blocks[block].attn.qkv.weight
            for part in (0, 1):  # the query and key rows of that head
                rows = slice(part * config.width + head * d, part * config.width + (head + 1) * d)
                qkv[rows] *= 60.0
    gen = torch.Generator().manual_seed(1)
    probe_ids = token_batch(gen, 2, config.context, config.vocab)
    words = [f"w{i}" for i in range(config.vocab)]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with nbviz.Run(path) as run:
        run.watch(
            model, every=every, hist_every=every, attention=probe_ids, tokens=lambda i: words[i]
        )
        lm_steps(run, model, opt, gen, steps, batch=8)
    return Path(path)


def token_loss_run(path: Path, steps: int = 20, top_k: int = 4) -> tuple[Path, dict]:
    """A small GPT-style model trained on synthetic text, then evaluated token by token
    (``run.evaluate`` on its ``(N, T, vocab)`` logits) with padded targets and a vocabulary.

    The evaluation at the last step has 12 samples of 9 positions; sample 1 ends in
    three ignored targets (-100), sample 4 in six padding tokens (``w0``, masked out by
    the batch's ``mask``). Returns the run directory (closed) and what a test checks
    against: the model's logits, the targets and the padding of the evaluation.
    """
    from reference_models import GPT, GPTConfig, token_batch

    config = GPTConfig(vocab=24, context=10, width=32, heads=4, blocks=2)
    torch.manual_seed(0)
    model = GPT(config)
    gen = torch.Generator().manual_seed(1)
    words = [f"w{i}" for i in range(config.vocab)]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ids = token_batch(torch.Generator().manual_seed(5), 12, 10, config.vocab)
    inputs, targets = ids[:, :-1], ids[:, 1:].clone()
    targets[1, 6:] = -100
    targets[4, 3:] = 0
    mask = torch.ones_like(targets, dtype=torch.bool)
    mask[4, 3:] = False
    loader = [
        {"input": inputs[a:b], "target": targets[a:b], "mask": mask[a:b]}
        for a, b in ((0, 8), (8, 12))
    ]
    with nbviz.Run(path) as run:
        lm_steps(run, model, opt, gen, steps, batch=16)
        run.evaluate(steps - 1, model, loader, tokens=words, top_k=top_k)
        model.eval()
        with torch.no_grad():
            logits = model(inputs)
    padding = (targets == -100) | ~mask
    return Path(path), {
        "logits": logits,
        "targets": targets,
        "padding": padding,
        "words": words,
        "step": steps - 1,
    }


def data_map_run(path: Path, epochs: int = 8) -> Path:
    """An MLP on the digits' 1,348 training images, 15% of their labels flipped, the
    training split evaluated once per epoch (what a DataMap needs) and its samples logged."""
    d, x, y, _ = flipped_digits(0.15)
    torch.manual_seed(0)
    model = named_mlp(64, 32, 10)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(1)
    with nbviz.Run(path, class_names=[str(i) for i in range(10)]) as run:
        run.log_samples(d.x_train[:, 0], y, split="train")
        step = 0
        for _ in range(epochs):
            for idx in torch.randperm(len(y), generator=gen).split(128):
                run.log(step, train_loss=sgd_step(model, opt, x[idx], y[idx]))
                step += 1
            run.evaluate(step - 1, model, [(x, y)], split="train", samples=False)
    return path


def record_segmentation(path: Path, steps: int = 60) -> Path:
    """A small fully convolutional model that labels each pixel of the digits (ink, edge of
    the ink, background), trained with per-pixel cross-entropy and evaluated without a
    ``loss_fn``: ``(N, 3, 8, 8)`` scores against ``(N, 8, 8)`` classes."""
    from nbviz.demo import load_digits

    data = load_digits()
    x_train, x_val = torch.from_numpy(data.x_train), torch.from_numpy(data.x_val)

    def masks(x: torch.Tensor) -> torch.Tensor:
        ink = x[:, 0] > 0.5
        return ink.long() + (ink & (x[:, 0] < 0.8)).long()

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 3, 1),
    )
    opt = torch.optim.Adam(model.parameters(), lr=3e-2)
    y_train = masks(x_train)
    val = [(x_val[i : i + 64], masks(x_val[i : i + 64])) for i in range(0, len(x_val), 64)]
    with nbviz.Run(path, overwrite=True) as run, run.watch(model, every=10):
        for step in range(steps):
            i = (step * 64) % 1280
            loss = sgd_step(model, opt, x_train[i : i + 64], y_train[i : i + 64])
            run.log(step, train_loss=loss)
        run.evaluate(steps - 1, model, val)
    return path


def steps_seen(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    run: nbviz.Run | None,
    steps: int,
) -> list[torch.Tensor]:
    """``steps`` cross-entropy steps on one batch; the logits and every parameter
    gradient of each step (what a probe must leave bitwise as they are)."""
    seen = []
    for step in range(steps):
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        seen += [out.detach().clone()] + [p.grad.clone() for p in model.parameters()]
        opt.step()
        if run is not None:
            run.log(step, train_loss=loss)
    return seen
