"""Dashboard payload benchmark: bytes sent to the browser and Python build time.

Builds synthetic runs (1k and 100k steps x 50 layers) directly through
``nbviz.store.Writer`` rows, then times ``nbviz.Dashboard(run)`` and a few step
changes, and counts the bytes of every view's synced state (JSON plus binary
buffers, as ipywidgets would send them).

Each synthetic step holds the scalars ``train_loss``, ``train_accuracy`` and
``lr`` (``val_loss``/``val_accuracy`` every ``--val-every`` steps); layer_stats
for activation and gradient of every layer at every ``--every`` steps; weight
and update stats of ``<layer>.weight`` every 10 captures; 64-bin histograms and
per-unit zero fractions every ``--hist-every`` steps.

    python benchmarks/widget_payload.py                   # 1k and 100k steps
    python benchmarks/widget_payload.py --steps 1000 --keep /tmp/bench-runs
    python benchmarks/widget_payload.py --steps 1000 100000 1000000 --layers 5 --keep /tmp/b1m

The last line compares 1k, 100k and 1M steps with 5 layers, statistics every
step at every size (11M layer_stats rows at 1M; 50 layers would be ~20 GB and
hours to write): the rows are generated here and written through
``nbviz.store.Writer`` exactly as a probe's are (no training), in about two
minutes; ``--keep`` keeps the runs, so a second invocation measures without
writing. Compare sizes only within one layer count.
The growth table divides each measurement by the first run's, all measured in
one invocation (a loaded machine slows every row alike).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from harness import CLOCKS, print_table, scratch

from nbviz.store import Writer

#: What the measurements are timed by (``--clock``): wall time, or this process's CPU time
#: (on a machine that other work keeps busy, wall-clock ratios mostly measure that work).
_CLOCK = [time.perf_counter]


def now() -> float:
    return _CLOCK[0]()


N_BINS = 64
N_UNITS = 64
CHUNK_STEPS = 200


def layer_names(n_layers: int) -> list[str]:
    return [f"block{i // 5}.layer{i % 5}" for i in range(n_layers)]


def write_synthetic_run(
    path: Path,
    n_steps: int,
    n_layers: int = 50,
    *,
    every: int = 1,
    hist_every: int = 100,
    val_every: int = 1000,
    seed: int = 0,
) -> Path:
    """Write a synthetic run of ``n_steps`` x ``n_layers`` at ``path``; returns the path."""
    rng = np.random.default_rng(seed)
    layers = layer_names(n_layers)
    w = Writer(path, commit_interval=2.0, max_pending=200_000, max_pending_bytes=64 << 20)
    modules = [
        {
            "name": name,
            "type": "Linear",
            "depth": 2,
            "params": N_UNITS * N_UNITS + N_UNITS,
            "own_params": N_UNITS * N_UNITS + N_UNITS,
            "trainable": N_UNITS * N_UNITS + N_UNITS,
            "shape": [32, N_UNITS],
            "watched": True,
            "note": "",
        }
        for name in layers
    ]
    w.set_meta("model", {"modules": modules, "forward_order": layers})
    w.set_meta("name", f"synthetic-{n_steps}")
    w.set_meta("config", {"lr": 0.01, "steps": n_steps, "layers": n_layers})
    steps = np.arange(n_steps)
    loss = 2.3 * np.exp(-steps / max(n_steps / 5, 1)) + 0.05 * rng.standard_normal(n_steps) ** 2
    now = time.time()
    for lo in range(0, n_steps, CHUNK_STEPS):
        hi = min(n_steps, lo + CHUNK_STEPS)
        rows: list[tuple] = []
        for s in range(lo, hi):
            rows.append(("train_loss", s, float(loss[s]), now))
            rows.append(("train_accuracy", s, float(1 - loss[s] / 2.5), now))
            rows.append(("lr", s, 0.01, now))
            if s % val_every == val_every - 1 or s == n_steps - 1:
                rows.append(("val_loss", s, float(loss[s] * 1.1), now))
                rows.append(("val_accuracy", s, float(1 - loss[s] / 2.4), now))
        w.insert("scalars", rows)
        stats: list[tuple] = []
        for s in range(lo, hi):
            if s % every:
                continue
            for i, name in enumerate(layers):
                z = 0.1 + 0.002 * i
                stats.append((s, name, "activation", 2048, 0.5, 1.0, 0.0, 4.0, z, 0, 30.0, None))
                stats.append(
                    (s, name, "gradient", 2048, 0.0, 1e-3, -1e-2, 1e-2, 0.0, 0, 0.04, None)
                )
                if (s // every) % 10 == 0:
                    p = f"{name}.weight"
                    stats.append((s, p, "weight", 4096, 0.0, 0.1, -0.4, 0.4, 0.0, 0, 6.4, 0.01))
                    stats.append((s, p, "update", 4096, 0.0, 1e-4, -1e-3, 1e-3, 0.0, 0, 6e-4, 1e-3))
        w.insert("layer_stats", stats)
        hists: list[tuple] = []
        units: list[tuple] = []
        for s in range(lo, hi):
            if s % hist_every:
                continue
            for name in layers:
                counts = rng.multinomial(2048, np.full(N_BINS, 1 / N_BINS)).astype("<i8")
                blob = counts.tobytes()
                hists.append((s, name, "activation", 0.0, 4.0, blob, 0, 0, 0))
                hists.append((s, name, "gradient", -1e-2, 1e-2, blob, 0, 0, 0))
                hists.append((s, f"{name}.weight", "weight", -0.4, 0.4, blob, 0, 0, 0))
                zero = rng.random(N_UNITS).astype("<f4") * 0.3
                units.append((s, name, "zero_frac", zero.tobytes()))
        if hists:
            w.insert("histograms", hists)
            w.insert("unit_stats", units)
    w.close()
    return path


# -- measuring ------------------------------------------------------------------------


def state_bytes(widget: Any) -> tuple[int, int]:
    """(JSON bytes, binary buffer bytes) of a widget's full synced state."""
    from ipywidgets.widgets.widget import _remove_buffers

    state, _paths, buffers = _remove_buffers(widget.get_state())
    text = json.dumps(state, default=str)
    return len(text.encode()), sum(memoryview(b).nbytes for b in buffers)


def views_of(dashboard: Any) -> dict[str, Any]:
    return {"scrubber": dashboard.scrubber, **dashboard.views}


def zoom(run: Any, names: list[str], max_points: int, lo: int, hi: int) -> int:
    """The read and the payload of a zoom into ``lo..hi`` for each scalar; points sent."""
    from nbviz.widgets.scalar_points import window_points
    from nbviz.widgets.wire import floats_payload, steps_payload

    sent = 0
    for name in names:
        _total, steps, values = window_points(run, name, max_points, lo, hi)
        steps_payload(steps)
        floats_payload(values)
        sent += len(steps)
    return sent


def median_ms(fn: Any, times: int = 7) -> float:
    """Median time of ``fn()`` in ms (by ``--clock``), after one untimed call."""
    fn()
    spent = []
    for _ in range(times):
        t0 = now()
        fn()
        spent.append(now() - t0)
    return float(np.median(spent)) * 1000


def measure(path: Path, n_steps: int, repeats: int) -> list[dict[str, Any]]:
    import nbviz

    warm = nbviz.open_run(path)  # imports and first-use costs, on a run object of its own
    nbviz.Dashboard(warm, live=False).close()
    warm.close()
    run = nbviz.open_run(path)
    t0 = now()
    dash = nbviz.Dashboard(run, live=False)
    build_s = now() - t0
    rows = []
    for name, view in views_of(dash).items():
        js, buf = state_bytes(view)
        rows.append({"view": name, "json": js, "binary": buf})
    # scrubbing: every view follows the step; time the Python side of one change
    targets = np.linspace(0, n_steps - 1, repeats + 2).astype(int)[1:-1]
    t0 = now()
    for s in targets:
        # what the browser's jslink does: every linked view gets the scrubber's step
        for view in views_of(dash).values():
            if "step" in view.trait_names():
                view.step = int(s)
    step_ms = (now() - t0) * 1000 / max(len(targets), 1)
    t0 = now()
    lb = dash.views["layers"]
    lb.selected_layer = lb.layers[len(lb.layers) // 2]["name"]
    select_ms = (now() - t0) * 1000
    js, buf = state_bytes(lb)
    # zooming into 1% of the run, in its middle: what LossCurves.window reads and encodes
    # for a series, done for every scalar at every size (a short run's chart holds every
    # point and asks for nothing, so the view's own window would time nothing there)
    lo = n_steps // 2
    hi = lo + max(n_steps // 100, 1)
    names = run.scalar_names()
    points = dash.views["loss_curves"].max_points // 2
    zoom_ms = median_ms(lambda: zoom(run, names, points, lo, hi))
    zoom_points = zoom(run, names, points, lo, hi)
    dash.close()
    run.close()
    # the HealthReport's diagnosis, apart from the views' reads
    fresh = nbviz.open_run(path)
    t0 = now()
    fresh.diagnose()
    diagnose_s = now() - t0
    fresh.close()
    times = {
        "build_s": build_s,
        "views_s": max(build_s - diagnose_s, 1e-3),
        "diagnose_s": diagnose_s,
        "step_ms": step_ms,
        "select_ms": select_ms,
        "zoom_ms": zoom_ms,
        "zoom_points": zoom_points,
    }
    return [{**r, **times} for r in rows] + [{"view": "Layers+detail", "json": js, "binary": buf}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 100_000])
    parser.add_argument("--layers", type=int, default=50)
    parser.add_argument("--every", type=int, default=1, help="steps between layer_stats")
    parser.add_argument("--hist-every", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=10, help="step changes timed")
    parser.add_argument("--keep", type=Path, default=None, help="build runs here and keep them")
    parser.add_argument("--rounds", type=int, default=3, help="measurements per size (median)")
    parser.add_argument(
        "--clock", choices=sorted(CLOCKS), default="wall", help="time by wall or CPU time"
    )
    args = parser.parse_args()
    _CLOCK[0] = CLOCKS[args.clock]

    with scratch("nbviz-widget-bench-", keep=args.keep) as root:
        print(
            f"{args.layers} layers; stats every {args.every} step(s), histograms and unit "
            f"stats every {args.hist_every}; timed by {args.clock} clock"
        )
        per_view = []
        summary = []
        growth: list[list[str]] = []
        first: dict[str, Any] | None = None
        writes: dict[int, float] = {}
        for n_steps in args.steps:
            path = root / f"run-{n_steps}"
            t0 = time.perf_counter()
            if not (path / "run.sqlite").exists():
                write_synthetic_run(
                    path, n_steps, args.layers, every=args.every, hist_every=args.hist_every
                )
            write_s = time.perf_counter() - t0
            writes[n_steps] = write_s
        # every size measured --rounds times, the sizes taking turns: a machine whose load
        # changes slows every size alike; the median of each time is shown
        rounds: dict[int, list[list[dict[str, Any]]]] = {n: [] for n in args.steps}
        for _ in range(args.rounds):
            for n_steps in args.steps:
                rounds[n_steps].append(measure(root / f"run-{n_steps}", n_steps, args.repeats))
        for n_steps in args.steps:
            path = root / f"run-{n_steps}"
            write_s = writes[n_steps]
            rows = rounds[n_steps][0]
            for key in ("build_s", "views_s", "diagnose_s", "step_ms", "select_ms", "zoom_ms"):
                rows[0][key] = float(np.median([r[0][key] for r in rounds[n_steps]]))
            total = 0
            for r in rows:
                kb = (r["json"] + r["binary"]) / 1000
                if r["view"] != "Layers+detail":
                    total += r["json"] + r["binary"]
                per_view.append(
                    [f"{n_steps:,}", r["view"], f"{r['json'] / 1000:.1f}"]
                    + [f"{r['binary'] / 1000:.1f}", f"{kb:.1f}"]
                )
            summary.append(
                [f"{n_steps:,}", f"{write_s:.1f}", f"{rows[0]['build_s']:.2f}"]
                + [f"{total / 1e6:.2f}", f"{rows[0]['step_ms']:.1f}"]
                + [f"{rows[0]['select_ms']:.1f}", f"{rows[0]['zoom_ms']:.2f}"]
                + [f"{rows[0]['zoom_points']:,}"]
                + [f"{rows[0]['diagnose_s']:.2f}", f"{rows[0]['views_s']:.2f}"]
            )
            first = first or rows[0]
            growth.append(
                [f"{n_steps:,}"]
                + [
                    f"{rows[0][k] / first[k]:.2f}x"
                    for k in ("build_s", "views_s", "select_ms", "step_ms", "zoom_ms")
                ]
            )
            print(f"  built {path.name} in {write_s:.1f} s", file=sys.stderr, flush=True)
        print()
        print("Synced state per view (what the browser receives when the Dashboard is shown)")
        print_table(["steps", "view", "JSON kB", "binary kB", "total kB"], per_view)
        print()
        print_table(
            ["steps", "write s", "build s", "total MB", "step ms", "select ms", "zoom ms"]
            + ["zoom points"]
            + ["diagnose s", "views s"],
            summary,
        )
        print()
        print(f"Growth against {args.steps[0]:,} steps (same invocation)")
        print_table(
            ["steps", "build", "build less diagnosis", "layer click", "scrubber move", "zoom 1%"],
            growth,
        )
        print()
        print(
            "build s: nbviz.Dashboard(run) in Python; step ms: one scrubber step change "
            "(every view updates); select ms: choosing a layer in the LayerBrowser; zoom ms: "
            "every scalar's rows (or finest buckets) over 1% of the run (its middle), read and "
            "encoded as LossCurves.window does, median of 7 (zoom points: the points it sends); "
            "diagnose s: run.diagnose() "
            "alone (the HealthReport's analysis: loss outlines and a bounded number of captures); "
            "views s: build s "
            "less diagnose s."
        )


if __name__ == "__main__":
    main()
