"""TensorBoard log directories read as nbviz runs: ``nbviz.from_tensorboard(logdir)``.

Every directory under ``logdir`` that holds event files is one run, as in
TensorBoard; its files are read in name order (their names start with the time
they were opened). What a run holds:

- scalars, with TensorBoard's steps and wall times (``loss/train`` and
  ``loss/val`` are drawn together by ``LossCurves``);
- histograms, in the Histograms view. A tag names a layer and a signal:
  a ``grad``/``grads``/``gradient(s)`` part makes it a gradient, an
  ``activation(s)``/``output(s)`` part an activation, an ``update(s)`` part an
  update, anything else a weight; the layer is the tag without that part
  (``grads/fc1.weight`` -> layer ``fc1.weight``, signal ``gradient``). Every
  histogram keeps its bins as logged: ``run.histogram(layer, signal, step)``
  returns TensorBoard's own edges and counts. The views draw uniform bins per
  step, TensorBoard's where they are uniform, else a re-binning (see
  :mod:`nbviz.importers.rebin`); the logged bins are stored beside them
  (``histogram_bins``) wherever the uniform row does not reproduce them exactly;
- images as samples: split = the tag, id = the step (one image per step; a
  tag's later images get the split ``tag/1``, ``tag/2``, ...).

The run's ``meta`` keeps where it came from (``config``: source, logdir, run)
and ``import_notes`` (what the views draw re-binned, what was skipped).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from nbviz import records as rec
from nbviz.importers import event_files as ef
from nbviz.importers import rebin
from nbviz.store import DB_NAME, Writer
from nbviz.store.encoding import bins_blobs

__all__ = ["from_tensorboard", "import_tensorboard", "layer_and_signal"]

_SIGNAL_WORDS = (
    ("gradient", ("grad", "grads", "gradient", "gradients")),
    ("activation", ("activation", "activations", "output", "outputs")),
    ("update", ("update", "updates")),
    ("weight", ("weight", "weights", "param", "params", "parameter", "parameters")),
)


def layer_and_signal(tag: str) -> tuple[str, str]:
    """The ``(layer, signal)`` a histogram tag stands for (rule in the module docstring)."""
    parts = tag.split("/")
    for signal, words in _SIGNAL_WORDS:
        rest = [p for p in parts if p.lower() not in words]
        if len(rest) < len(parts):
            return "/".join(rest) or tag, signal
    last = parts[-1]
    for signal, words in _SIGNAL_WORDS[:3]:  # a suffix: "fc1.weight.grad", "fc1_output"
        for word in words:
            for sep in (".", "_"):
                if last.lower().endswith(sep + word) and len(last) > len(word) + 1:
                    return "/".join([*parts[:-1], last[: -len(word) - 1]]), signal
    return tag, "weight"


def find_runs(logdir: Path) -> list[tuple[str, list[Path]]]:
    """``(run name, event files)`` for every directory under ``logdir`` holding event files."""
    runs = []
    for root, dirs, files in os.walk(logdir, followlinks=False):
        dirs.sort()
        found = sorted(Path(root) / f for f in files if "tfevents" in f)
        found = [f for f in found if ef.is_event_file(f)]
        if found:
            rel = Path(root).relative_to(logdir).as_posix()
            runs.append((rel if rel != "." else "", found))
    return runs


def import_tensorboard(logdir: str | Path, path: str | Path, *, strict: bool = True) -> list[Path]:
    """Read every run under ``logdir`` into nbviz runs under ``path``; returns their directories.

    One run found: ``path`` is that run. Several: ``path/<run name>`` each, the
    name being the run's directory relative to ``logdir``. A run already at the
    destination is replaced. ``strict``: a damaged event file or an unreadable
    value raises :class:`nbviz.importers.event_files.EventFileError`; with
    ``strict=False`` what can be read is imported and ``import_notes`` lists the rest.
    """
    logdir, path = Path(logdir), Path(path)
    if not logdir.exists():
        raise FileNotFoundError(f"from_tensorboard: logdir {str(logdir)!r} does not exist")
    if logdir.is_file():
        if not ef.is_event_file(logdir):
            raise ValueError(
                f"from_tensorboard: {str(logdir)!r} is a file without 'tfevents' in its name; "
                "pass the log directory (or an event file)"
            )
        runs = [("", [logdir])]
    else:
        runs = find_runs(logdir)
    if not runs:
        raise ValueError(
            f"from_tensorboard: no TensorBoard event files (named *tfevents*) under {str(logdir)!r}"
        )
    out = []
    for name, files in runs:
        target = path if len(runs) == 1 else path / (name or "root")
        _write_run(target, name or logdir.name, files, logdir, strict)
        out.append(target)
    return out


def from_tensorboard(
    logdir: str | Path, path: str | Path | None = None, *, strict: bool = True
) -> Any:
    """A TensorBoard log directory read as a run, or a list of runs (one per run directory).

    The event files are read once into nbviz runs at ``path`` (default: a new
    temporary directory) and opened read-only, like :func:`nbviz.open_run`.
    See :func:`import_tensorboard` for ``strict`` and the layout.
    """
    from nbviz.run import open_run

    if path is None:
        path = tempfile.mkdtemp(prefix="nbviz-tensorboard-")
    dirs = import_tensorboard(logdir, path, strict=strict)
    runs = [open_run(d) for d in dirs]
    return runs[0] if len(runs) == 1 else runs


# ------------------------------------------------------------------------- writing
def _write_run(target: Path, name: str, files: list[Path], logdir: Path, strict: bool) -> None:
    notes: list[str] = []
    scalars: dict[tuple[str, int], tuple[float, float]] = {}
    hists: dict[str, dict[int, ef.Histogram]] = defaultdict(dict)
    images: dict[str, dict[int, list[np.ndarray]]] = defaultdict(lambda: defaultdict(list))
    for file in files:
        for item in ef.read_file(file, strict=strict, notes=notes):
            if isinstance(item, ef.Scalar):
                scalars[item.tag, item.step] = (item.value, item.wall_time)  # a later write wins
            elif isinstance(item, ef.Histogram):
                hists[item.tag][item.step] = item
            else:
                images[item.tag][item.step].append(item.pixels)
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(f"from_tensorboard: {target} exists and is not a directory")
    for suffix in ("", "-wal", "-shm"):
        (target / f"{DB_NAME}{suffix}").unlink(missing_ok=True)
    writer = Writer(target)
    try:
        writer.set_meta("name", name)
        writer.set_meta(
            "config",
            {"source": "tensorboard", "logdir": str(logdir.resolve()), "run": name},
        )
        writer.insert(
            "scalars",
            [
                (tag, step, v, t)  # SQLite keeps inf; a NaN is stored as NULL
                for (tag, step), (v, t) in sorted(scalars.items())
            ],
        )
        _write_histograms(writer, hists, notes)
        _write_images(writer, images)
        writer.set_meta("import_notes", notes)
    finally:
        writer.close()


def _write_histograms(
    writer: Writer, hists: dict[str, dict[int, ef.Histogram]], notes: list[str]
) -> None:
    taken: dict[tuple[str, str], str] = {}
    for tag in sorted(hists):
        layer, signal = layer_and_signal(tag)
        if (layer, signal) in taken:  # two tags for one layer and signal: keep them apart
            layer = tag
        taken[layer, signal] = tag
        by_step = hists[tag]
        pairs = [(by_step[s].edges, by_step[s].counts) for s in sorted(by_step)]
        keep = rebin.exact(pairs)
        n = len(pairs[0][1]) if keep else rebin.bin_count(pairs)
        if not keep:
            notes.append(
                f"histogram {tag!r}: TensorBoard's bins are not uniform (or change in number "
                f"from step to step); the views draw them re-binned onto {n} uniform bins "
                "per step, and run.histogram() returns the log's own bins"
            )
        rows, own = [], []
        for step in sorted(by_step):
            h = by_step[step]
            if keep:
                counts = rebin.integer_counts(np.concatenate([[0.0], np.cumsum(h.counts)]))
            else:
                counts = rebin.uniform(h.edges, h.counts, n)
            if not _reproduces(h, counts):
                try:
                    blobs = bins_blobs(h.edges, h.counts)
                except ValueError as err:
                    raise ValueError(f"histogram {tag!r} at step {step}: {err}") from None
                own.append((step, layer, signal, *blobs))
            rows.append(
                (
                    step,
                    layer,
                    signal,
                    float(h.edges[0]),
                    float(h.edges[-1]),
                    counts.astype("<i8").tobytes(),
                    0,
                    0,
                    0,
                )
            )
        writer.insert("histograms", rows)
        writer.insert("histogram_bins", own)


def _reproduces(h: ef.Histogram, counts: np.ndarray) -> bool:
    """Whether the uniform row (``counts`` over ``[edges[0], edges[-1]]``) gives back
    exactly the logged edges and counts, so that they need not be kept apart."""
    edges = np.linspace(float(h.edges[0]), float(h.edges[-1]), len(counts) + 1)
    return (
        len(counts) == len(h.counts)
        and np.array_equal(edges, h.edges)
        and np.array_equal(counts, h.counts)
    )


def _write_images(writer: Writer, images: dict[str, dict[int, list[np.ndarray]]]) -> None:
    for tag in sorted(images):
        by_split: dict[str, list[tuple[int, np.ndarray]]] = defaultdict(list)
        for step, pixels in sorted(images[tag].items()):
            for k, img in enumerate(pixels):
                by_split[tag if k == 0 else f"{tag}/{k}"].append((step, img))
        for split, items in by_split.items():
            writer.insert("samples", list(_sample_rows(split, items)))


def _sample_rows(split: str, items: Iterable[tuple[int, np.ndarray]]) -> Iterable[tuple]:
    for step, img in items:
        png, _ = rec.png_thumbnail(img)
        yield (split, int(step), None, "image", png, None, json.dumps(list(img.shape)), None)
