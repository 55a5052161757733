"""Probe overhead under DDP: step time with the probe / without, on 2 ranks (CPU, gloo).

The reference CNN and MLP of ``probe_overhead.py``, each wrapped in
DistributedDataParallel on every rank (per-rank batch 64 and 256, synthetic
data, SGD, one torch thread per rank). Configurations run in interleaved
blocks; each block measures every configuration and its ratio to the
uninstrumented baseline of the same block, and the table shows the median
ratio. A barrier starts every timed window so all ranks time the same steps.
It also reports what combining the ranks costs at each capture step (one
``all_gather`` of a few kilobytes and its bookkeeping), measured inside the
probe. Compare with ``probe_overhead.py --threads 1`` (the same thread count).

    python benchmarks/ddp_overhead.py [--nproc 2] [--blocks 8] [--steps 10] [--warmup 10]

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
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from probe_overhead import WORKLOADS  # noqa: E402

import nbviz  # noqa: E402
from nbviz.probes import distributed as dd  # noqa: E402

Config = Callable[[nn.Module, nn.Module, Path], contextlib.AbstractContextManager]

#: Seconds spent in dd.combine_ranks, per call, while timing.
COMBINE_TIMES: list[float] = []


@contextlib.contextmanager
def baseline(ddp: nn.Module, opt: torch.optim.Optimizer, tmp: Path) -> Iterator[Callable]:
    yield lambda step, loss: None


def nbviz_config(**watch) -> Config:
    @contextlib.contextmanager
    def make(ddp: nn.Module, opt: torch.optim.Optimizer, tmp: Path) -> Iterator[Callable]:
        run = nbviz.Run(tmp / "nbviz")
        probe = run.watch(ddp, **watch)
        try:
            yield lambda step, loss: run.log(step, train_loss=loss)
        finally:
            probe.close()
            run.close()

    return make


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


def time_block(ddp, opt, x, y, config: Config, steps: int, warmup: int, start: int, tmp: Path):
    import torch.distributed as dist

    with config(ddp, opt, tmp) as after:
        step = start
        for i in range(warmup + steps):
            if i == warmup:
                dist.barrier()
                t0 = time.perf_counter()
            opt.zero_grad()
            loss = nn.functional.cross_entropy(ddp(x), y)
            loss.backward()
            opt.step()
            after(step, loss)
            step += 1
        elapsed = time.perf_counter() - t0
    # the slowest rank sets the pace
    t = torch.tensor([elapsed / steps], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def measure(name: str, configs: dict[str, Config], args) -> dict[str, float]:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    make, batch = WORKLOADS[name]
    torch.manual_seed(0)
    ddp = DDP(make())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(dist.get_rank())
    x = torch.randn(batch, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)
    ratios: dict[str, list[float]] = {k: [] for k in configs}
    base = []
    combine: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        step = 0
        for b in range(args.blocks):
            order = list(configs)
            order = order[b % len(order) :] + order[: b % len(order)]
            times = {}
            for key in order:
                tmp = Path(d) / f"{name}-{key}-{b}".replace(" ", "_").replace("=", "")
                COMBINE_TIMES.clear()
                times[key] = time_block(
                    ddp, opt, x, y, configs[key], args.steps, args.warmup, step, tmp
                )
                if key == "nbviz defaults":
                    combine.extend(COMBINE_TIMES[1:])  # the first is the histograms' first capture
                step += args.warmup + args.steps
            base.append(times["uninstrumented"])
            for key in configs:
                ratios[key].append(times[key] / times["uninstrumented"])
    out = {k: statistics.median(v) for k, v in ratios.items()}
    out["_base_ms"] = statistics.median(base) * 1e3
    out["_combine_ms"] = statistics.median(combine) * 1e3 if combine else float("nan")
    return out


def worker(args) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    _timed_combine()
    configs: dict[str, Config] = {
        "uninstrumented": baseline,
        "nbviz defaults": nbviz_config(),
        "nbviz every=1": nbviz_config(every=1),
    }
    results = {name: measure(name, configs, args) for name in WORKLOADS}
    if dist.get_rank() == 0:
        world = dist.get_world_size()
        print(
            f"\nDDP on {world} ranks (gloo, CPU, 1 thread each): step time / uninstrumented "
            f"(median of {args.blocks} interleaved blocks of {args.steps} steps after "
            f"{args.warmup} warm-up steps)\n"
        )
        print(f"| {'configuration':<22} | {'CNN':>7} | {'MLP':>7} |")
        print(f"|{'-' * 24}|{'-' * 9}|{'-' * 9}|")
        for key in configs:
            cnn, mlp = results["CNN"][key], results["MLP"][key]
            print(f"| {key:<22} | {cnn:>6.3f}x | {mlp:>6.3f}x |")
        print(
            f"\nuninstrumented DDP step: CNN {results['CNN']['_base_ms']:.1f} ms, "
            f"MLP {results['MLP']['_base_ms']:.1f} ms"
        )
        print(
            "combining the ranks at a capture step (one all_gather + bookkeeping, median): "
            f"CNN {results['CNN']['_combine_ms']:.2f} ms, "
            f"MLP {results['MLP']['_combine_ms']:.2f} ms"
        )
        print("target: the single-process budget (<= 1.05x at the defaults) plus the above")
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nproc", type=int, default=2, help="ranks to launch")
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10, help="steps per block and config")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps per block")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
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
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    sys.exit(subprocess.run(cmd, env=env, check=False).returncode)


if __name__ == "__main__":
    main()
