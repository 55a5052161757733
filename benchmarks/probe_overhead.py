"""Probe overhead: training-step time with instrumentation / without, side by side.

Workloads (synthetic data, SGD, CPU): an MNIST-style CNN (2 conv + 2 fc, 1x28x28,
batch 64) and an MLP 784-512-512-512-10 (batch 256). Configurations are run in
interleaved blocks; each block measures every configuration and its ratio to the
uninstrumented baseline of the same block, and the table shows the median ratio.

    python benchmarks/probe_overhead.py [--blocks 12] [--steps 50] [--warmup 10] [--threads N]
    python benchmarks/probe_overhead.py --paired 500   # nbviz only, step by step

Each block starts every tool afresh and runs ``--warmup`` untimed steps first, so
one-off work at a tool's first log (nbviz fixes histogram ranges at its first
capture) is not counted as per-step overhead; with ``--steps`` a multiple of the
default capture period (50), every timed window holds exactly one nbviz capture
per period at the defaults.

``--paired STEPS`` measures the nbviz configurations more precisely: each trains
its own copy of the model and they take one step each in turn, so a change in
the machine's speed (large on shared machines) hits all of them alike; the
table shows the ratio of mean step times, captures included.

TensorBoard and wandb columns appear when those packages are installed
(``pip install -e '.[bench]'``, done by ``make bench``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import nbviz  # noqa: E402


def reference_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 32, 3),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Dropout(0.25),
        nn.Flatten(),
        nn.Linear(9216, 128),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(128, 10),
    )


def reference_mlp() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(784, 512),
        nn.ReLU(),
        nn.Linear(512, 512),
        nn.ReLU(),
        nn.Linear(512, 512),
        nn.ReLU(),
        nn.Linear(512, 10),
    )


WORKLOADS = {"CNN": (reference_cnn, 64), "MLP": (reference_mlp, 256)}

# A configuration: a context manager factory given (model, tmpdir) that yields a
# per-step callback ``after(step, loss)`` run after optimizer.step().
Config = Callable[[nn.Module, Path], contextlib.AbstractContextManager]


@contextlib.contextmanager
def baseline(model: nn.Module, tmp: Path) -> Iterator[Callable]:
    yield lambda step, loss: None


def nbviz_config(**watch) -> Config:
    @contextlib.contextmanager
    def make(model: nn.Module, tmp: Path) -> Iterator[Callable]:
        run = nbviz.Run(tmp / "nbviz")
        probe = run.watch(model, **watch)
        try:
            yield lambda step, loss: run.log(step, train_loss=loss)
        finally:
            probe.close()
            run.close()

    return make


def tensorboard_config(every: int) -> Config | None:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None

    @contextlib.contextmanager
    def make(model: nn.Module, tmp: Path) -> Iterator[Callable]:
        writer = SummaryWriter(str(tmp / "tb"))

        def after(step: int, loss: torch.Tensor) -> None:
            writer.add_scalar("train_loss", loss.item(), step)
            if step % every == 0:
                for name, p in model.named_parameters():
                    writer.add_histogram(name, p, step)
                    if p.grad is not None:
                        writer.add_histogram(f"{name}.grad", p.grad, step)

        try:
            yield after
        finally:
            writer.close()

    return make


def wandb_config(log_freq: int) -> Config | None:
    try:
        import wandb
    except ImportError:
        return None

    @contextlib.contextmanager
    def make(model: nn.Module, tmp: Path) -> Iterator[Callable]:
        os.environ["WANDB_MODE"] = "offline"
        os.environ["WANDB_SILENT"] = "true"
        run = wandb.init(project="nbviz-bench", dir=str(tmp), reinit="finish_previous")
        wandb.watch(model, log="all", log_freq=log_freq)
        try:
            yield lambda step, loss: wandb.log({"train_loss": loss.item()}, step=step)
        finally:
            wandb.unwatch(model)
            run.finish()

    return make


def time_block(
    model, opt, x, y, config: Config, steps: int, warmup: int, start: int, tmp: Path
) -> float:
    """Seconds per step for ``steps`` steps (after ``warmup`` untimed steps) under ``config``."""
    with config(model, tmp) as after:
        step = start
        for i in range(warmup + steps):
            if i == warmup:
                t0 = time.perf_counter()
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            after(step, loss)
            step += 1
        return (time.perf_counter() - t0) / steps


def measure(
    name: str, configs: dict[str, Config], blocks: int, steps: int, warmup: int
) -> dict[str, float]:
    make, batch = WORKLOADS[name]
    torch.manual_seed(0)
    model = make()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    ratios: dict[str, list[float]] = {k: [] for k in configs}
    base_times = []
    with tempfile.TemporaryDirectory() as d:
        step = 0
        for b in range(blocks):
            times = {}
            # rotate the order so no configuration always runs first or last
            order = list(configs)
            order = order[b % len(order) :] + order[: b % len(order)]
            for key in order:
                tmp = Path(d) / f"{key}-{b}".replace(" ", "_").replace("=", "")
                tmp.mkdir()
                times[key] = time_block(model, opt, x, y, configs[key], steps, warmup, step, tmp)
                step += warmup + steps
            base_times.append(times["uninstrumented"])
            for key in configs:
                ratios[key].append(times[key] / times["uninstrumented"])
    result = {k: statistics.median(v) for k, v in ratios.items()}
    result["_base_ms"] = statistics.median(base_times) * 1e3
    return result


def measure_paired(name: str, configs: dict[str, Config], steps: int, warmup: int) -> dict:
    """Mean step time / uninstrumented, one step of each configuration in turn.

    Each configuration trains its own copy of the model (same initial weights), so
    all of them are alive at once and the machine's drift is shared step by step:
    far less noise than blocks, for tools that can run side by side (nbviz can).
    """
    make, batch = WORKLOADS[name]
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    totals = dict.fromkeys(configs, 0.0)
    with tempfile.TemporaryDirectory() as d, contextlib.ExitStack() as stack:
        loops = []
        for key, config in configs.items():
            torch.manual_seed(0)
            model = make()
            opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
            tmp = Path(d) / key.replace(" ", "_").replace("=", "")
            tmp.mkdir()
            loops.append((key, model, opt, stack.enter_context(config(model, tmp))))
        for i in range(warmup + steps):
            for key, model, opt, after in loops:
                t0 = time.perf_counter()
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                after(i, loss)
                if i >= warmup:
                    totals[key] += time.perf_counter() - t0
    base = totals["uninstrumented"]
    result = {k: v / base for k, v in totals.items()}
    result["_base_ms"] = base / steps * 1e3
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--steps", type=int, default=50, help="steps per block and config")
    parser.add_argument(
        "--warmup",
        type=int,
        default=10,
        help="untimed steps per block before timing (covers each tool's first, one-off log)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    parser.add_argument("--only-nbviz", action="store_true", help="skip TensorBoard and wandb")
    parser.add_argument(
        "--paired",
        type=int,
        default=0,
        metavar="STEPS",
        help="instead of blocks: nbviz configurations only, one step of each in turn for "
        "STEPS steps (a multiple of 50 holds whole capture periods); the mean ratio",
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    configs: dict[str, Config | None] = {
        "uninstrumented": baseline,
        "nbviz defaults": nbviz_config(),
        "nbviz every=1": nbviz_config(every=1),
    }
    if not args.only_nbviz:
        configs.update(
            {
                "TensorBoard histograms every step": tensorboard_config(1),
                "TensorBoard histograms every 10": tensorboard_config(10),
                "wandb.watch log=all, log_freq=1": wandb_config(1),
                "wandb.watch log=all, log_freq=10": wandb_config(10),
            }
        )
    missing = [k for k, v in configs.items() if v is None]
    active = {k: v for k, v in configs.items() if v is not None}
    if args.paired:
        active = {k: v for k, v in active.items() if k == "uninstrumented" or "nbviz" in k}
        missing = []
        results = {
            name: measure_paired(name, active, args.paired, args.warmup) for name in WORKLOADS
        }
        how = (
            f"mean over {args.paired} steps, one step of each configuration in turn, "
            f"after {args.warmup} warm-up steps"
        )
    else:
        results = {
            name: measure(name, active, args.blocks, args.steps, args.warmup) for name in WORKLOADS
        }
        how = (
            f"median of {args.blocks} interleaved blocks of {args.steps} steps "
            f"after {args.warmup} warm-up steps"
        )
    print(f"\nstep time / uninstrumented ({how}; torch threads {torch.get_num_threads()})\n")
    print(f"| {'configuration':<36} | {'CNN':>7} | {'MLP':>7} |")
    print(f"|{'-' * 38}|{'-' * 9}|{'-' * 9}|")
    for key in active:
        cnn, mlp = results["CNN"][key], results["MLP"][key]
        print(f"| {key:<36} | {cnn:>6.3f}x | {mlp:>6.3f}x |")
    print(
        f"\nuninstrumented step: CNN {results['CNN']['_base_ms']:.1f} ms, "
        f"MLP {results['MLP']['_base_ms']:.1f} ms"
    )
    print("targets: nbviz defaults <= 1.05x on both; every=1 <= 1.5x (CNN), <= 2x (MLP)")
    for key in missing:
        print(f"(not measured: {key} - package not installed; run `make bench`)")


if __name__ == "__main__":
    main()
