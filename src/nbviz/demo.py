"""The bundled demo: a small CNN trained on scikit-learn's digits, recorded with probes.

Everything it needs ships with scikit-learn (1,797 8x8 images of 10 digits), so it
runs offline in well under a minute on two CPU cores.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DIGIT_NAMES = [str(i) for i in range(10)]


@dataclass
class DigitsData:
    x_train: np.ndarray  # (N, 1, 8, 8) float32 in [0, 1]
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray


def load_digits(val_fraction: float = 0.25, seed: int = 0) -> DigitsData:
    """scikit-learn's digits as (N, 1, 8, 8) images, split into train and validation."""
    from sklearn.datasets import load_digits as sk_load_digits

    digits = sk_load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    n_val = int(len(y) * val_fraction)
    val, train = order[:n_val], order[n_val:]
    return DigitsData(x[train], y[train], x[val], y[val])


def digits_cnn(width: int = 16):
    """2 conv + 2 fc, sized for 8x8 digits."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(1, width, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(2 * width * 16, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


def record_demo(
    out: str | Path = "runs/demo",
    *,
    epochs: int = 8,
    batch_size: int = 64,
    lr: float = 0.05,
    every: int = 5,
    seed: int = 0,
    verbose: bool = False,
) -> Path:
    """Train the digits CNN with a probe and an evaluation per epoch; return the run path.

    An existing run at ``out`` is replaced, so the demo always shows one clean run.
    """
    import shutil

    import torch
    from torch import nn

    from nbviz.run import Run

    out = Path(out)
    if (out / "run.sqlite").exists():
        shutil.rmtree(out)
    torch.manual_seed(seed)
    data = load_digits(seed=seed)
    model = digits_cnn()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    config = {
        "model": "digits_cnn",
        "optimizer": "SGD",
        "lr": lr,
        "momentum": 0.9,
        "batch_size": batch_size,
        "epochs": epochs,
        "seed": seed,
    }
    xt, yt = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    xv, yv = torch.from_numpy(data.x_val), torch.from_numpy(data.y_val)
    val_loader = [(xv[i : i + 256], yv[i : i + 256]) for i in range(0, len(yv), 256)]
    started = time.perf_counter()
    step = 0
    with Run(out, config=config, name="digits demo", class_names=DIGIT_NAMES) as run:
        run.watch(model, every=every, hist_every=every)  # distributions at each capture
        gen = torch.Generator().manual_seed(seed)
        for epoch in range(epochs):
            model.train()
            for idx in torch.randperm(len(yt), generator=gen).split(batch_size):
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(xt[idx]), yt[idx])
                loss.backward()
                opt.step()
                run.log(step, train_loss=loss, lr=lr, epoch=epoch)
                step += 1
            metrics = run.evaluate(step - 1, model, val_loader, split="val")
            if verbose:
                print(
                    f"epoch {epoch + 1}/{epochs}: train_loss {loss.item():.3f}  "
                    f"val_loss {metrics['val_loss']:.3f}  "
                    f"val_accuracy {metrics['val_accuracy']:.3f}"
                )
    if verbose:
        print(f"recorded {step} steps in {time.perf_counter() - started:.1f} s")
    return out
