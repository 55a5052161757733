"""What the benchmarks share: training loops under a tool, timed blocks measured
against a baseline in the same run, ratios, tables and scratch directories.

A *tool* is what instruments a training loop (nbviz, TensorBoard, wandb, or
nothing): a context manager factory ``tool(model, tmp)`` that yields ``Hooks``,
the per-step work it adds after ``optimizer.step()`` and the flush that waits
for its background work. A ``Loop`` trains its own copy of a reference model
(``reference_models.WORKLOADS``) under one tool.

Two ways to measure a tool against the uninstrumented loop:

- ``alternating_blocks`` (the method the overhead targets are stated in):
  blocks of steps that each end in the tool's flush, so the work of a
  background thread or process is charged to the steps that made it;
  watched and unwatched blocks alternate, and each watched block's ratio is
  to the mean of the unwatched blocks on either side of it.
- ``interleaved_steps``: the configurations take turns step by step inside a
  block, nothing is flushed; a change in the machine's speed hits them alike,
  but background work lands wherever it happens to run.

``rotating_blocks`` runs each configuration's block in one go, the order
rotating per round, without flushing: how TensorBoard and wandb were measured
beside ``interleaved_steps``.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from reference_models import Workload
from torch import nn

# run from a checkout without installing: this tree's nbviz comes first
_SRC = str(Path(__file__).resolve().parent.parent / "src")
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

import nbviz  # noqa: E402

MAX_ROUNDS = 400

#: What a block is timed by: ``wall`` (time.perf_counter, the default) or ``cpu``
#: (time.process_time: CPU seconds of every thread of this process, the writer's
#: included). On a machine that other work keeps busy, wall-clock ratios mostly
#: measure the other work; CPU-time ratios stay close to what the steps cost.
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
_clock: list[Callable[[], float]] = [time.perf_counter]


def use_clock(name: str) -> None:
    """Time the blocks by ``name`` (a key of :data:`CLOCKS`)."""
    _clock[0] = CLOCKS[name]


# ----------------------------------------------------------------- tools and loops


@dataclass
class Hooks:
    """What a tool adds to a training loop."""

    after: Callable[[int, torch.Tensor], None] = lambda step, loss: None
    flush: Callable[[], None] = lambda: None


Tool = Callable[[nn.Module, Path], contextlib.AbstractContextManager[Hooks]]


@contextlib.contextmanager
def uninstrumented(model: nn.Module, tmp: Path) -> Iterator[Hooks]:
    """The baseline: the training step alone (no logging either)."""
    yield Hooks()


def nbviz_tool(**watch: Any) -> Tool:
    """A run watching the model with ``watch`` options; logs the loss every step."""

    @contextlib.contextmanager
    def make(model: nn.Module, tmp: Path) -> Iterator[Hooks]:
        run = nbviz.Run(tmp / "nbviz")
        probe = run.watch(model, **watch)
        try:
            yield Hooks(after=lambda step, loss: run.log(step, train_loss=loss), flush=run.flush)
        finally:
            probe.close()
            run.close()

    return make


@dataclass
class Loop:
    """One configuration: its own copy of a workload's model, trained under one tool."""

    name: str
    workload: Workload
    model: nn.Module
    opt: torch.optim.Optimizer
    batch: tuple[torch.Tensor, torch.Tensor]
    hooks: Hooks
    step: int = 0

    def run(self, steps: int) -> None:
        x, y = self.batch
        for _ in range(steps):
            self.hooks.after(self.step, self.workload.step(self.model, self.opt, x, y))
            self.step += 1

    def block(self, steps: int, flush: bool = True, sync: Sync | None = None) -> float:
        """Seconds for ``steps`` steps (and the tool's flush, with ``flush``)."""
        if sync is not None:
            sync.start()
        clock = _clock[0]
        t0 = clock()
        self.run(steps)
        if flush:
            self.hooks.flush()
        elapsed = clock() - t0
        return elapsed if sync is None else sync.slowest(elapsed)


def open_loops(
    workload: Workload,
    tools: dict[str, Tool],
    tmp: Path,
    stack: contextlib.ExitStack,
    *,
    warmup: int,
    align: int,
    seed: int = 0,
    wrap: Callable[[nn.Module], nn.Module] = lambda model: model,
    batch_seed: int = 0,
) -> list[Loop]:
    """A loop per tool, each on a model with the same initial weights, warmed up.

    Each runs ``warmup`` untimed steps and flushes (one-off work at a tool's
    start is not per-step overhead), then numbers its steps from a multiple of
    ``align`` so that every block of ``align`` steps holds the same captures.
    ``wrap`` wraps each model (e.g. in DistributedDataParallel).
    """
    loops = []
    for name, tool in tools.items():
        torch.manual_seed(seed)
        model = wrap(workload.model())
        opt = workload.optimizer(model.parameters())
        where = tmp / "".join(c if c.isalnum() else "_" for c in name)
        where.mkdir(parents=True)
        hooks = stack.enter_context(tool(model, where))
        loops.append(Loop(name, workload, model, opt, workload.batch(batch_seed), hooks))
    for loop in loops:
        loop.run(warmup)
        loop.hooks.flush()
        loop.step += -loop.step % align
    return loops


# ----------------------------------------------------------------- measuring


class Sync:
    """Keeps the ranks of a distributed job in step: a barrier before each timed
    block, and the slowest rank's time as the block's."""

    def start(self) -> None:
        import torch.distributed as dist

        dist.barrier()

    def slowest(self, seconds: float) -> float:
        import torch.distributed as dist

        t = torch.tensor([seconds], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t)


@dataclass
class Ratios:
    """Block time / baseline block time, per configuration, block by block."""

    steps: int
    ratios: dict[str, list[float]] = field(default_factory=dict)
    base_seconds: list[float] = field(default_factory=list)

    @property
    def base_ms(self) -> float:
        """The median baseline step, in milliseconds."""
        return statistics.median(self.base_seconds) / self.steps * 1e3

    @property
    def blocks(self) -> int:
        return min((len(v) for v in self.ratios.values()), default=0)


def rounds(min_rounds: int, seconds: float) -> Iterator[int]:
    """At least ``min_rounds``, more while fewer than ``seconds`` have passed."""
    start = time.perf_counter()
    r = 0
    while r < min_rounds or (time.perf_counter() - start < seconds and r < MAX_ROUNDS):
        yield r
        r += 1


def rotated(items: Sequence[Any], r: int) -> list[Any]:
    """``items`` rotated by ``r``: no configuration always goes first or last."""
    r %= max(len(items), 1)
    return list(items[r:]) + list(items[:r])


def alternating_blocks(
    base: Loop,
    watched: Sequence[Loop],
    steps: int,
    min_rounds: int,
    seconds: float = 0.0,
    *,
    sync: Sync | None = None,
    observe: Callable[[Loop, float], None] | None = None,
) -> Ratios:
    """Unwatched and watched blocks alternating, each ending in its tool's flush.

    The sequence is base, w1, base, w2, base, w1, ... (the watched order
    rotating per round); a watched block's ratio is its time over the mean of
    the two base blocks around it, which cancels a drift of the machine's speed.
    ``observe(loop, seconds)`` is called after every block. Under ``sync`` the
    ranks must agree on the number of rounds: pass ``seconds=0``.
    """
    out = Ratios(steps, {loop.name: [] for loop in watched})

    def timed(loop: Loop) -> float:
        t = loop.block(steps, sync=sync)
        if observe is not None:
            observe(loop, t)
        return t

    before = timed(base)
    out.base_seconds.append(before)
    for r in rounds(min_rounds, seconds):
        for loop in rotated(watched, r):
            t = timed(loop)
            after = timed(base)
            out.base_seconds.append(after)
            out.ratios[loop.name].append(t / ((before + after) / 2))
            before = after
    return out


def interleaved_steps(
    base: Loop, watched: Sequence[Loop], steps: int, min_rounds: int, seconds: float = 0.0
) -> Ratios:
    """Blocks in which every configuration takes its turn step by step (the order
    rotating per step); a block's time is the sum of its steps' times. Nothing is
    flushed: a tool's background work is charged to whichever step it overlaps."""
    loops = [base, *watched]
    out = Ratios(steps, {loop.name: [] for loop in watched})
    for _ in rounds(min_rounds, seconds):
        spent = dict.fromkeys((loop.name for loop in loops), 0.0)
        for i in range(steps):
            for loop in rotated(loops, i):
                spent[loop.name] += loop.block(1, flush=False)
        out.base_seconds.append(spent[base.name])
        for loop in watched:
            out.ratios[loop.name].append(spent[loop.name] / spent[base.name])
    return out


def rotating_blocks(
    base: Loop, watched: Sequence[Loop], steps: int, min_rounds: int, seconds: float = 0.0
) -> Ratios:
    """Each configuration's block in one go, the order rotating per round, nothing
    flushed; ratios to the base block of the same round."""
    loops = [base, *watched]
    out = Ratios(steps, {loop.name: [] for loop in watched})
    for r in rounds(min_rounds, seconds):
        spent = {loop.name: loop.block(steps, flush=False) for loop in rotated(loops, r)}
        out.base_seconds.append(spent[base.name])
        for loop in watched:
            out.ratios[loop.name].append(spent[loop.name] / spent[base.name])
    return out


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


# ----------------------------------------------------------------- reporting


def ratio_cell(ratios: Sequence[float]) -> str:
    """``median x [first quartile, third quartile]`` of block ratios."""
    if not ratios:
        return "-"
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return f"{statistics.median(ratios):.3f}x [{q1:.2f}, {q3:.2f}]"


class Table:
    """A Markdown table printed row by row, so a long benchmark shows each row as
    soon as it is measured. ``widths`` pads the columns (at least the headers')."""

    def __init__(self, columns: Sequence[str], widths: Sequence[int] | None = None) -> None:
        self.widths = [max(len(c), w) for c, w in zip(columns, widths or [0] * len(columns))]
        self.columns = list(columns)
        self._started = False

    def _line(self, cells: Sequence[Any]) -> str:
        return "| " + " | ".join(f"{c!s:<{w}}" for c, w in zip(cells, self.widths)) + " |"

    def row(self, *cells: Any) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"Table.row: {len(cells)} cells for {len(self.columns)} columns")
        if not self._started:
            print(self._line(self.columns))
            print("|" + "|".join("-" * (w + 2) for w in self.widths) + "|")
            self._started = True
        print(self._line(cells), flush=True)


def print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A whole Markdown table, its columns as wide as their widest cell."""
    widths = [max((len(str(r[i])) for r in rows), default=0) for i in range(len(columns))]
    table = Table(columns, widths)
    for r in rows:
        table.row(*r)


@contextlib.contextmanager
def scratch(prefix: str, keep: Path | None = None, within: Path | None = None) -> Iterator[Path]:
    """A fresh directory for a benchmark's runs (inside ``within`` if given), removed
    afterwards; or ``keep``, created if needed and left in place."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=within))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
