"""Saving views as one self-contained HTML page that works offline, with no kernel.

``save_html(widget, path)`` writes a page that holds everything it needs: each
view's bundled front-end, its state (binary arrays as base64), the browser-side
links between views (``ipywidgets.jslink``) and a small runtime
(``js/report_runtime.js``) that implements the anywidget model API over that
state. Nothing is fetched: no CDN, no server, no network.

What a live view asks the kernel for (the data at a new step, the samples of a
clicked confusion cell, a layer's detail) is recorded before writing: each view's
inputs are set, in Python, to a sampled set of values (at most ``max_steps``
steps, the first and last included, plus the steps findings and evaluations
point at), and every trait that changed is stored, each distinct value once. In
the page, a change of such an input plays back the recorded answer; a step that
was not sampled shows the nearest sampled step at or before it. The page says
what was sampled. The recorded answers stay within ``max_bytes`` (the bundles,
about 0.4 MB, come on top) and each view's recording within ``MAX_GROUP_SECONDS``:
past either, a view's remaining combinations are left out, and the page says which.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import itertools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ipywidgets as W
import numpy as np

from nbviz.widgets.base import STATIC, FrontendNotBuiltError

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_STEPS", "offline_page", "save_html"]

DEFAULT_MAX_STEPS = 120
"""Steps recorded per view input (sampled evenly when the run has more)."""
DEFAULT_MAX_BYTES = 40_000_000
"""Size budget of a page; past it, remaining combinations are left out (and listed)."""
MAX_ALL_CELLS = 400
"""Confusion matrices up to this many cells have every cell recorded; larger ones, the
cells that hold samples at some evaluation."""
MAX_GROUP_SECONDS = 60.0
"""Time spent recording one view's answers at most; the rest is left out (and listed)."""
MAX_HOVER = 5000
"""Points of a projector whose hover thumbnail is recorded."""
MAX_GALLERY_PAGES = 4
"""Pages of a sample gallery recorded per selection."""

_SKIP = {
    "_esm",
    "_css",
    "_anywidget_id",
    "_model_module_version",
    "_view_module_version",
    "_view_count",
    "comm",
}
_REF = "IPY_MODEL_"
# traits with Python observers that only Python sets (answers, not questions)
_KERNEL_SIDE = {
    "HealthReport": {"findings", "layer"},
    "ConfusionMatrix": {"selected_ids"},
    "SampleGallery": {"ids", "split", "page_size", "step"},
    "EmbeddingProjector": {"highlight_ids", "selected_ids", "color_by"},
}


def _runtime_source() -> str:
    path = STATIC / "report_runtime.js"
    if not path.is_file():
        raise FrontendNotBuiltError(
            f"nbviz front-end not built: {path} is missing (bundle of js/report_runtime.js); "
            "run `make js` or reinstall nbviz"
        )
    return path.read_text(encoding="utf-8")


# -- the widget tree ------------------------------------------------------------------------


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, str) and value.startswith(_REF):
        yield value[len(_REF) :]
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _refs(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _refs(v)


def widget_tree(root: W.Widget) -> dict[str, W.Widget]:
    """Every widget ``root`` shows or refers to (children, layouts, embedded views), by id."""
    from ipywidgets.widgets.widget import _instances

    found: dict[str, W.Widget] = {}
    todo = [root]
    while todo:
        w = todo.pop()
        if w.model_id in found:
            continue
        found[w.model_id] = w
        for ref in _refs(w.get_state()):
            child = _instances.get(ref)
            if child is not None and child.model_id not in found:
                todo.append(child)
    return found


def _links(tree: dict[str, W.Widget]) -> list[dict[str, Any]]:
    """Browser-side links (jslink/jsdlink) between widgets of the tree."""
    from ipywidgets.widgets.widget import _instances

    out = []
    for w in list(_instances.values()):
        if not isinstance(w, (W.widgets.widget_link.Link, W.widgets.widget_link.DirectionalLink)):
            continue
        (src, strait), (dst, dtrait) = w.source, w.target
        if src.model_id in tree and dst.model_id in tree:
            out.append(
                {
                    "source": [src.model_id, strait],
                    "target": [dst.model_id, dtrait],
                    # DirectionalLink subclasses Link: jsdlink copies one way only
                    "both": not isinstance(w, W.widgets.widget_link.DirectionalLink),
                }
            )
    return out


# -- the pools of stored values ---------------------------------------------------------------


class _Pool:
    """Distinct values and binary buffers of a page, each stored once."""

    def __init__(self) -> None:
        self.values: list[str] = []  # JSON text with {"$buffer": i} for bytes
        self._value_index: dict[str, int] = {}
        self.buffers: list[str] = []  # base64
        self._buffer_index: dict[bytes, int] = {}
        self.nbytes = 0

    def _buffer(self, data: bytes) -> int:
        digest = hashlib.sha1(data).digest()
        i = self._buffer_index.get(digest)
        if i is None:
            text = base64.b64encode(data).decode("ascii")
            i = self._buffer_index[digest] = len(self.buffers)
            self.buffers.append(text)
            self.nbytes += len(text) + 3
        return i

    def _lift(self, value: Any) -> Any:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return {"$buffer": self._buffer(bytes(value))}
        if isinstance(value, dict):
            return {str(k): self._lift(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._lift(v) for v in value]
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, float) and not np.isfinite(value):
            return None  # what ipywidgets' JSON sends for NaN/Inf
        return value

    def add(self, value: Any) -> int:
        text = json.dumps(self._lift(value), separators=(",", ":"), ensure_ascii=False)
        i = self._value_index.get(text)
        if i is None:
            i = self._value_index[text] = len(self.values)
            self.values.append(text)
            self.nbytes += len(text) + 1
        return i


def _key_text(value: Any) -> str:
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# -- recording what the kernel would answer -----------------------------------------------------


@dataclass
class _Group:
    owner: W.Widget
    label: str
    inputs: list[str]
    plan: Callable[[], Iterator[None]]
    loose: list[str] = field(default_factory=list)
    steps: list[int] | None = None
    entries: list[tuple[list[str], dict[tuple[str, str], int]]] = field(default_factory=list)
    outputs: list[tuple[str, str]] = field(default_factory=list)
    complete: bool = True
    contexts: list[tuple[int, list[int]]] = field(default_factory=list)


class _Recorder:
    """Sets view inputs in Python and keeps what every widget of the tree sent back."""

    def __init__(self, tree: dict[str, W.Widget], pool: _Pool, max_bytes: int) -> None:
        self.tree = tree
        self.pool = pool
        self.max_bytes = max_bytes
        self.current: dict[tuple[str, str], int] = {}
        self.dirty: set[tuple[str, str]] = set()
        self._handlers: list[tuple[W.Widget, Callable[[Any], None]]] = []
        for mid, w in tree.items():
            for name, value in w.get_state().items():
                if name not in _SKIP:
                    self.current[(mid, name)] = pool.add(value)

    def __enter__(self) -> _Recorder:
        for mid, w in self.tree.items():
            synced = set(w.keys)

            def mark(change: Any, mid: str = mid, synced: set[str] = synced) -> None:
                if change["name"] in synced and change["name"] not in _SKIP:
                    self.dirty.add((mid, change["name"]))

            w.observe(mark)
            self._handlers.append((w, mark))
        return self

    def __exit__(self, *exc: Any) -> None:
        for w, mark in self._handlers:
            w.unobserve(mark)
        self._handlers.clear()

    def settle(self) -> None:
        """Store the values that changed since the last look."""
        for mid, name in sorted(self.dirty):
            value = self.tree[mid].get_state(name)[name]
            self.current[(mid, name)] = self.pool.add(value)
        self.dirty.clear()

    def _restore(
        self, base: dict[tuple[str, str], int], values: dict[tuple[str, str], Any]
    ) -> None:
        """Set back what a plan left changed elsewhere (a linked view, a hover read-out)."""
        for _ in range(3):
            left = [p for p, i in self.current.items() if base.get(p) != i and p in values]
            if not left:
                return
            for mid, name in left:
                setattr(self.tree[mid], name, values[(mid, name)])
            self.settle()

    def record(self, group: _Group) -> None:
        """Run the group's plan; keep, per combination of inputs, every changed trait."""
        owner = group.owner
        start = {n: getattr(owner, n) for n in group.inputs}
        values = {
            (mid, name): getattr(w, name)
            for mid, w in self.tree.items()
            for name in w.keys
            if name not in _SKIP
        }
        self.settle()
        base = dict(self.current)
        diffs: list[tuple[list[str], dict[tuple[str, str], int]]] = []
        seen: set[tuple[str, ...]] = set()
        deadline = time.perf_counter() + MAX_GROUP_SECONDS
        for _ in group.plan():
            self.settle()
            key = [_key_text(getattr(owner, n)) for n in group.inputs]
            if tuple(key) in seen:
                continue
            seen.add(tuple(key))
            diff = {p: i for p, i in self.current.items() if base.get(p) != i}
            diffs.append((key, diff))
            if self.pool.nbytes > self.max_bytes or time.perf_counter() > deadline:
                group.complete = False
                break
        for n in group.inputs:  # back to where it was
            setattr(owner, n, start[n])
        self.settle()
        self._restore(base, values)
        own = {(owner.model_id, n) for n in group.inputs}
        outputs = sorted({p for _, d in diffs for p in d} - own)
        group.outputs = outputs
        group.entries = [(key, {p: d.get(p, base[p]) for p in outputs}) for key, d in diffs]
        # the plan may leave values behind that no entry needs (restored state): keep base
        for p, i in base.items():
            self.current[p] = i


def _evenly(values: list[int], k: int) -> list[int]:
    if len(values) <= k:
        return list(values)
    idx = np.unique(np.linspace(0, len(values) - 1, k).round().astype(np.int64))
    return [values[i] for i in idx]


def _positions(tree: dict[str, W.Widget]) -> list[int]:
    """Every recorded step of the runs the tree shows (what a scrubber moves over)."""
    parts: list[np.ndarray] = []
    for w in tree.values():
        scrub = getattr(w, "steps", None)
        if type(w).__name__ == "StepScrubber" and scrub is not None:
            parts.append(np.asarray(scrub, dtype=np.int64))
        for index in getattr(w, "_indexes", []) or []:
            with contextlib.suppress(Exception):
                parts.append(np.asarray(index.positions(), dtype=np.int64))
    if not parts:
        return []
    return [int(s) for s in np.unique(np.concatenate(parts))]


def _pinned_steps(tree: dict[str, W.Widget]) -> list[int]:
    """Steps that views point at (findings, evaluations): recorded even when not sampled."""
    out: set[int] = set()
    for w in tree.values():
        for f in getattr(w, "findings", None) or []:
            if isinstance(f, dict) and isinstance(f.get("step"), int):
                out.add(int(f["step"]))
        for s in getattr(w, "eval_steps", None) or []:
            out.add(int(s))
        if "step" in getattr(w, "keys", []):
            out.add(int(w.step))
    return sorted(out)


def _groups(
    tree: dict[str, W.Widget], steps: list[int]
) -> tuple[list[_Group], list[str], dict[str, list[str]]]:
    """What to record for each view of the tree, and what cannot be (as notes)."""
    groups: list[_Group] = []
    notes: list[str] = []

    def step_plan(w: W.Widget, values: list[int]) -> Callable[[], Iterator[None]]:
        def plan() -> Iterator[None]:
            for s in values:
                w.step = s
                yield

        return plan

    for w in tree.values():
        name = type(w).__name__
        observed = {
            n for n in getattr(w, "_trait_notifiers", {}) if n in getattr(w, "keys", []) and n
        }
        if not observed or not hasattr(w, "_esm"):
            continue
        if name == "StepScrubber":
            groups.append(_Group(w, "scrubber", ["step"], step_plan(w, steps), steps=steps))
        elif name == "LayerBrowser":
            names = [""] + [r["name"] for r in w.layers if r.get("recorded", True)]

            def plan(w: W.Widget = w, names: list[str] = names) -> Iterator[None]:
                for layer in names:
                    w.selected_layer = layer
                    for s in steps:
                        w.step = s
                        yield

            groups.append(_Group(w, "LayerBrowser", ["selected_layer", "step"], plan, steps=steps))
        elif name == "Histograms":
            signals = list(w.traits()["signal"].values)

            def plan(w: W.Widget = w, signals: list[str] = signals) -> Iterator[None]:
                start = w.signal
                for signal in [start] + [s for s in signals if s != start]:
                    w.signal = signal
                    first = w.layer  # what Python picks for this signal comes first
                    for layer in [first] + [n for n in w.layer_choices if n != first]:
                        w.layer = layer
                        for s in steps:
                            w.step = s
                            yield

            groups.append(
                _Group(
                    w,
                    "Histograms",
                    ["signal", "layer", "step"],
                    plan,
                    loose=["layer"],
                    steps=steps,
                )
            )
        elif name == "ConfusionMatrix":
            evals = sorted({int(s) for s in w.eval_steps} | ({steps[0]} if steps else set()))

            def plan(w: W.Widget = w, evals: list[int] = evals) -> Iterator[None]:
                cells = _confusion_cells(w, evals)
                for s in evals:
                    w.selected = []
                    w.step = s
                    yield
                    if w.eval_step < 0:
                        continue
                    for cell in cells:
                        w.selected = cell
                        yield
                w.selected = []

            groups.append(_Group(w, "ConfusionMatrix", ["step", "selected"], plan, steps=evals))
        elif name == "HealthReport":
            n = len(w.findings)

            def plan(w: W.Widget = w, n: int = n) -> Iterator[None]:
                for i in range(-1, n):
                    w.selected = i
                    yield

            groups.append(_Group(w, "HealthReport", ["selected"], plan))
        elif name == "SampleGallery":
            pass  # after the others: its contexts come from the confusion matrix
        elif name == "EmbeddingProjector":
            groups.append(_Group(w, name, ["step"], step_plan(w, steps), steps=steps))
            if "hover_index" in observed:
                n = min(len(getattr(w, "_ids", ())), MAX_HOVER)

                def plan(w: W.Widget = w, n: int = n) -> Iterator[None]:
                    for i in range(n):
                        w.hover_index = i
                        yield

                groups.append(_Group(w, f"{name} (hover)", ["hover_index"], plan))
            notes.append(
                "EmbeddingProjector: colours, hover thumbnails and the points of a clicked "
                "confusion cell work offline; a box or lasso selection, another layout method, "
                "layer or split need a live kernel."
            )
        elif "step" in observed:
            groups.append(_Group(w, name, ["step"], step_plan(w, steps), steps=steps))
    for w in tree.values():
        if type(w).__name__ == "SampleGallery":
            groups.append(_gallery_group(w))
    # what a view can change that Python answers but the page does not hold
    live_only: dict[str, list[str]] = {}
    for w in tree.values():
        name = type(w).__name__
        observed = {n for n in getattr(w, "_trait_notifiers", {}) if n in getattr(w, "keys", [])}
        covered = {n for g in groups if g.owner is w for n in g.inputs}
        left = sorted(observed - covered - _KERNEL_SIDE.get(name, set()))
        if left and hasattr(w, "_esm"):
            live_only[w.model_id] = left
            if name != "EmbeddingProjector":  # its note above says it in words
                notes.append(
                    f"{name}: changing {', '.join(left)} needs a live kernel "
                    "(the saved page keeps what the view showed)."
                )
    return groups, notes, live_only


def _confusion_cells(w: W.Widget, evals: list[int]) -> list[list[int]]:
    """The cells a click can select: all of them for up to MAX_ALL_CELLS, else those
    with samples at some evaluation (a selection survives a change of step)."""
    from nbviz.widgets.base import array_from_payload

    n = len(w.class_names)
    if n * n <= MAX_ALL_CELLS:
        return [[t, p] for t in range(n) for p in range(n)]
    seen: set[tuple[int, int]] = set()
    for s in evals:
        w.step = s
        counts = w.matrix.get("counts")
        if counts:
            m = array_from_payload(counts)
            seen.update((int(t), int(p)) for t, p in zip(*np.nonzero(m)))
    return [list(c) for c in sorted(seen)]


def _gallery_group(w: W.Widget) -> _Group:
    """Pages and sort orders of a gallery, for each (step, ids) it was seen with."""
    # a new sort order starts at page 0 in Python: "page" is rewritten, so loose
    group = _Group(
        w,
        "SampleGallery",
        ["step", "ids", "sort_by", "descending", "page"],
        lambda: plan(),
        loose=["page"],
    )
    group.contexts.append((int(w.step), list(w.ids)))

    def plan() -> Iterator[None]:
        start_sort, start_desc = w.sort_by, w.descending
        for step, ids in list(group.contexts):
            for sort_by, desc in [(start_sort, start_desc)] + [
                (s, d)
                for s, d in itertools.product(w.traits()["sort_by"].values, (True, False))
                if (s, d) != (start_sort, start_desc)
            ]:
                w.step, w.ids = step, ids
                w.sort_by, w.descending = sort_by, desc
                w.page = 0
                yield
                if sort_by == start_sort and desc == start_desc:
                    for page in range(1, min(w.n_pages, MAX_GALLERY_PAGES)):
                        w.page = page
                        yield
        w.sort_by, w.descending = start_sort, start_desc

    return group


def _gallery_contexts(group: _Group, recorded: list[_Group], pool: _Pool) -> None:
    """Add the (step, ids) a gallery took in the other views' recorded answers."""
    mid = group.owner.model_id
    seen = {(s, tuple(i)) for s, i in group.contexts}
    for g in recorded:
        if (mid, "ids") not in g.outputs:
            continue
        for _key, out in g.entries:
            ids = json.loads(pool.values[out[(mid, "ids")]])
            step = (
                json.loads(pool.values[out[(mid, "step")]])
                if (mid, "step") in out
                else int(group.owner.step)
            )
            if ids and (int(step), tuple(ids)) not in seen:
                seen.add((int(step), tuple(ids)))
                group.contexts.append((int(step), [int(i) for i in ids]))


# -- the page -----------------------------------------------------------------------------------

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="nbviz {version}">
<title>{title}</title>
<style>
body {{ margin: 0; padding: 16px 24px; background: #fff; color: #1f1f1f;
  font-family: system-ui, sans-serif; font-size: 13px; }}
.nbviz-report-header h1 {{ font-size: 18px; margin: 0 0 4px 0; }}
.nbviz-report-meta {{ color: #616161; margin: 0 0 6px 0; }}
.nbviz-report-summary {{ white-space: pre-wrap; font-family: monospace; font-size: 12px;
  background: #f5f5f5; padding: 6px 8px; border-radius: 4px; max-height: 16em; overflow: auto; }}
.nbviz-report-notes {{ margin: 4px 0 10px 0; padding-left: 1.2em; color: #424242; }}
.nbviz-report-status {{ position: sticky; top: 0; z-index: 10; background: #fff8e1;
  border-left: 4px solid #e65100; padding: 4px 8px; margin-bottom: 8px; }}
.nbviz-report-view {{ margin: 4px 0; }}
</style>
</head>
<body>
<header class="nbviz-report-header">
<h1>{title}</h1>
<p class="nbviz-report-meta">{meta}</p>
{summary}
<details class="nbviz-report-about" open><summary>What this page holds</summary>
<ul class="nbviz-report-notes">{notes}</ul></details>
</header>
<div class="nbviz-report-status" id="nbviz-report-status" hidden></div>
<main id="nbviz-report-root"><noscript>This page needs JavaScript to show its views.</noscript>
<div class="nbviz-message">Loading the views...</div></main>
<script type="application/json" id="nbviz-report-data">{data}</script>
<script type="module">
const data = JSON.parse(document.getElementById("nbviz-report-data").textContent);
const host = document.getElementById("nbviz-report-root");
try {{
  const url = URL.createObjectURL(new Blob([data.runtime], {{ type: "text/javascript" }}));
  const runtime = await import(url);
  window.nbvizReport = await runtime.start(data, host,
    {{ status: document.getElementById("nbviz-report-status") }});
}} catch (err) {{
  console.error("nbviz report failed to start", err);
  host.textContent = "This page could not show its views: " + err;
}}
</script>
</body>
</html>
"""


def _json_in_html(obj: Any) -> str:
    """JSON safe inside a <script> element: no '<' (so no </script>), no U+2028/9."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _model_record(w: W.Widget, state: dict[str, int], assets: dict[str, str]) -> dict[str, Any]:
    raw = w.get_state()
    rec: dict[str, Any] = {
        "id": w.model_id,
        "cls": type(w).__name__,
        "name": str(raw.get("_model_name", "")),
        "module": str(raw.get("_model_module", "")),
        "esm": None,
        "css": None,
        "state": state,
    }
    for trait in ("_esm", "_css"):
        text = raw.get(trait)
        if isinstance(text, str) and text:
            h = hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]
            assets[h] = text
            rec[trait[1:]] = h
    if rec["esm"] is None and rec["module"] == "anywidget":
        rec["name"] = "UnsupportedModel"
    return rec


@dataclass
class PageInfo:
    """What a written page holds: its size and what was sampled or left out."""

    path: Path | None
    nbytes: int
    notes: list[str]
    views: list[str]
    seconds: float


def offline_page(
    root: W.Widget,
    *,
    title: str | None = None,
    summary: str = "",
    notes: list[str] | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> tuple[str, PageInfo]:
    """The HTML text of a self-contained page showing ``root``, and what it holds.

    Parameters
    ----------
    root
        Any nbviz view, a Dashboard, or an ipywidgets container of them.
    title
        Page title (default: the view's class name).
    summary
        Plain text shown above the views (escaped; e.g. a run summary).
    notes
        Extra lines for the page's "What this page holds" list.
    max_steps
        Most steps recorded for each view input (evenly sampled, first and last kept).
    max_bytes
        Size budget for the recorded answers.
    """
    if not isinstance(root, W.Widget):
        raise TypeError(f"save_html: expected an ipywidgets widget, got {type(root).__name__}")
    if max_steps < 2:
        raise ValueError(f"save_html: max_steps must be >= 2, got {max_steps}")
    t0 = time.perf_counter()
    runtime = _runtime_source()
    tree = widget_tree(root)
    pool = _Pool()
    locks = [w._lock for w in tree.values() if hasattr(w, "_lock")]
    all_steps = _positions(tree)
    sampled = sorted(set(_evenly(all_steps, max_steps)) | set(_pinned_steps(tree)))
    page_notes = list(notes or [])
    with contextlib.ExitStack() as stack:
        for lock in locks:  # a live view's poller waits until the page is written
            stack.enter_context(lock)
        for w in tree.values():  # displayed views see one update at the end, not every probe
            stack.enter_context(w.hold_sync())
        recorder = stack.enter_context(_Recorder(tree, pool, max_bytes))
        groups, group_notes, live_only = _groups(tree, sampled)
        done: list[_Group] = []
        for group in groups:
            if type(group.owner).__name__ == "SampleGallery":
                _gallery_contexts(group, done, pool)
            recorder.record(group)
            done.append(group)
        state = {mid: {} for mid in tree}
        for (mid, name), i in recorder.current.items():
            state[mid][name] = i
    assets: dict[str, str] = {}
    models = [_model_record(w, state[mid], assets) for mid, w in tree.items()]
    for rec in models:
        rec["live_only"] = live_only.get(rec["id"], [])
    views = sorted({type(w).__name__ for w in tree.values() if hasattr(w, "_esm")})
    if all_steps:
        if len(all_steps) > max_steps:
            page_notes.append(
                f"Steps: {len(sampled):,} of {len(all_steps):,} recorded steps are stored "
                "(evenly spaced, plus the steps of findings and evaluations); between them "
                "the views show the nearest stored step at or before the scrubber."
            )
        else:
            page_notes.append(f"Steps: all {len(all_steps):,} recorded steps are stored.")
    for g in groups:
        if not g.complete:
            page_notes.append(
                f"{g.label}: only part of its combinations ({len(g.entries):,}) fit the "
                f"size budget of {max_bytes / 1e6:.1f} MB or {MAX_GROUP_SECONDS:.0f} s; "
                "for the others the view keeps what it showed."
            )
        if type(g.owner).__name__ == "SampleGallery":
            page_notes.append(
                f"SampleGallery: the first {MAX_GALLERY_PAGES} pages of each selection and "
                "every sort order of its first page are stored."
            )
    page_notes.extend(group_notes)
    page_notes.extend(
        sorted(
            {
                str(w.notice)
                for w in tree.values()
                if isinstance(getattr(w, "notice", None), str) and w.notice
            }
        )
    )
    page_notes = list(dict.fromkeys(page_notes))  # each once, in order
    data = {
        "version": 1,
        "root": root.model_id,
        "runtime": runtime,
        "assets": assets,
        "buffers": pool.buffers,
        "values": [json.loads(v) for v in pool.values],
        "models": models,
        "links": _links(tree),
        "groups": [
            {
                "owner": g.owner.model_id,
                "label": g.label,
                "inputs": g.inputs,
                "loose": g.loose,
                "steps": g.steps,
                "outputs": [list(p) for p in g.outputs],
                "entries": [{"key": k, "out": [o[p] for p in g.outputs]} for k, o in g.entries],
            }
            for g in groups
        ],
    }
    from nbviz import __version__

    text = _PAGE.format(
        version=html.escape(__version__),
        title=html.escape(title or type(root).__name__),
        meta=html.escape(
            f"saved {time.strftime('%Y-%m-%d %H:%M')} with nbviz {__version__}; "
            "opens offline, no server needed"
        ),
        summary=(
            f'<pre class="nbviz-report-summary">{html.escape(summary)}</pre>' if summary else ""
        ),
        notes="".join(f"<li>{html.escape(n)}</li>" for n in page_notes),
        data=_json_in_html(data),
    )
    info = PageInfo(
        path=None,
        nbytes=len(text.encode("utf-8")),
        notes=page_notes,
        views=views,
        seconds=time.perf_counter() - t0,
    )
    return text, info


def save_html(root: W.Widget, path: str | Path, **kwargs: Any) -> PageInfo:
    """Write ``root`` as one self-contained HTML file at ``path``; see :func:`offline_page`."""
    text, info = offline_page(root, **kwargs)
    out = Path(path)
    if out.is_dir():
        raise IsADirectoryError(
            f"save_html: {out} is a directory; give a file name like report.html"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    info.path = out
    return info
