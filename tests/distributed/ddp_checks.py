"""Runs under ``torchrun --nproc_per_node=2`` (gloo, CPU): three small DDP runs for the tests.

    torchrun --nproc_per_node=2 tests/distributed/ddp_checks.py OUT_DIR [--branch-free]

1. ``OUT_DIR/ddp``: an MLP trained with gradient accumulation under ``no_sync``
   and evaluated on every rank through a DistributedSampler; the test replays
   the same training in one process and compares the statistics.
2. ``OUT_DIR/div``: rank 1 changes a parameter that DDP does not resynchronise
   (a model with BatchNorm; per-rank shards kept).
3. ``OUT_DIR/nan``: rank 1 feeds a NaN at step ``NAN_STEP``.

Each rank writes what it saw to ``OUT_DIR/rank<r>.json`` for the test to read.
``--branch-free`` records only the first run, with the statistics taken the way
they are on accelerators (no reads of 0-d results before the step's one copy).
The model and the data are functions the test imports, so that both sides
build exactly the same ones.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import threading
from pathlib import Path

import torch
from torch import nn

WORLD = 2
STEPS = 6
ACCUM = 2  # micro-batches per optimizer step
BATCH = 4  # per rank and micro-batch
EVERY = 2
EVAL_SAMPLES = 37  # odd: the DistributedSampler repeats one sample to even out the ranks
DIV_STEP = 1  # rank 1 moves fc2.bias after this step's optimizer.step()
NAN_STEP = 3
NAN_EVERY = 5  # the NaN step is not a capture step: the sentinel finds it anyway


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 5))


def make_bn_model() -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(12, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 5))


def train_data() -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs ``(STEPS, ACCUM, WORLD, BATCH, 12)`` and labels; rank r takes ``[:, :, r]``."""
    g = torch.Generator().manual_seed(42)
    x = torch.randn(STEPS, ACCUM, WORLD, BATCH, 12, generator=g)
    y = torch.randint(0, 5, (STEPS, ACCUM, WORLD, BATCH), generator=g)
    return x, y


def eval_data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    return torch.randn(EVAL_SAMPLES, 12, generator=g), torch.randint(
        0, 5, (EVAL_SAMPLES,), generator=g
    )


def _writer_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("nbviz-writer")]


def main(out: Path, branch_free: bool = False) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    import nbviz
    from nbviz.probes import tensor_stats

    if branch_free:
        tensor_stats.cheap_to_read = lambda t: False
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    report: dict = {"rank": rank}

    # 1. accumulation under no_sync, then a gathered evaluation
    run = nbviz.Run(out / "ddp", config={"world": WORLD})
    model = make_model()
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    probe = run.watch(ddp, every=EVERY, optimizer=opt)
    x, y = train_data()
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        total = 0.0
        for m in range(ACCUM):
            last = m == ACCUM - 1
            ctx = ddp.no_sync() if not last else torch.enable_grad()
            with ctx:
                loss = nn.functional.cross_entropy(ddp(x[step, m, rank]), y[step, m, rank])
                (loss / ACCUM).backward()
            total += float(loss) / ACCUM
        opt.step()
        losses.append(total)
        run.log(step, train_loss=total, rank=rank)
    report["losses"] = losses
    report["layers"] = [n for n, _ in probe.modules]
    report["params"] = [n for n, _ in probe.params]
    ex, ey = eval_data()
    sampler = DistributedSampler(TensorDataset(ex, ey), shuffle=False)
    loader = DataLoader(TensorDataset(ex, ey), batch_size=8, sampler=sampler)
    report["eval_ids"] = [int(i) for i in sampler]
    report["metrics"] = run.evaluate(STEPS - 1, ddp.module, loader)
    report["writer_threads"] = _writer_threads()
    run.close()
    if branch_free:
        _finish(out, rank, report)
        return

    # 2. a parameter that differs on rank 1, and BatchNorm buffers (shards kept)
    run = nbviz.Run(out / "div")
    ddp = DDP(make_bn_model())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    run.watch(ddp, every=1, rank_shards=True)
    for step in range(4):
        opt.zero_grad()
        xb, yb = x[step, 0, rank], y[step, 0, rank]
        nn.functional.cross_entropy(ddp(xb), yb).backward()
        opt.step()
        run.log(step, train_loss=0.0)
        if step == DIV_STEP and rank == 1:
            with torch.no_grad():
                ddp.module[3].bias.add_(0.5)
    run.close()

    # 3. a NaN on rank 1 only
    run = nbviz.Run(out / "nan")
    ddp = DDP(make_model())
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    run.watch(ddp, every=NAN_EVERY)
    for step in range(8):
        opt.zero_grad()
        xb = x[step % STEPS, 0, rank].clone()
        if step == NAN_STEP and rank == 1:
            xb[0, 0] = float("nan")
        loss = nn.functional.cross_entropy(ddp(xb), y[step % STEPS, 0, rank])
        loss.backward()
        opt.step()
        run.log(step, train_loss=loss)
    run.close()

    _finish(out, rank, report)


def _finish(out: Path, rank: int, report: dict) -> None:
    import torch.distributed as dist

    (out / f"rank{rank}.json").write_text(json.dumps(report))
    dist.barrier()
    dist.destroy_process_group()
    # gloo's worker thread can still be dropping the barrier's work (and its tensors) when the
    # main thread returns; if that lands in interpreter shutdown it takes the GIL and aborts
    # ("terminate called without an active exception", seen under load). Everything is
    # written by now, so leave without the shutdown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    faulthandler.enable(all_threads=False)  # a native abort prints the Python stack
    main(Path(sys.argv[1]), branch_free="--branch-free" in sys.argv[2:])
