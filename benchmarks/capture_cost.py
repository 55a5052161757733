"""Where a capture step's time goes: CPU milliseconds per capture of each part of the probe.

Each listed part of the probe is timed by this thread's CPU time
(``time.thread_time``) while a reference model (``reference_models.py``) trains
with ``run.watch(model, every=1)``, beside an unwatched copy stepped in turn; the
writer thread's work (encoding and SQLite) is timed in that thread. CPU time of
one thread is little moved by other work on the machine, where wall-clock ratios
are (``probe_overhead.py --clock cpu`` is the other way to see it).

    python benchmarks/capture_cost.py [--models GPT CNN] [--steps 40] [--threads 1]

A part's time includes the parts it calls (``fwd hooks`` holds the forward's
statistics, ``record`` the weights, the host copy, ``combine`` and ``emit``);
each part is counted once where it calls itself.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from harness import Table, scratch
from reference_models import WORKLOADS

_SRC = str(Path(__file__).resolve().parent.parent / "src")
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

import nbviz  # noqa: E402
from nbviz.probes import heads, stats  # noqa: E402
from nbviz.probes.probe import Probe  # noqa: E402
from nbviz.store import writer  # noqa: E402

#: (part, owner, attribute): the probe's parts, in the order a step runs them.
PARTS: list[tuple[str, Any, str]] = [
    ("start step (weights copied)", Probe, "_start_step"),
    ("heads mode on", heads.HeadStats, "begin"),
    ("fwd hooks", Probe, "_on_output"),
    ("heads' reductions", heads.HeadStats, "add"),
    ("heads mode off", heads.HeadStats, "end"),
    ("bwd hooks (output gradients)", Probe, "_on_output_grad"),
    ("after backward (parameter gradients)", Probe, "_after_backward"),
    ("record", Probe, "_record_capture"),
    ("  weights", stats.StepCapture, "add_raw_many"),
    ("  host copy (histograms binned)", stats.StepCapture, "to_host"),
    ("  combine", stats, "combine"),
    ("  emit rows", Probe, "_emit"),
    ("writer thread (encode, SQLite)", writer, "_execute"),
]


class Timers:
    """CPU time per part, each part timed once when it calls itself."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = collections.defaultdict(float)
        self._inside: set[str] = set()
        self._undo: list[tuple[Any, str, Any]] = []

    def wrap(self, part: str, owner: Any, attr: str) -> None:
        fn = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            if part in self._inside:
                return fn(*args, **kwargs)
            self._inside.add(part)
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.ms[part] += 1000 * (time.thread_time() - t0)
                self._inside.discard(part)

        self._undo.append((owner, attr, fn))
        setattr(owner, attr, timed)

    def undo(self) -> None:
        for owner, attr, fn in reversed(self._undo):
            setattr(owner, attr, fn)
        self._undo.clear()


def measure(name: str, steps: int, warmup: int) -> dict[str, float]:
    """Per capture: each part's CPU ms, the watched and unwatched steps' main-thread ms."""
    workload = WORKLOADS[name]
    x, y = workload.batch()
    models = []
    for _ in range(2):
        torch.manual_seed(0)
        model = workload.model()
        models.append((model, workload.optimizer(model.parameters())))
    (plain, plain_opt), (model, opt) = models
    timers = Timers()
    for part, owner, attr in PARTS:
        timers.wrap(part, owner, attr)
    step_ms = {"watched step": 0.0, "unwatched step": 0.0}

    def step(key: str, fn: Callable[[], Any], counted: bool) -> None:
        t0 = time.thread_time()
        fn()
        if counted:
            step_ms[key] += 1000 * (time.thread_time() - t0)

    try:
        with scratch("nbviz-capture-cost-") as tmp, nbviz.Run(tmp / "run") as run:
            probe = run.watch(model, every=1)
            for i in range(warmup + steps):
                if i == warmup:
                    run.flush()
                    timers.ms.clear()
                counted = i >= warmup
                step(
                    "watched step",
                    lambda i=i: run.log(i, train_loss=workload.step(model, opt, x, y)),
                    counted,
                )
                step("unwatched step", lambda: workload.step(plain, plain_opt, x, y), counted)
            run.flush()
            probe.close()
    finally:
        timers.undo()
    out = {k: v / steps for k, v in step_ms.items()}
    out.update({part: timers.ms.get(part, 0.0) / steps for part, _, _ in PARTS})
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", choices=list(WORKLOADS), default=["GPT"])
    parser.add_argument("--steps", type=int, default=40, help="captured steps timed")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    measured = {m: measure(m, args.steps, args.warmup) for m in args.models}
    print(
        f"\nCPU ms per capture step, run.watch(model, every=1), {args.steps} steps after "
        f"{args.warmup}, torch threads {args.threads}\n"
    )
    table = Table(["part", *args.models], [38] + [10] * len(args.models))
    rows = ["unwatched step", "watched step"] + [part for part, _, _ in PARTS]
    for row in rows:
        table.row(row, *(f"{measured[m][row]:.2f}" for m in args.models))


if __name__ == "__main__":
    main()
