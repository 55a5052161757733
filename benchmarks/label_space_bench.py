"""Label-space benchmark: what a ConfusionMatrix and a Dashboard cost as the class index grows.

A run holds one evaluation of ``--samples`` predicted classes (1-d, as a language
model's or a retrieval model's top-1 is often logged) over a label space of 10,
20,000 or 100,000 classes without names; the largest index occurs once. Each
size is measured in a fresh process: the build time of ``ConfusionMatrix(run)``
(the median of ``--repeats`` builds after one warm-up), the peak of the memory
Python and numpy allocate during one build (tracemalloc), the bytes of the view's
synced state, and the build time of ``Dashboard(run)`` (which runs the diagnosis
over the same predictions). Ratios are to the 10-class run measured in the same
invocation. The view counts pairs and classes that occur, so the cost follows the
samples, not the square of the largest index.

    python benchmarks/label_space_bench.py                 # 10, 20k and 100k classes
    python benchmarks/label_space_bench.py --classes 10 20000 --samples 2000
    python benchmarks/label_space_bench.py --classes 2000 --src /other/checkout/src
        # the same table for another checkout's nbviz (say, before sparse counting)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

BASELINE = 10


def write_run(path: Path, n_classes: int, n_samples: int, seed: int = 0) -> None:
    """One evaluation of ``n_samples`` predicted classes; half of them right."""
    import nbviz

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_classes, n_samples)
    labels[-1] = n_classes - 1
    preds = np.where(rng.random(n_samples) < 0.5, labels, rng.integers(0, n_classes, n_samples))
    run = nbviz.Run(path)
    run.log(0, train_loss=1.0)
    run.log_predictions(0, preds, labels)
    run.close()


def state_bytes(widget: Any) -> int:
    """Bytes of a widget's synced data as ipywidgets sends it: JSON plus binary buffers."""

    def size(value: Any) -> int:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return len(value)
        if isinstance(value, dict):
            return sum(len(json.dumps(k)) + size(v) for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return sum(size(v) for v in value) + len(value)
        return len(json.dumps(value))

    # names starting with "_" are the front-end bundle and the model's names
    return sum(size(v) for k, v in widget.get_state().items() if not k.startswith("_"))


def measure(path: Path, repeats: int) -> dict[str, Any]:
    """Time and memory of building the views of the run at ``path`` (in this process)."""
    import nbviz

    run = nbviz.open_run(path)
    try:
        nbviz.ConfusionMatrix(run, live=False).close()  # imports and first reads
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            cm = nbviz.ConfusionMatrix(run, live=False)
            times.append(time.perf_counter() - t)
            cm.close()
        tracemalloc.start()
        cm = nbviz.ConfusionMatrix(run, live=False)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out = {
            "mode": getattr(cm, "mode", "matrix"),
            "build_s": statistics.median(times),
            "peak_bytes": peak,
        }
        out["state_bytes"] = state_bytes(cm)
        cm.close()
        t = time.perf_counter()
        dash = nbviz.Dashboard(run, live=False)
        out["dashboard_s"] = time.perf_counter() - t
        dash.close()
    finally:
        run.close()
    return out


def child(args: argparse.Namespace) -> None:
    # this checkout's nbviz (as harness would put it first), or the one of --src
    sys.path.insert(0, args.src or str(Path(__file__).resolve().parent.parent / "src"))
    path = Path(args.child)
    write_run(path, args.n_classes, args.samples)
    print(json.dumps(measure(path, args.repeats)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--src", help="measure the nbviz of this source tree instead")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--n-classes", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    from harness import print_table, scratch  # imports this checkout's nbviz

    sizes = [BASELINE] + [k for k in args.classes if k != BASELINE]
    results: dict[int, dict[str, Any]] = {}
    with scratch("nbviz-labels-") as root:
        for k in sizes:
            src = ["--src", args.src] if args.src else []
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(root / f"run{k}"), "--n-classes", str(k)]
                + ["--samples", str(args.samples), "--repeats", str(args.repeats)]
                + src,
                capture_output=True,
                text=True,
                check=True,
            )
            results[k] = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"{k:,} classes measured", file=sys.stderr)
    base = results[BASELINE]
    rows = []
    for k in sizes:
        r = results[k]
        rows.append(
            [
                f"{k:,}",
                r["mode"],
                f"{r['build_s'] * 1000:.0f} ms",
                f"{r['build_s'] / base['build_s']:.2f}x",
                f"{r['peak_bytes'] / 2**20:.1f} MiB",
                f"{r['peak_bytes'] / base['peak_bytes']:.2f}x",
                f"{r['state_bytes'] / 1024:.1f} KiB",
                f"{r['dashboard_s'] * 1000:.0f} ms",
                f"{r['dashboard_s'] / base['dashboard_s']:.2f}x",
            ]
        )
    import nbviz

    where = args.src or str(Path(nbviz.__file__).parent.parent)
    print(
        f"\nConfusionMatrix and Dashboard of one evaluation of {args.samples:,} samples ({where})"
    )
    print_table(
        [
            "classes",
            "mode",
            "ConfusionMatrix build",
            "vs 10",
            "peak memory",
            "vs 10",
            "view state",
            "Dashboard build",
            "vs 10",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
