"""Probe overhead: training-step time with instrumentation / without, side by side.

Workloads (``reference_models.py``; synthetic data, CPU): an MNIST-style CNN
(batch 64) and an MLP 784-512-512-512-10 (batch 256), both with SGD; a GPT-style
causal language model of 4 pre-norm blocks (batch 8 x 64 tokens) and an
``nn.TransformerEncoder`` text classifier (batch 16 x 64 tokens), both with AdamW.

    python benchmarks/probe_overhead.py [--method blocks|steps|both] [--blocks 12]
        [--seconds 60] [--steps 100] [--warmup 60] [--models CNN GPT] [--quick]

Every configuration trains its own copy of the model (same initial weights),
set up once before anything is timed; each then runs ``--warmup`` untimed steps
and flushes, so one-off work at a tool's start (nbviz fixes histogram ranges at
its first capture, wandb starts its service) is not counted as per-step overhead.
Each tool is measured in its own group (nbviz, TensorBoard, wandb) beside an
uninstrumented copy of the model; every configuration logs the loss each step
(the baseline does not: it is the training step alone).

``--method blocks`` (the default, and the method the targets are stated in):
blocks of ``--steps`` steps, each ending in the tool's flush (``run.flush()``,
TensorBoard's ``SummaryWriter.flush()``, and for wandb, which has no flush, a
``run.status()`` round trip to its service process, answered after the records
sent before it), so a writer thread's or process's work is charged to the steps
that made it; uninstrumented and instrumented blocks alternate, and a block's
ratio is to the mean of the uninstrumented blocks on either side of it.

``--method steps`` (the earlier method): nbviz's configurations take turns step
by step inside a block and nothing is flushed, so the writer thread's work lands
wherever it runs; TensorBoard's and wandb's configurations run their blocks in
one go, the order rotating. ``both`` prints a table for each.

The table shows the median over blocks of the ratios, with their quartiles.
With ``--steps`` a multiple of the default capture period (50) every block
holds the same captures. There are at least ``--blocks`` rounds, more while a
group has run for less than ``--seconds``, so quick models get as many seconds
of measurement as slow ones. ``--quick`` (2 rounds of 10 steps, no minimum
time) proves every row works and measures nothing worth quoting.

TensorBoard and wandb columns appear when those packages are installed
(``pip install -e '.[bench]'``, done by ``make bench``); wandb allows one run
per process, so both wandb configurations watch their model in one offline run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from harness import (
    CLOCKS,
    Hooks,
    Ratios,
    Table,
    Tool,
    alternating_blocks,
    interleaved_steps,
    nbviz_tool,
    open_loops,
    ratio_cell,
    rotating_blocks,
    scratch,
    uninstrumented,
    use_clock,
)
from reference_models import WORKLOADS
from torch import nn

TARGETS = (
    "targets (blocks method): nbviz defaults <= 1.05x on every model (aim 1.03x); "
    "every=1 <= 1.5x on the CNN, the MLP and the GPT-style model"
)


def tensorboard_tool(every: int) -> Tool | None:
    """``add_histogram`` of every parameter and gradient every ``every`` steps."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None

    @contextlib.contextmanager
    def make(model: nn.Module, tmp: Path) -> Iterator[Hooks]:
        writer = SummaryWriter(str(tmp / "tb"))

        def after(step: int, loss: torch.Tensor) -> None:
            writer.add_scalar("train_loss", loss.item(), step)
            if step % every == 0:
                for name, p in model.named_parameters():
                    writer.add_histogram(name, p, step)
                    if p.grad is not None:
                        writer.add_histogram(f"{name}.grad", p.grad, step)

        try:
            yield Hooks(after=after, flush=writer.flush)
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

    def flush(self) -> None:
        """wandb has no flush: a status request is answered by its service process
        after the records sent before it."""
        self.run.status()

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


def wandb_tool(log_freq: int, shared: SharedWandbRun) -> Tool | None:
    """``wandb.watch(model, log="all", log_freq=log_freq)``, offline."""
    try:
        import wandb
    except ImportError:
        return None

    @contextlib.contextmanager
    def make(model: nn.Module, tmp: Path) -> Iterator[Hooks]:
        with shared.use(tmp):
            wandb.watch(model, log="all", log_freq=log_freq)
            key = f"train_loss_{log_freq}"
            try:
                yield Hooks(
                    after=lambda step, loss: shared.log({key: loss.item()}), flush=shared.flush
                )
            finally:
                wandb.unwatch(model)

    return make


@dataclass
class Group:
    """Configurations measured beside one uninstrumented loop. With ``--method steps``,
    ``by_step`` groups take turns step by step, the others block by block."""

    tools: dict[str, Tool | None]
    by_step: bool


def groups(only_nbviz: bool) -> list[Group]:
    nbviz = {
        "nbviz defaults": nbviz_tool(),
        # histograms every 10th step (the default below every=10), then at every step
        "nbviz every=1": nbviz_tool(every=1),
        "nbviz every=1, hist_every=1": nbviz_tool(every=1, hist_every=1),
    }
    out = [Group(nbviz, True)]
    if not only_nbviz:
        shared = SharedWandbRun()
        out += [
            Group(
                {
                    "TensorBoard histograms every step": tensorboard_tool(1),
                    "TensorBoard histograms every 10": tensorboard_tool(10),
                },
                False,
            ),
            Group(
                {
                    "wandb.watch log=all, log_freq=1": wandb_tool(1, shared),
                    "wandb.watch log=all, log_freq=10": wandb_tool(10, shared),
                },
                False,
            ),
        ]
    return out


def measure(model: str, group: Group, method: str, args: argparse.Namespace) -> Ratios:
    """One group on one workload, by ``method`` ("blocks" or "steps")."""
    tools = {k: v for k, v in group.tools.items() if v is not None}
    print(f"  {model}: {', '.join(tools)} ({method})", file=sys.stderr, flush=True)
    with scratch("nbviz-overhead-") as tmp, contextlib.ExitStack() as stack:
        base, *watched = open_loops(
            WORKLOADS[model],
            {"uninstrumented": uninstrumented, **tools},
            tmp,
            stack,
            warmup=args.warmup,
            align=args.steps,
        )
        if method == "blocks":
            return alternating_blocks(base, watched, args.steps, args.blocks, args.seconds)
        by = interleaved_steps if group.by_step else rotating_blocks
        return by(base, watched, args.steps, args.blocks, args.seconds)


def report(method: str, models: list[str], measured: dict[str, list[Ratios]], args) -> None:
    how = {
        "blocks": "uninstrumented and instrumented blocks alternating, each ending in the "
        "tool's flush",
        "steps": "nbviz's configurations taking turns step by step, the others block by "
        "block, nothing flushed",
    }[method]
    print(
        f"\nstep time / uninstrumented, method {method!r}: median [quartiles] of block ratios, "
        f"blocks of {args.steps} steps, {how}; at least {args.blocks} rounds and "
        f"{args.seconds:g} s per group, after {args.warmup} warm-up steps; "
        f"torch threads {torch.get_num_threads()}; timed by "
        + ("wall clock" if args.clock == "wall" else "this process's CPU time, all threads")
        + "\n"
    )
    table = Table(["configuration", *models], [33] + [22] * len(models))
    names = [name for ratios in measured[models[0]] for name in ratios.ratios]
    for name in names:
        cells = [
            ratio_cell(next(r.ratios[name] for r in measured[m] if name in r.ratios))
            for m in models
        ]
        table.row(name, *cells)
    print(
        "\nuninstrumented step: "
        + ", ".join(f"{m} {measured[m][0].base_ms:.1f} ms" for m in models)
    )
    print(
        "blocks per group (nbviz, TensorBoard, wandb): "
        + "; ".join(f"{m} {'/'.join(str(r.blocks) for r in measured[m])}" for m in models)
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--method",
        choices=("blocks", "steps", "both"),
        default="blocks",
        help="blocks ending in a flush, alternating (default); the configurations taking "
        "turns step by step; or both, one table each",
    )
    parser.add_argument("--blocks", type=int, default=12, help="rounds at least")
    parser.add_argument(
        "--seconds",
        type=float,
        default=60.0,
        help="more rounds while a group (per workload) has run for less than this",
    )
    parser.add_argument("--steps", type=int, default=100, help="steps per block")
    parser.add_argument(
        "--warmup",
        type=int,
        default=60,
        help="untimed steps of each configuration before timing (covers each tool's "
        "one-off start: at least one nbviz capture)",
    )
    parser.add_argument("--models", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    parser.add_argument("--only-nbviz", action="store_true", help="skip TensorBoard and wandb")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="time blocks by wall clock (default) or by this process's CPU time (all its "
        "threads, the writer's included): steadier on a machine busy with other work",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: 2 rounds of 10 steps after 5 warm-up steps, no minimum time",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.blocks, args.steps, args.warmup, args.seconds = 2, 10, 5, 0.0
    if args.threads:
        torch.set_num_threads(args.threads)
    use_clock(args.clock)
    chosen = groups(args.only_nbviz)
    methods = ["blocks", "steps"] if args.method == "both" else [args.method]
    for method in methods:
        measured = {
            m: [measure(m, g, method, args) for g in chosen if any(g.tools.values())]
            for m in args.models
        }
        report(method, args.models, measured, args)
    print(TARGETS)
    for group in chosen:
        for name, tool in group.tools.items():
            if tool is None:
                print(f"(not measured: {name} - package not installed; run `make bench`)")


if __name__ == "__main__":
    main()
