"""Probe overhead under DDP: step time with the probe / without, on 2 ranks (CPU, gloo).

The reference CNN and MLP (``reference_models.py``; ``--models`` adds the
transformers), each wrapped in DistributedDataParallel on every rank (per-rank
batch 64 and 256, synthetic data, one torch thread per rank). Measured as
``probe_overhead.py`` measures by default: blocks of ``--steps`` steps, each
ending in ``run.flush()``, uninstrumented and instrumented blocks alternating,
the median of the block ratios; a barrier starts every timed block and the
slowest rank's time is the block's. It also reports what combining the ranks
costs at each capture step (one ``all_gather`` of a few kilobytes and its
bookkeeping), measured inside the probe. Compare with
``probe_overhead.py --threads 1`` (the same thread count).

    python benchmarks/ddp_overhead.py [--nproc 2] [--blocks 6] [--steps 100] [--warmup 60]
        [--models CNN MLP] [--quick]

It starts ``torch.distributed.run --standalone`` itself; the ranks print nothing
but rank 0's table.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from harness import (
    Loop,
    Sync,
    Table,
    alternating_blocks,
    nbviz_tool,
    open_loops,
    ratio_cell,
    scratch,
    uninstrumented,
)
from reference_models import WORKLOADS

from nbviz.probes import distributed as dd

#: Seconds spent in dd.combine_ranks, per call, since the last block ended.
COMBINE_TIMES: list[float] = []


def _timed_combine() -> None:
    """Wrap dd.combine_ranks to record its wall time (the probe calls it through the module)."""
    inner = dd.combine_ranks

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            COMBINE_TIMES.append(time.perf_counter() - t0)

    dd.combine_ranks = timed


def measure(name: str, args: argparse.Namespace) -> tuple[dict[str, list[float]], float, float]:
    """(block ratios per configuration, median baseline step ms, median combine ms)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    tools = {
        "uninstrumented": uninstrumented,
        "nbviz defaults": nbviz_tool(),
        "nbviz every=1": nbviz_tool(every=1),
    }
    combine: list[float] = []

    def observe(loop: Loop, seconds: float) -> None:
        if loop.name == "nbviz defaults":
            combine.extend(COMBINE_TIMES)
        COMBINE_TIMES.clear()

    with scratch(f"nbviz-ddp-{dist.get_rank()}-") as tmp, contextlib.ExitStack() as stack:
        base, *watched = open_loops(
            WORKLOADS[name],
            tools,
            tmp,
            stack,
            warmup=args.warmup,
            align=args.steps,
            wrap=DDP,
            batch_seed=dist.get_rank(),
        )
        COMBINE_TIMES.clear()  # the warm-up's, with the histograms' first capture
        # every rank runs the same blocks: a fixed number of rounds, no time limit
        ratios = alternating_blocks(
            base, watched, args.steps, args.blocks, sync=Sync(), observe=observe
        )
    combine_ms = statistics.median(combine) * 1e3 if combine else float("nan")
    return ratios.ratios, ratios.base_ms, combine_ms


def _ms(value: float) -> str:
    return "no capture in the timed blocks" if value != value else f"{value:.2f} ms"


def worker(args: argparse.Namespace) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    _timed_combine()
    results = {name: measure(name, args) for name in args.models}
    if dist.get_rank() == 0:
        print(
            f"\nDDP on {dist.get_world_size()} ranks (gloo, CPU, 1 thread each): step time / "
            f"uninstrumented (median [quartiles] of block ratios, {args.blocks} rounds of "
            f"{args.steps}-step blocks ending in run.flush(), uninstrumented and instrumented "
            f"blocks alternating, after {args.warmup} warm-up steps)\n"
        )
        table = Table(["configuration", *args.models], [16] + [22] * len(args.models))
        for key in results[args.models[0]][0]:
            table.row(key, *(ratio_cell(results[m][0][key]) for m in args.models))
        print(
            "\nuninstrumented DDP step: "
            + ", ".join(f"{m} {results[m][1]:.1f} ms" for m in args.models)
        )
        print(
            "combining the ranks at a capture step (one all_gather + bookkeeping, median): "
            + ", ".join(f"{m} {_ms(results[m][2])}" for m in args.models)
        )
        print("target: the single-process budget (<= 1.05x at the defaults) plus the above")
    dist.barrier()
    dist.destroy_process_group()
    # gloo's worker thread may still be dropping the barrier's work when the main thread
    # returns, and aborts if that lands in interpreter shutdown: the table is printed, leave.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nproc", type=int, default=2, help="ranks to launch")
    parser.add_argument("--blocks", type=int, default=6, help="rounds")
    parser.add_argument("--steps", type=int, default=100, help="steps per block")
    parser.add_argument("--warmup", type=int, default=60, help="untimed steps per configuration")
    parser.add_argument("--models", nargs="+", choices=list(WORKLOADS), default=["CNN", "MLP"])
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 2 rounds of 10 steps, 5 warm-up"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.blocks, args.steps, args.warmup = 2, 10, 5
    if args.worker or "LOCAL_RANK" in os.environ:
        worker(args)
        return
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={args.nproc}",
        str(Path(__file__).resolve()),
        "--worker",
        f"--blocks={args.blocks}",
        f"--steps={args.steps}",
        f"--warmup={args.warmup}",
        "--models",
        *args.models,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    sys.exit(subprocess.run(cmd, env=env, check=False).returncode)


if __name__ == "__main__":
    main()
