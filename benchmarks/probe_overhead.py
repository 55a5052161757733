"""Probe overhead: training-step time with instrumentation / without, side by side.

Workloads (synthetic data, SGD, CPU): an MNIST-style CNN (2 conv + 2 fc, 1x28x28,
batch 64) and an MLP 784-512-512-512-10 (batch 256).

    python benchmarks/probe_overhead.py [--blocks 12] [--seconds 60] [--steps 50] [--warmup 60]

Every configuration trains its own copy of the model (same initial weights) and
is set up once, before anything is timed; each then runs ``--warmup`` untimed
steps, so one-off work at a tool's start (nbviz fixes histogram ranges at its
first capture, wandb starts its service) is not counted as per-step overhead.

Each tool is measured in its own group (nbviz, TensorBoard, wandb) beside an
uninstrumented copy of the model, in interleaved blocks of ``--steps`` steps of
every configuration of the group. The table shows the median over blocks of
block time / the uninstrumented block time, with the quartiles of those ratios.
With ``--steps`` a multiple of the default capture period (50), every block
holds exactly one nbviz capture at the defaults. There are at least
``--blocks`` blocks, more while the group has run for less than ``--seconds``,
so that quick configurations (the MLP's) get as many seconds of measurement as
slow ones.

Within a block, nbviz's configurations take turns step by step (the order
rotating), so a change in the machine's speed, large on shared machines, hits
them alike; a block time is then the sum of its steps' times. That is fair to a
tool that works in the foreground: nbviz's writer thread spends about 20 us a
step. TensorBoard and wandb work in the background too (TensorBoard's event
writer thread, wandb's service process): taking turns step by step, that work
would land in the uninstrumented steps. So in their groups each configuration
runs its block's steps in one go (rotating which goes first), and the group
keeps to itself so that its background work is not charged to another tool;
what spills into the next configuration's block still lowers their ratios
somewhat. ``--consecutive`` runs nbviz's blocks in one go as well (its ratios
then scatter more, around the same median).

All configurations log the loss each step (the baseline does not: it is the
training step alone). TensorBoard and wandb columns appear when those packages
are installed (``pip install -e '.[bench]'``, done by ``make bench``); wandb
allows one run per process, so both wandb configurations watch their model in
one offline run.
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
from typing import Any

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
MAX_BLOCKS = 400

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


class SharedWandbRun:
    """One offline wandb run for every wandb configuration of a workload.

    wandb.watch logs through the process's one active run, so configurations
    that are alive at the same time share it, each watching its own model. The
    run's step grows with every log, whichever configuration logs (wandb drops
    a step that does not come after the last one).
    """

    def __init__(self) -> None:
        self.run: Any = None
        self.users = 0
        self.step = 0

    def log(self, values: dict[str, float]) -> None:
        self.run.log(values, step=self.step)
        self.step += 1

    @contextlib.contextmanager
    def use(self, tmp: Path) -> Iterator[Any]:
        import wandb

        if self.run is None:
            os.environ["WANDB_MODE"] = "offline"
            os.environ["WANDB_SILENT"] = "true"
            self.run = wandb.init(project="nbviz-bench", dir=str(tmp), reinit="finish_previous")
        self.users += 1
        try:
            yield self.run
        finally:
            self.users -= 1
            if self.users == 0:
                self.run.finish()
                self.run = None


def wandb_config(log_freq: int, shared: SharedWandbRun) -> Config | None:
    try:
        import wandb
    except ImportError:
        return None

    @contextlib.contextmanager
    def make(model: nn.Module, tmp: Path) -> Iterator[Callable]:
        with shared.use(tmp):
            wandb.watch(model, log="all", log_freq=log_freq)
            key = f"train_loss_{log_freq}"
            try:
                yield lambda step, loss: shared.log({key: loss.item()})
            finally:
                wandb.unwatch(model)

    return make


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x, y) -> torch.Tensor:
    """One plain training step; returns the loss."""
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def measure(
    name: str,
    configs: dict[str, Config],
    blocks: int,
    steps: int,
    warmup: int,
    seconds: float = 0.0,
    consecutive: bool = False,
) -> dict[str, Any]:
    """Per configuration, its block times / the uninstrumented ones, block by block.

    At least ``blocks`` blocks of ``steps`` steps, more until ``seconds`` have
    passed. Within a block the configurations take turns step by step (the order
    rotating), or with ``consecutive`` each runs its ``steps`` steps in one go.
    """
    make, batch = WORKLOADS[name]
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    times: dict[str, list[float]] = {k: [] for k in configs}
    with tempfile.TemporaryDirectory() as d, contextlib.ExitStack() as stack:
        loops = []
        for key, config in configs.items():
            torch.manual_seed(0)
            model = make()
            opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
            tmp = Path(d) / key.replace(" ", "_").replace("=", "").replace(",", "")
            tmp.mkdir()
            loops.append((key, model, opt, stack.enter_context(config(model, tmp))))
        n = len(loops)
        # every configuration counts the same consecutive steps, aligned to the
        # block length after the warm-up so that blocks hold whole capture periods
        step = 0
        for _ in range(warmup):
            for _key, model, opt, after in loops:
                after(step, train_step(model, opt, x, y))
            step += 1
        step += -step % steps
        start = time.perf_counter()
        b = 0
        while b < blocks or (time.perf_counter() - start < seconds and b < MAX_BLOCKS):
            block = dict.fromkeys(configs, 0.0)
            if consecutive:
                # rotate the order so no configuration always runs first or last
                for key, model, opt, after in loops[b % n :] + loops[: b % n]:
                    t0 = time.perf_counter()
                    for i in range(steps):
                        after(step + i, train_step(model, opt, x, y))
                    block[key] = time.perf_counter() - t0
            else:
                for i in range(steps):
                    for key, model, opt, after in loops[i % n :] + loops[: i % n]:
                        t0 = time.perf_counter()
                        after(step + i, train_step(model, opt, x, y))
                        block[key] += time.perf_counter() - t0
            for key, t in block.items():
                times[key].append(t)
            step += steps
            b += 1
    base = times["uninstrumented"]
    result: dict[str, Any] = {
        k: [t / b for t, b in zip(v, base, strict=True)] for k, v in times.items()
    }
    result["_base_ms"] = statistics.median(base) / steps * 1e3
    result["_blocks"] = len(base)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=12, help="blocks at least")
    parser.add_argument(
        "--seconds",
        type=float,
        default=60.0,
        help="more blocks while a group (per workload) has run for less than this",
    )
    parser.add_argument("--steps", type=int, default=50, help="steps per block and config")
    parser.add_argument(
        "--warmup",
        type=int,
        default=60,
        help="untimed steps of each configuration before timing (covers each tool's "
        "one-off start: at least one nbviz capture)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    parser.add_argument("--only-nbviz", action="store_true", help="skip TensorBoard and wandb")
    parser.add_argument(
        "--consecutive",
        action="store_true",
        help="within a block, each configuration runs its steps in one go instead of "
        "taking turns step by step (more exposed to the machine's drift)",
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    shared_wandb = SharedWandbRun()
    # (configurations, whether each runs its block's steps in one go)
    groups: list[tuple[dict[str, Config | None], bool]] = [
        (
            {"nbviz defaults": nbviz_config(), "nbviz every=1": nbviz_config(every=1)},
            args.consecutive,
        ),
    ]
    if not args.only_nbviz:
        groups += [
            (
                {
                    "TensorBoard histograms every step": tensorboard_config(1),
                    "TensorBoard histograms every 10": tensorboard_config(10),
                },
                True,
            ),
            (
                {
                    "wandb.watch log=all, log_freq=1": wandb_config(1, shared_wandb),
                    "wandb.watch log=all, log_freq=10": wandb_config(10, shared_wandb),
                },
                True,
            ),
        ]
    missing = [k for group, _ in groups for k, v in group.items() if v is None]
    how = (
        f"median [quartiles] over blocks of {args.steps} steps, at least {args.blocks} and "
        f"{args.seconds:g} s per group; nbviz's configurations taking turns "
        + ("block by block" if args.consecutive else "step by step")
        + ", the others' block by block"
    )
    results: dict[str, dict[str, Any]] = {name: {} for name in WORKLOADS}
    counts: dict[str, list[int]] = {name: [] for name in WORKLOADS}
    for name in WORKLOADS:
        for group, consecutive in groups:
            active = {k: v for k, v in group.items() if v is not None}
            if active:
                measured = measure(
                    name,
                    {"uninstrumented": baseline, **active},
                    args.blocks,
                    args.steps,
                    args.warmup,
                    args.seconds,
                    consecutive,
                )
                base_ms, n = measured.pop("_base_ms"), measured.pop("_blocks")
                results[name].setdefault("_base_ms", base_ms)  # the first (nbviz) group's
                results[name].update(measured)
                counts[name].append(n)
    keys = [k for k in results["CNN"] if not k.startswith("_")]

    def cell(ratios: list[float]) -> str:
        q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        return f"{statistics.median(ratios):.3f}x [{q1:.2f}, {q3:.2f}]"

    print(
        f"\nstep time / uninstrumented ({how}; after {args.warmup} warm-up steps of each; "
        f"torch threads {torch.get_num_threads()})\n"
    )
    print(f"| {'configuration':<36} | {'CNN':<22} | {'MLP':<22} |")
    print(f"|{'-' * 38}|{'-' * 24}|{'-' * 24}|")
    for key in keys:
        cnn, mlp = cell(results["CNN"][key]), cell(results["MLP"][key])
        print(f"| {key:<36} | {cnn:<22} | {mlp:<22} |")
    print(
        f"\nuninstrumented step: CNN {results['CNN']['_base_ms']:.1f} ms, "
        f"MLP {results['MLP']['_base_ms']:.1f} ms"
    )
    print(
        "blocks per group (nbviz, TensorBoard, wandb): "
        + "; ".join(f"{name} {'/'.join(map(str, n))}" for name, n in counts.items())
    )
    print("targets: nbviz defaults <= 1.05x on both; every=1 <= 1.5x (CNN), <= 2x (MLP)")
    for key in missing:
        print(f"(not measured: {key} - package not installed; run `make bench`)")


if __name__ == "__main__":
    main()
