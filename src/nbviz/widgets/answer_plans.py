"""What to record for each view of a page: the plans a :class:`Recorder` walks.

A plan sets a view's inputs the way a person would in the browser: the
scrubber over the sampled steps, each layer of a LayerBrowser at each step,
each cell of a confusion matrix at each evaluation, each finding of a health
report, the pages and sort orders of a gallery for each selection it was shown
with. What a view can change but no plan covers is listed, so the page can say
that it needs a live kernel.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import ipywidgets as W
import numpy as np

from nbviz.widgets.answers import Group, Pool, Recorder
from nbviz.widgets.sampling import evenly
from nbviz.widgets.wire import array_from_payload, array_trait_payload

__all__ = [
    "MAX_ALL_CELLS",
    "MAX_GALLERY_PAGES",
    "MAX_HOVER",
    "MAX_MAP_POINTS",
    "Recording",
    "gallery_contexts",
    "plan_groups",
    "pinned_steps",
    "positions",
    "prepare_views",
    "record_answers",
    "sampled_steps",
]

MAX_ALL_CELLS = 400
"""Confusion matrices up to this many cells have every cell recorded; larger ones, the
cells that hold samples at some evaluation."""
MAX_HOVER = 5000
"""Points of a projector whose hover thumbnail is recorded."""
MAX_GALLERY_PAGES = 4
"""Pages of a sample gallery recorded per selection."""
MAX_MAP_POINTS = 2000
"""Points of a data map whose click is recorded; a larger map, those of its list of the most
likely mislabelled (the page says so, and so does the map where a click finds no answer)."""

# traits with Python observers that only Python sets (answers, not questions)
_KERNEL_SIDE = {
    "HealthReport": {"findings", "layer"},
    "ConfusionMatrix": {"selected_ids"},
    "SampleGallery": {"ids", "split", "page_size", "step"},
    "EmbeddingProjector": {"highlight_ids", "selected_ids", "color_by"},
    "DataMap": {"selected_ids"},
}


def sampled_steps(all_steps: list[int], pinned: list[int], max_steps: int) -> list[int]:
    """``pinned``, and at most ``max_steps`` of ``all_steps`` (evenly spaced, first and last)."""
    picked = evenly(np.asarray(all_steps, dtype=np.int64), max_steps).tolist()
    return sorted(set(picked) | set(pinned))


def positions(tree: dict[str, W.Widget]) -> list[int]:
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


def pinned_steps(tree: dict[str, W.Widget]) -> list[int]:
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


Plan = Callable[[W.Widget, list[int], set[str]], list[Group]]
"""A view's plan maker: (the view, the sampled steps, its observed traits) -> groups."""

PROJECTOR_NOTE = (
    "EmbeddingProjector: colours, hover thumbnails and the points of a clicked "
    "confusion cell work offline; a box or lasso selection, another layout method, "
    "layer or split need a live kernel."
)


def _observed(w: W.Widget) -> set[str]:
    """Synced traits of ``w`` that Python observes (what a change in the browser asks of it)."""
    return {n for n in getattr(w, "_trait_notifiers", {}) if n in getattr(w, "keys", []) and n}


def _walk(w: W.Widget, name: str, values: list[Any]) -> Callable[[], Iterator[None]]:
    """A plan that sets ``w.<name>`` to each of ``values`` in turn."""

    def plan() -> Iterator[None]:
        for v in values:
            setattr(w, name, v)
            yield

    return plan


def _step_plan(w: W.Widget, steps: list[int], observed: set[str]) -> list[Group]:
    return [Group(w, type(w).__name__, ["step"], _walk(w, "step", steps), steps=steps)]


def _scrubber_plan(w: W.Widget, steps: list[int], observed: set[str]) -> list[Group]:
    return [Group(w, "scrubber", ["step"], _walk(w, "step", steps), steps=steps)]


def _layer_browser_plan(w: W.Widget, steps: list[int], observed: set[str]) -> list[Group]:
    names = [""] + [r["name"] for r in w.layers if r.get("recorded", True)]

    def plan() -> Iterator[None]:
        for layer in names:
            w.selected_layer = layer
            for s in steps:
                w.step = s
                yield

    return [Group(w, "LayerBrowser", ["selected_layer", "step"], plan, steps=steps)]


def _histograms_plan(w: W.Widget, steps: list[int], observed: set[str]) -> list[Group]:
    signals = list(w.traits()["signal"].values)

    def plan() -> Iterator[None]:
        start = w.signal
        for signal in [start] + [s for s in signals if s != start]:
            w.signal = signal
            first = w.layer  # what Python picks for this signal comes first
            for layer in [first] + [n for n in w.layer_choices if n != first]:
                w.layer = layer
                for s in steps:
                    w.step = s
                    yield

    inputs = ["signal", "layer", "step"]
    return [Group(w, "Histograms", inputs, plan, loose=["layer"], steps=steps)]


def _confusion_plan(w: W.Widget, steps: list[int], observed: set[str]) -> list[Group]:
    """Each split of the menu (the one shown first), each evaluation of any of them, each
    cell a click can select."""
    splits = [w.split] + [s for s in w.splits if s != w.split]
    evals = {int(s) for s in w.eval_steps} | ({steps[0]} if steps else set())
    for split in splits[1:]:
        evals |= {int(s) for s in w._run.prediction_steps(split)}
    walk = sorted(evals)

    def plan() -> Iterator[None]:
        for split in splits:
            w.selected = []
            w.split = split
            cells = _confusion_cells(w, walk)
            for s in walk:
                w.selected = []
                w.step = s
                yield
                # before the first evaluation too: a selection kept while the scrubber moves
                # there must find its answer (an empty matrix), or the view would stay behind
                for cell in cells:
                    w.selected = cell
                    yield
        w.selected = []
        w.split = splits[0]

    return [Group(w, "ConfusionMatrix", ["split", "step", "selected"], plan, steps=walk)]


def _health_plan(w: W.Widget, steps: list[int], observed: set[str]) -> list[Group]:
    plan = _walk(w, "selected", list(range(-1, len(w.findings))))
    return [Group(w, "HealthReport", ["selected"], plan)]


def _projector_plan(w: W.Widget, steps: list[int], observed: set[str]) -> list[Group]:
    out = _step_plan(w, steps, observed)
    if "hover_index" in observed:
        hovered = list(range(min(len(getattr(w, "_ids", ())), MAX_HOVER)))
        label = "EmbeddingProjector (hover)"
        out.append(Group(w, label, ["hover_index"], _walk(w, "hover_index", hovered)))
    return out


def _data_map_points(w: W.Widget) -> list[int]:
    """The points of a data map whose click is recorded: all of them up to MAX_MAP_POINTS,
    else those of its list of the most likely mislabelled."""
    n = int((w.points or {}).get("n", 0))
    if n <= MAX_MAP_POINTS:
        return list(range(n))
    return sorted({int(s["index"]) for s in w.suspects})


def data_map_note(w: W.Widget) -> str:
    """What a page says of a data map too large to hold every point's sample ("" if not)."""
    n = int((w.points or {}).get("n", 0))
    if n <= MAX_MAP_POINTS:
        return ""
    return (
        f"DataMap: a click shows the sample of the {len(w.suspects)} most likely mislabelled "
        f"(its list) in this page; the other {n - len(w.suspects):,} of its {n:,} points "
        "need a live kernel."
    )


def _data_map_plan(w: W.Widget, steps: list[int], observed: set[str]) -> list[Group]:
    """A click on each recorded point (or on its row of the list: the same answer)."""
    points = _data_map_points(w)
    if "picked" not in observed or not points:
        return []

    def plan() -> Iterator[None]:
        for i in points:
            w.picked = {"indices": array_trait_payload(np.asarray([i], dtype=np.uint32))}
            yield

    return [Group(w, "DataMap", ["picked"], plan)]


def prepare_views(tree: dict[str, W.Widget]) -> bool:
    """Make what a view shows only after a click (a data map's gallery) before recording:
    a page holds the views that exist when it is written. True when something was made
    (the tree is then to be walked again)."""
    made = False
    for w in list(tree.values()):
        if type(w).__name__ == "DataMap" and w.gallery is None and _data_map_points(w):
            w._ensure_gallery()
            made = True
    return made


_PLANS: dict[str, Plan] = {
    "StepScrubber": _scrubber_plan,
    "LayerBrowser": _layer_browser_plan,
    "Histograms": _histograms_plan,
    "ConfusionMatrix": _confusion_plan,
    "HealthReport": _health_plan,
    "EmbeddingProjector": _projector_plan,
    "DataMap": _data_map_plan,
}
"""Views with a plan of their own; any other view with an observed ``step`` walks the steps.
A SampleGallery is planned after the others: its selections come from their answers."""


def plan_groups(
    tree: dict[str, W.Widget], steps: list[int]
) -> tuple[list[Group], list[str], dict[str, list[str]]]:
    """What to record for each view of the tree, and what cannot be (as notes)."""
    groups: list[Group] = []
    notes: list[str] = []
    for w in tree.values():
        name = type(w).__name__
        observed = _observed(w)
        if not observed or not hasattr(w, "_esm") or name == "SampleGallery":
            continue
        plan = _PLANS.get(name)
        if plan is not None:
            groups.extend(plan(w, steps, observed))
        elif "step" in observed:
            groups.extend(_step_plan(w, steps, observed))
        if name == "EmbeddingProjector":
            notes.append(PROJECTOR_NOTE)
        if name == "DataMap" and data_map_note(w):
            notes.append(data_map_note(w))
    for w in tree.values():
        if type(w).__name__ == "SampleGallery":
            groups.append(_gallery_group(w))
    # what a view can change that Python answers but the page does not hold
    live_only: dict[str, list[str]] = {}
    for w in tree.values():
        name = type(w).__name__
        covered = {n for g in groups if g.owner is w for n in g.inputs}
        left = sorted(_observed(w) - covered - _KERNEL_SIDE.get(name, set()))
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
    with samples at some evaluation (a selection survives a change of step); for a
    large label set, the listed pairs and classes (``[class, -1]``) of each evaluation."""
    n = len(w.class_names)
    if w.mode == "matrix" and n * n <= MAX_ALL_CELLS:
        return [[t, p] for t in range(n) for p in range(n)]
    seen: set[tuple[int, int]] = set()
    for s in evals:
        w.step = s
        if w.mode == "pairs":
            seen.update((int(r["true"]), int(r["pred"])) for r in w.confused)
            seen.update((int(r["class"]), -1) for r in w.class_errors)
            continue
        counts = w.matrix.get("counts")
        if counts:
            m = array_from_payload(counts)
            seen.update((int(t), int(p)) for t, p in zip(*np.nonzero(m)))
    return [list(c) for c in sorted(seen)]


def _gallery_group(w: W.Widget) -> Group:
    """Pages and sort orders of a gallery, for each (step, ids) it was seen with."""
    # a new sort order starts at page 0 in Python: "page" is rewritten, so loose
    group = Group(
        w,
        "SampleGallery",
        ["split", "step", "ids", "sort_by", "descending", "page"],
        lambda: plan(),
        # with a split menu of its own, a new split brings its own ids
        loose=["page", "ids"] if len(w.splits) > 1 else ["page"],
    )
    group.contexts.append((w.split, int(w.step), list(w.ids)))
    start_split = w.split
    for split in w.splits:  # a gallery with a menu of its own: every split's samples
        if split != start_split:
            w.split = split
            group.contexts.append((split, int(w.step), list(w.ids)))
    w.split = start_split

    def plan() -> Iterator[None]:
        start_sort, start_desc = w.sort_by, w.descending
        for split, step, ids in list(group.contexts):
            # one sample (a clicked point) shows alike in every order: its first only
            orders = (
                []
                if len(ids) <= 1
                else [
                    (s, d)
                    for s, d in itertools.product(w.traits()["sort_by"].values, (True, False))
                    if (s, d) != (start_sort, start_desc)
                ]
            )
            for sort_by, desc in [(start_sort, start_desc), *orders]:
                w.split, w.step, w.ids = split, step, ids
                w.sort_by, w.descending = sort_by, desc
                w.page = 0
                yield
                if sort_by == start_sort and desc == start_desc:
                    for page in range(1, min(w.n_pages, MAX_GALLERY_PAGES)):
                        w.page = page
                        yield
        w.sort_by, w.descending = start_sort, start_desc
        w.split = start_split

    return group


def gallery_contexts(group: Group, recorded: list[Group], pool: Pool) -> None:
    """Add the (split, step, ids) a gallery took in the other views' recorded answers."""
    owner = group.owner
    mid = owner.model_id
    seen = {(sp, s, tuple(i)) for sp, s, i in group.contexts}

    def taken(out: dict[tuple[str, str], int], trait: str, now: Any) -> Any:
        return json.loads(pool.values[out[(mid, trait)]]) if (mid, trait) in out else now

    for g in recorded:
        if (mid, "ids") not in g.outputs:
            continue
        for _key, out in g.entries:
            ids = taken(out, "ids", [])
            step = int(taken(out, "step", int(owner.step)))
            split = str(taken(out, "split", owner.split))
            if ids and (split, step, tuple(ids)) not in seen:
                seen.add((split, step, tuple(ids)))
                group.contexts.append((split, step, [int(i) for i in ids]))


# -- recording a tree --------------------------------------------------------------------------


@dataclass
class Recording:
    """What the kernel answered for a widget tree, ready to be written into a page."""

    pool: Pool
    groups: list[Group]
    notes: list[str]
    """What the page cannot play back, in words."""
    live_only: dict[str, list[str]]
    """Per widget id: the inputs only a live kernel answers."""
    state: dict[str, dict[str, int]]
    """Per widget id: each synced trait's value (an index into the pool) as the page opens."""


def record_answers(tree: dict[str, W.Widget], steps: list[int], max_bytes: int) -> Recording:
    """Run every view's plan over ``steps`` and keep the answers, within ``max_bytes``.

    Live views stay still meanwhile: their pollers wait on the views' locks, and
    displayed views get one update at the end (``hold_sync``), not one per probe.
    """
    pool = Pool()
    locks = [w._lock for w in tree.values() if hasattr(w, "_lock")]
    with contextlib.ExitStack() as stack:
        for lock in locks:  # a live view's poller waits until the page is written
            stack.enter_context(lock)
        for w in tree.values():  # displayed views see one update at the end, not every probe
            stack.enter_context(w.hold_sync())
        recorder = stack.enter_context(Recorder(tree, pool, max_bytes))
        groups, notes, live_only = plan_groups(tree, steps)
        done: list[Group] = []
        for group in groups:
            if type(group.owner).__name__ == "SampleGallery":
                gallery_contexts(group, done, pool)
            recorder.record(group)
            done.append(group)
        state: dict[str, dict[str, int]] = {mid: {} for mid in tree}
        for (mid, name), i in recorder.current.items():
            state[mid][name] = i
    return Recording(pool, groups, notes, live_only, state)
