"""Many-runs benchmark: opening 100 runs and building the comparison views, against 1 run.

Writes a synthetic sweep (``--runs`` runs of ``--steps`` steps; config ``lr``,
``batch``, ``optimizer``, ``seed``; ``train_loss`` every step, ``val_loss`` and
``val_accuracy`` every 100) directly through ``nbviz.store.Writer``, then in one
process measures for 1 run and for all of them: ``nbviz.open_runs``, building
``RunsTable`` and ``LossCurves`` (overlaid, and grouped by a config key), and
the bytes each sends to the browser (JSON plus binary buffers, as ipywidgets
would). Ratios are to the 1-run row measured in the same run.

    python benchmarks/many_runs.py                      # 100 runs x 10k steps
    python benchmarks/many_runs.py --runs 20 --steps 2000 --keep /tmp/sweep
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from harness import print_table, scratch

import nbviz
from nbviz.store import Writer

OPTIMIZERS = ("sgd", "adam", "adamw")
LRS = (0.3, 0.1, 0.03, 0.01, 0.003)
BATCHES = (32, 64, 128, 256)


def config_of(i: int) -> dict[str, Any]:
    return {
        "lr": LRS[i % len(LRS)],
        "batch": BATCHES[(i // len(LRS)) % len(BATCHES)],
        "optimizer": OPTIMIZERS[(i // 20) % len(OPTIMIZERS)],
        "seed": i,
    }


def write_run(path: Path, i: int, n_steps: int, val_every: int = 100) -> Path:
    """One synthetic run: a loss that falls at a rate set by its lr, with noise."""
    rng = np.random.default_rng(i)
    config = config_of(i)
    w = Writer(path, commit_interval=2.0, max_pending=200_000, max_pending_bytes=64 << 20)
    w.set_meta("name", f"run{i:03d}")
    w.set_meta("config", config)
    steps = np.arange(n_steps)
    rate = config["lr"] * (1.5 if config["optimizer"] != "sgd" else 1.0)
    floor = 0.05 + 0.1 * abs(np.log10(config["lr"] / 0.03))
    loss = floor + 2.3 * np.exp(-steps * rate / max(n_steps / 50, 1))
    loss = loss * (1 + 0.15 * rng.standard_normal(n_steps))
    t0 = time.time() - n_steps * 0.05
    wall = t0 + steps * 0.05 * (256 / config["batch"]) ** 0.3
    rows: list[tuple] = [
        ("train_loss", int(s), float(loss[s]), float(wall[s])) for s in range(n_steps)
    ]
    for s in range(val_every - 1, n_steps, val_every):
        rows.append(("val_loss", s, float(loss[s] * 1.08), float(wall[s])))
        rows.append(("val_accuracy", s, float(1 - loss[s] / 2.6), float(wall[s])))
    w.insert("scalars", rows)
    w.close()
    return path


def write_sweep(root: Path, n_runs: int, n_steps: int) -> Path:
    for i in range(n_runs):
        path = root / f"run{i:03d}"
        if not (path / "run.sqlite").exists():
            write_run(path, i, n_steps)
    return root


def state_bytes(widget: Any) -> int:
    """JSON plus binary bytes of a widget's full synced state."""
    from ipywidgets.widgets.widget import _remove_buffers

    state, _paths, buffers = _remove_buffers(widget.get_state())
    return len(json.dumps(state, default=str).encode()) + sum(memoryview(b).nbytes for b in buffers)


def measure(pattern: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    runs = nbviz.open_runs(pattern)
    open_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    table = nbviz.RunsTable(runs, live=False)
    table_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    curves = nbviz.LossCurves(runs, live=False)
    curves_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    grouped = nbviz.LossCurves(runs, live=False, group_by="optimizer")
    grouped_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    table.link(curves)
    chosen = [r["name"] for r in table.rows[: max(1, len(table.rows) // 10)]]
    table.selected_runs = chosen
    select_ms = (time.perf_counter() - t0) * 1000
    out = {
        "runs": len(runs),
        "open_s": open_s,
        "table_s": table_s,
        "curves_s": curves_s,
        "grouped_s": grouped_s,
        "total_s": open_s + table_s + curves_s,
        "table_b": state_bytes(table),
        "curves_b": state_bytes(curves),
        "grouped_b": state_bytes(grouped),
        "select_ms": select_ms,
    }
    for view in (table, curves, grouped):
        view.close()
    runs.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, default=None, help="write the sweep here, keep it")
    args = parser.parse_args()
    with scratch("nbviz-many-runs-", keep=args.keep) as root:
        t0 = time.perf_counter()
        write_sweep(root / "sweep", args.runs, args.steps)
        print(f"wrote {args.runs} runs x {args.steps:,} steps in {time.perf_counter() - t0:.1f} s")
        measure(str(root / "sweep" / "run000"))  # warm-up: imports and first-use costs
        one = measure(str(root / "sweep" / "run000"))
        many = measure(str(root / "sweep"))
        rows = []
        for label, r in (("1 run", one), (f"{args.runs} runs", many)):
            rows.append(
                [
                    label,
                    f"{r['open_s']:.2f}",
                    f"{r['table_s']:.2f}",
                    f"{r['curves_s']:.2f}",
                    f"{r['total_s']:.2f}",
                    f"{r['grouped_s']:.2f}",
                    f"{r['table_b'] / 1e3:,.0f}",
                    f"{r['curves_b'] / 1e3:,.0f}",
                    f"{r['grouped_b'] / 1e3:,.0f}",
                    f"{r['select_ms']:.1f}",
                ]
            )
        ratio = [
            "ratio",
            *(
                f"{many[k] / max(one[k], 1e-9):.1f}x"
                for k in ("open_s", "table_s", "curves_s", "total_s", "grouped_s")
            ),
            *(f"{many[k] / max(one[k], 1):.1f}x" for k in ("table_b", "curves_b", "grouped_b")),
            f"{many['select_ms'] / max(one['select_ms'], 1e-9):.1f}x",
        ]
        print_table(
            [
                "",
                "open s",
                "RunsTable s",
                "LossCurves s",
                "open+draw s",
                "grouped s",
                "RunsTable kB",
                "LossCurves kB",
                "grouped kB",
                "select ms",
            ],
            [*rows, ratio],
        )
        print(
            "open+draw: open_runs, RunsTable and LossCurves built in Python, their reads "
            "included (what the kernel does before the browser draws); grouped: "
            "LossCurves(group_by='optimizer'); "
            "select: RunsTable.selected_runs set (10% of runs) with LossCurves linked."
        )


if __name__ == "__main__":
    main()
