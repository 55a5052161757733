"""Probe overhead: training-step time with instrumentation / without, side by side.

Workloads (synthetic data, SGD, CPU): an MNIST-style CNN (2 conv + 2 fc, 1x28x28,
batch 64) and an MLP 784-512-512-512-10 (batch 256).

    python benchmarks/probe_overhead.py [--blocks 12] [--seconds 60] [--steps 50] [--warmup 60]
    python benchmarks/probe_overhead.py --paired 1000   # one step of each in turn

Every configuration trains its own copy of the model (same initial weights) and
is set up once, before anything is timed; each then runs ``--warmup`` untimed
steps, so one-off work at a tool's start (nbviz fixes histogram ranges at its
first capture, wandb starts its service) is not counted as per-step overhead.
Then come interleaved blocks: in each block every configuration runs ``--steps``
steps in turn (the order rotates from block to block), and the table shows the
median over blocks of each configuration's block time / the uninstrumented
block time. There are at least ``--blocks`` blocks, more while the group has
run for less than ``--seconds``, so that quick configurations (the MLP's) get as
many seconds of measurement as slow ones and their median is as steady. With
``--steps`` a multiple of the default capture period (50), every timed block
holds exactly one nbviz capture at the defaults.

Each tool is measured in its own group (nbviz, TensorBoard, wandb), each group
with its own uninstrumented copy interleaved with it. Tools work in the
background too (TensorBoard's writer thread, wandb's service process); on a
small machine that work lands in whichever block runs next, so a tool sharing
blocks with another would be charged for the other's background work. Within a
group it lands in the group's uninstrumented blocks as well, which if anything
lowers that tool's ratio.

``--paired STEPS`` interleaves single steps instead (one step of each
configuration of a group in turn), so a change in the machine's speed (large on
shared machines) hits all of them alike; the table shows the ratio of total
times.

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
) -> dict[str, float]:
    """Per configuration, its time / the uninstrumented time (see the module docstring).

    ``steps`` > 1: the median of per-block ratios over at least ``blocks`` blocks,
    more until ``seconds`` have passed; ``steps`` == 1 (paired): the ratio of total
    times over ``blocks`` steps.
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
            # rotate the order so no configuration always runs first or last
            order = loops[b % len(loops) :] + loops[: b % len(loops)]
            for key, model, opt, after in order:
                t0 = time.perf_counter()
                for i in range(steps):
                    after(step + i, train_step(model, opt, x, y))
                times[key].append(time.perf_counter() - t0)
            step += steps
            b += 1
    base = times["uninstrumented"]
    if steps == 1:
        result = {k: sum(v) / sum(base) for k, v in times.items()}
    else:
        result = {
            k: statistics.median(t / b for t, b in zip(v, base, strict=True))
            for k, v in times.items()
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
        "--paired",
        type=int,
        default=0,
        metavar="STEPS",
        help="instead of blocks: one step of each configuration in turn for STEPS steps "
        "(a multiple of 50 holds whole capture periods); the ratio of total times",
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    shared_wandb = SharedWandbRun()
    groups: list[dict[str, Config | None]] = [
        {"nbviz defaults": nbviz_config(), "nbviz every=1": nbviz_config(every=1)},
    ]
    if not args.only_nbviz:
        groups += [
            {
                "TensorBoard histograms every step": tensorboard_config(1),
                "TensorBoard histograms every 10": tensorboard_config(10),
            },
            {
                "wandb.watch log=all, log_freq=1": wandb_config(1, shared_wandb),
                "wandb.watch log=all, log_freq=10": wandb_config(10, shared_wandb),
            },
        ]
    missing = [k for group in groups for k, v in group.items() if v is None]
    if args.paired:
        blocks, steps = args.paired, 1
        how = f"{args.paired} steps, one step of each configuration in turn; ratio of totals"
    else:
        blocks, steps = args.blocks, args.steps
        how = (
            f"median of interleaved blocks of {args.steps} steps, at least {args.blocks} "
            f"and {args.seconds:g} s per group"
        )
    results: dict[str, dict[str, float]] = {name: {} for name in WORKLOADS}
    counts: dict[str, list[int]] = {name: [] for name in WORKLOADS}
    for name in WORKLOADS:
        for group in groups:
            active = {k: v for k, v in group.items() if v is not None}
            if active:
                measured = measure(
                    name,
                    {"uninstrumented": baseline, **active},
                    blocks,
                    steps,
                    args.warmup,
                    0.0 if args.paired else args.seconds,
                )
                base_ms, n = measured.pop("_base_ms"), measured.pop("_blocks")
                results[name].setdefault("_base_ms", base_ms)  # the first (nbviz) group's
                results[name].update(measured)
                counts[name].append(n)
    keys = [k for k in results["CNN"] if not k.startswith("_")]
    print(
        f"\nstep time / uninstrumented ({how}; after {args.warmup} warm-up steps of each; "
        f"torch threads {torch.get_num_threads()})\n"
    )
    print(f"| {'configuration':<36} | {'CNN':>7} | {'MLP':>7} |")
    print(f"|{'-' * 38}|{'-' * 9}|{'-' * 9}|")
    for key in keys:
        cnn, mlp = results["CNN"][key], results["MLP"][key]
        print(f"| {key:<36} | {cnn:>6.3f}x | {mlp:>6.3f}x |")
    print(
        f"\nuninstrumented step: CNN {results['CNN']['_base_ms']:.1f} ms, "
        f"MLP {results['MLP']['_base_ms']:.1f} ms"
    )
    if not args.paired:
        print(
            "blocks per group (nbviz, TensorBoard, wandb): "
            + "; ".join(f"{name} {'/'.join(map(str, n))}" for name, n in counts.items())
        )
    print("targets: nbviz defaults <= 1.05x on both; every=1 <= 1.5x (CNN), <= 2x (MLP)")
    for key in missing:
        print(f"(not measured: {key} - package not installed; run `make bench`)")


if __name__ == "__main__":
    main()
