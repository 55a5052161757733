"""Run-store benchmark: Writer throughput and read latency at 1k, 10k and 100k steps.

Each step holds 2 signals x 50 layers of layer_stats and of 64-bin histograms.
The databases for the read measurements are written through ``Writer`` in large
batches (rows generated here, stored as a probe's are, summaries included); the
Writer's throughput one step at a time is measured on its own.

    python benchmarks/store_bench.py              # 1k, 10k, 100k steps
    python benchmarks/store_bench.py --steps 1000 10000 --reads 50
    python benchmarks/store_bench.py --keep /tmp/store-runs   # build once, measure again
    python benchmarks/store_bench.py --steps 1000 100000 1000000 --layers 5   # long runs

Reads run with the database in the OS page cache (it was just written), as in
a notebook that follows a run; medians over random steps.
"""

from __future__ import annotations

import argparse
import gc
import random
import shutil
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from harness import Table, print_table, scratch

from nbviz.store import Reader, Writer

N_LAYERS = 50
SIGNALS = ("activation", "gradient")
N_BINS = 64
LAYERS = [f"block{i // 5}.layer{i % 5}" for i in range(N_LAYERS)]


def use_layers(n: int) -> None:
    """Measure runs of ``n`` layers (fewer make a 1M-step run fit a disk and an hour)."""
    global N_LAYERS, LAYERS
    if n < 1:
        raise SystemExit(f"--layers must be >= 1, got {n}")
    N_LAYERS = n
    LAYERS = [f"block{i // 5}.layer{i % 5}" for i in range(n)]


GROWTH = ("stats_at", "hist_at", "layer", "hrows", "summary", "zoom", "seek")


def stat_rows(step: int) -> list[tuple]:
    return [
        (step, layer, signal, 4096, 0.01 * i, 1.0, -3.0, 3.0, 0.1, 0, 12.5, None)
        for signal in SIGNALS
        for i, layer in enumerate(LAYERS)
    ]


def histogram_rows(step: int, blob: bytes) -> list[tuple]:
    return [
        (step, layer, signal, -3.0, 3.0, blob, 1, 2, 0) for signal in SIGNALS for layer in LAYERS
    ]


def _blob(seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1000, N_BINS).astype("<i8").tobytes()


# -- Writer throughput ---------------------------------------------------------------


def writer_throughput(root: Path, table: str, n_steps: int) -> float:
    """Rows per second through Writer.insert ... flush (rows built beforehand)."""
    blob = _blob()
    batches = [
        stat_rows(s) if table == "layer_stats" else histogram_rows(s, blob) for s in range(n_steps)
    ]
    n_rows = sum(len(b) for b in batches)
    run = root / f"writer-{table}"
    w = Writer(run)
    gc.collect()
    start = time.perf_counter()
    for batch in batches:
        w.insert(table, batch)
    w.flush()
    elapsed = time.perf_counter() - start
    w.close()
    shutil.rmtree(run)
    return n_rows / elapsed


def writer_with_busy_caller(root: Path, n_steps: int, busy_ms: float) -> tuple[float, float]:
    """Rows/s while the caller runs Python for ``busy_ms`` between steps, and the
    seconds flush() then waits (how far the writer fell behind)."""
    batches = [stat_rows(s) for s in range(n_steps)]
    run = root / "writer-busy"
    w = Writer(run)
    start = time.perf_counter()
    for batch in batches:
        w.insert("layer_stats", batch)
        until = time.perf_counter() + busy_ms / 1000
        while time.perf_counter() < until:  # a training step's Python work
            pass
    t_flush = time.perf_counter()
    w.flush()
    end = time.perf_counter()
    w.close()
    shutil.rmtree(run)
    return sum(map(len, batches)) / (end - start), end - t_flush


# -- bulk build ----------------------------------------------------------------------


def build(run: Path, n_steps: int) -> float:
    """Write n_steps of stats and histograms through the Writer (as a probe would, with
    its summaries), in large batches; returns seconds."""
    start = time.perf_counter()
    blob = _blob()
    w = Writer(run, commit_interval=5.0, max_pending=500_000, max_pending_bytes=512 << 20)
    for lo in range(0, n_steps, 500):
        steps = range(lo, min(lo + 500, n_steps))
        w.insert("layer_stats", [r for s in steps for r in stat_rows(s)])
        w.insert("histograms", [r for s in steps for r in histogram_rows(s, blob)])
    w.close()
    return time.perf_counter() - start


# -- reads ---------------------------------------------------------------------------


def median_ms(fn: Callable[[int], object], steps: Iterable[int]) -> float:
    times = []
    for s in steps:
        t = time.perf_counter()
        fn(s)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def measure_reads(reader: Reader, n_steps: int, rng: random.Random, reads: int) -> dict:
    """Median milliseconds of the read queries a dashboard makes."""
    steps = [rng.randrange(n_steps) for _ in range(reads)]
    assert len(reader.stats_at(steps[0])) == len(SIGNALS) * N_LAYERS
    layers = [LAYERS[rng.randrange(N_LAYERS)] for _ in range(5)]
    return {
        "stats_at": median_ms(reader.stats_at, steps),
        "hist_at": median_ms(reader.histograms_at, steps),
        "both": median_ms(lambda s: (reader.stats_at(s), reader.histograms_at(s)), steps),
        "layer": median_ms(lambda i: reader.stats("activation", layers[i]), range(5)),
        "hrows": median_ms(lambda i: reader.histogram_rows(layers[i], "gradient"), range(5)),
        "steps": median_ms(lambda _: reader.steps("activation"), range(3)),
        # the bounded reads the views make
        "summary": median_ms(
            lambda i: reader.stats_summary("activation", layers[i], 1000), range(5)
        ),
        "zoom": median_ms(
            lambda i: reader.stats_summary(
                "activation", layers[i], 1000, (n_steps // 2, n_steps // 2 + n_steps // 100)
            ),
            range(5),
        ),
        "seek": median_ms(lambda s: reader.histogram_before(layers[s % 5], "gradient", s), steps),
    }


def python_reference_s() -> float:
    """Seconds for a fixed pure-Python loop: this machine's speed right now (it varies)."""
    start = time.perf_counter()
    total = 0
    for i in range(5_000_000):
        total += i
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--reads", type=int, default=50)
    parser.add_argument("--layers", type=int, default=N_LAYERS, help="layers per step")
    parser.add_argument("--writer-steps", type=int, default=3000)
    parser.add_argument("--dir", type=Path, default=None, help="where to put the databases")
    parser.add_argument(
        "--keep", type=Path, default=None, help="build the runs here, keep them, reuse them"
    )
    parser.add_argument("--no-writer", action="store_true", help="skip the Writer throughput")
    args = parser.parse_args()
    use_layers(args.layers)

    rng = random.Random(0)
    with scratch("nbviz-store-bench-", keep=args.keep, within=args.dir) as root:
        per_step = len(SIGNALS) * N_LAYERS
        print(
            f"{N_LAYERS} layers x {len(SIGNALS)} signals per step, {N_BINS}-bin histograms; "
            f"reference: a 5M-iteration Python loop takes {python_reference_s():.2f} s"
        )
        print()
        print("Writer throughput (Writer.insert of one step's rows at a time, then flush)")
        for table in () if args.no_writer else ("layer_stats", "histograms"):
            rate = writer_throughput(root, table, args.writer_steps)
            n_rows = args.writer_steps * per_step
            print(f"  {table:<12} {rate:>10,.0f} records/s  ({n_rows:,} rows)")
        busy_ms = 1.0
        if not args.no_writer:
            rate, lag = writer_with_busy_caller(root, 1000, busy_ms)
            print(
                f"  layer_stats  {rate:>10,.0f} records/s  with the caller's thread busy in "
                f"Python {busy_ms:g} ms per step; final flush waited {lag * 1000:.0f} ms"
            )
        print()
        print("Read latency, ms (median; 'both' = stats_at + histograms_at of one step)")
        table = Table(
            ["steps", "rows/table", "db MB", "B/layer-step", "build s", "stats_at", "hist_at"]
            + ["both", "layer stats", "layer hists", "steps()", "summary", "zoom 1%", "seek"],
            [9] * 14,
        )
        growth = []
        first: dict | None = None
        for n_steps in args.steps:
            run = root / f"run-{n_steps}"
            build_s = float("nan")
            if not (run / "run.sqlite").exists():
                build_s = build(run, n_steps)
            size = sum(p.stat().st_size for p in run.iterdir())
            with Reader(run) as reader:
                ms = measure_reads(reader, n_steps, rng, args.reads)
            first = first or ms
            growth.append([f"{n_steps:,}", *(f"{ms[k] / first[k]:.2f}x" for k in GROWTH)])
            table.row(
                f"{n_steps:,}",
                f"{n_steps * per_step:,}",
                f"{size / 1e6:,.0f}",
                f"{size / (n_steps * N_LAYERS):,.0f}",
                f"{build_s:.1f}",
                f"{ms['stats_at']:.2f}",
                f"{ms['hist_at']:.2f}",
                f"{ms['both']:.2f}",
                f"{ms['layer']:.1f}",
                f"{ms['hrows']:.1f}",
                f"{ms['steps']:.1f}",
                f"{ms['summary']:.2f}",
                f"{ms['zoom']:.2f}",
                f"{ms['seek']:.2f}",
            )
            if args.keep is None:
                shutil.rmtree(run)
        print()
        print(
            "'layer stats': stats(signal, layer) over all steps; 'layer hists': "
            "histogram_rows(layer, signal) over all steps; 'steps()': steps(signal); "
            "'summary': stats_summary(signal, layer, 1000) (a layer's detail); 'zoom 1%': "
            "the same over 1% of the run; 'seek': histogram_before(layer, signal, step). "
            "B/layer-step: file bytes / (steps x layers), two signals' stats and histograms "
            "each; build s: NaN when the run was kept from an earlier invocation."
        )
        print()
        print(f"Growth against {args.steps[0]:,} steps (same invocation)")
        print_table(["steps", *GROWTH], growth)


if __name__ == "__main__":
    main()
