"""Dashboard: every view of a run on one screen, driven by one step scrubber.

The scrubber's ``step`` is linked to the ``step`` of every view with
``ipywidgets.jslink``, a link kept by the browser: moving the slider moves
every view at once, without a round trip through the kernel, and the link
still holds in a saved HTML page.

The layout (``js/dashboard.js``) keeps the scrubber in a sticky header, above
one tab per group of views (:data:`SECTIONS`); a tab shows its views side by
side where the width allows. Views that have nothing to show yet (no captures,
no predictions) are left out and ``notes`` says why; while the Dashboard
follows the run, each appears when its data arrives. When the run's file is
replaced (``nbviz.Run(path, overwrite=True)`` run again), the Dashboard
rebuilds itself on the new run and says so in its header. For a model that is
not a classifier (evaluated with a ``loss_fn``) the views of classes stay out
(``notes`` and the header say why) and a gallery of its samples, highest loss
first, takes the confusion matrix's place. A view whose part of the run file
does not read (a damaged or crafted table) is left out the same way, its note
naming the file and what is wrong, and the other views are shown.
"""

from __future__ import annotations

import contextlib
import threading
import time
from importlib import import_module
from pathlib import Path
from typing import Any

import ipywidgets as W
import traitlets

from nbviz.store import RunFileError
from nbviz.widgets.base import NbvizWidget, child_view
from nbviz.widgets.checks import check_flag, check_run
from nbviz.widgets.export import save_html
from nbviz.widgets.frontend import esm
from nbviz.widgets.live import POLL_INTERVAL, follow, unfollow
from nbviz.widgets.scrubber import StepScrubber

__all__ = ["SECTIONS", "Dashboard"]

_BY_LOSS = {"sort_by": "loss", "descending": True}
_NO_CLASSES = (
    "the predictions have no classes (a loss per sample: a language model, a class per "
    "position, or a model evaluated with loss_fn=...)"
)
_NO_EMBEDDINGS = (
    "predictions but no embeddings (run.evaluate takes them at the input of the model's "
    "last nn.Linear, or at embed_layer=; run.log_embeddings records any)"
)

# (attribute, module, class, what the run must hold for it, keyword arguments)
_VIEWS: tuple[tuple[str, str, str, str, dict[str, Any]], ...] = (
    ("loss_curves", "nbviz.widgets.loss_curves", "LossCurves", "scalars", {}),
    ("health", "nbviz.widgets.health", "HealthReport", "anything", {}),
    ("layers", "nbviz.widgets.layer_browser", "LayerBrowser", "captures", {}),
    ("histograms", "nbviz.widgets.histograms", "Histograms", "histograms", {}),
    ("confusion", "nbviz.widgets.confusion", "ConfusionMatrix", "class predictions", {}),
    ("samples", "nbviz.widgets.gallery", "SampleGallery", "losses without classes", _BY_LOSS),
    ("projector", "nbviz.widgets.projector", "EmbeddingProjector", "embeddings", {"method": "pca"}),
    ("data_map", "nbviz.widgets.data_map", "DataMap", "training dynamics", {}),
    ("profiler", "nbviz.widgets.profiler", "Profiler", "profiles", {}),
)

SECTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("overview", "Overview", ("health", "loss_curves")),
    ("layers", "Layers", ("layers", "histograms")),
    ("predictions", "Predictions", ("confusion", "samples", "projector")),
    ("data", "Training data", ("data_map",)),
    ("time", "Time", ("profiler",)),
)
"""The Dashboard's tabs: (key, title, the views it holds, in order); a tab with no view
is left out."""

_TITLES = {
    "loss_curves": "Loss and metrics",
    "health": "Findings",
    "layers": "Layers",
    "histograms": "Distributions over steps",
    "confusion": "Where the model errs",
    "samples": "The samples with the highest loss",
    "projector": "Embeddings",
    "data_map": "Training data map",
    "profiler": "Where a step spends its time",
}
# the narrowest each view reads well at (px): two views share a row where both fit,
# else each takes the whole width; None: always the whole width
_MIN_WIDTH: dict[str, int | None] = {
    "loss_curves": 560,
    "health": 360,
    "layers": None,
    "histograms": None,
    "confusion": 400,
    "samples": 400,
    "projector": 400,
    "data_map": None,
    "profiler": None,
}


def _holds(run: Any, what: str) -> bool:
    if what == "scalars":
        return bool(run.scalar_names())
    if what == "captures":
        return bool(run.recorded_layers())
    if what == "histograms":
        return bool(run.recorded_layers(table="histograms"))
    if what == "class predictions":
        return any(run.predicts_classes(split) for split in run.splits())
    if what == "losses without classes":  # the samples a model that is not a classifier errs on
        return run.predicts_classes("val") is False
    if what == "embeddings":
        return any(run.embedding_layers(split) for split in run.splits("embeddings"))
    if what == "anything":  # the verdict reads the loss alone if that is all there is
        return bool(run.scalar_names() or run.recorded_layers() or run.splits())
    if what == "training dynamics":  # the training split's classes evaluated at two steps or more
        return len(run.prediction_steps("train")) >= 2 and bool(run.predicts_classes("train"))
    if what == "profiles":
        return bool(len(run.profile_steps()))
    raise ValueError(f"Dashboard: unknown requirement {what!r}")


def _why_left_out(run: Any, cls_name: str, what: str) -> str:
    """The one line saying why a view is not in the Dashboard ('' where nothing is amiss)."""
    if what == "losses without classes":
        return ""  # a classifier's samples open from the ConfusionMatrix
    splits = run.splits()
    if what == "class predictions" and splits:
        return f"{cls_name}: {_NO_CLASSES}"
    if what == "training dynamics" and run.predicts_classes("train") is False:
        return f"{cls_name}: {_NO_CLASSES}"
    if what == "embeddings" and splits:
        return f"{cls_name}: {_NO_EMBEDDINGS}"
    return f"{cls_name}: no {what} in this run yet"


class Dashboard(NbvizWidget):
    """The views of ``run`` on one screen, linked by a :class:`StepScrubber` kept in view.

    Each view is also an attribute (``dash.scrubber``, ``dash.loss_curves``,
    ``dash.layers``, ``dash.histograms``, ...; None when left out), so a
    notebook can reach into it, e.g. ``dash.scrubber.step = 40``; ``dash.tab``
    is the open tab (a key of :data:`SECTIONS`, e.g. ``"layers"``).

    Parameters
    ----------
    run
        A run (``nbviz.Run`` or ``nbviz.open_run(...)``).
    live
        Follow the run while it grows (the default): views appear as their data
        arrives, and a run recorded afresh at the same path is followed.
    """

    _esm = esm("dashboard")

    scrubber = child_view(StepScrubber)
    sections = traitlets.List(
        traitlets.Dict(), help="The tabs: key, title and panels (title, view, min_width)."
    ).tag(sync=True, **W.widget_serialization)
    tab = traitlets.Unicode("overview", help="Key of the open tab.").tag(sync=True)
    banner = traitlets.Unicode("", help="A sentence about the run shown (e.g. replaced).").tag(
        sync=True
    )
    pending = traitlets.Unicode("", help="What is not shown and why, one line each.").tag(sync=True)

    def __init__(self, run: Any, *, live: bool = True, **kwargs: Any) -> None:
        # what close() reads, set before anything can fail (ipywidgets closes on __del__)
        self.links: list[W.jslink] = []
        self._dlinks: list[Any] = []  # kernel-side links between views
        self.views: dict[str, Any] = {}
        self._lock = threading.RLock()
        self._opened: Any = None  # a run this Dashboard opened itself (a replaced one's new file)
        self._cross: set[str] = set()
        self._retries = 0
        self._closed = False
        check_run("Dashboard", run)
        live = check_flag("Dashboard", "live", live)
        super().__init__(**kwargs)
        self.live = live
        self.notes: list[str] = []
        with self._lock, self.hold_sync():
            self._build(run)
        if self.live:
            follow(self, run, self._on_run_grew, replaced=self._on_replaced)

    # -- building -------------------------------------------------------------------------

    def _build(self, run: Any) -> None:
        self.run = run
        self.views = {}
        self.links = []
        self._dlinks = []
        self._cross = set()
        for attr, *_ in _VIEWS:
            setattr(self, attr, None)
        self.scrubber = StepScrubber(run, live=self.live)
        self._add_views()
        self._layout()

    def _add_views(self) -> bool:
        """Make the views whose data the run now holds; True when one was added."""
        added = False
        self.notes = []
        for attr, module_name, cls_name, needs, extra in _VIEWS:
            if attr in self.views:
                continue
            try:
                module = import_module(module_name)
            except ModuleNotFoundError as exc:
                if exc.name != module_name:
                    raise
                continue  # a view this version does not have
            if not _holds(self.run, needs):
                note = _why_left_out(self.run, cls_name, needs)
                if note:
                    self.notes.append(note)
                continue
            try:
                view = getattr(module, cls_name)(self.run, live=self.live, **extra)
            except RunFileError as exc:  # one damaged table: that view out, said; the rest shown
                self.notes.append(f"{cls_name}: {exc}")
                continue
            setattr(self, attr, view)
            self.views[attr] = view
            if "step" in view.trait_names():
                view.follow_newest = False  # the scrubber follows the run; the view follows it
                view.step = self.scrubber.step
                self.links.append(W.jslink((self.scrubber, "step"), (view, "step")))
            added = True
        self._link_views()
        return added

    def _layout(self) -> None:
        sections = []
        for key, title, attrs in SECTIONS:
            panels = [
                {"title": _TITLES[a], "view": self.views[a], "min_width": _MIN_WIDTH[a]}
                for a in attrs
                if a in self.views
            ]
            if panels:
                sections.append({"key": key, "title": title, "panels": panels})
        self.sections = sections
        # what is not shown, and why: one line each
        lines = [f"Not shown: {note}" for note in self.notes]
        if self.live and any(note.endswith(" yet") for note in self.notes):
            lines.append("A view not shown yet appears here when its data is recorded.")
        self.pending = "\n".join(lines)

    def _link_views(self) -> None:
        """Cross-view links: a finding opens its layer, or its training samples in the data
        map; a confusion cell highlights points. Each made once, when both views exist."""
        health, layers = self.views.get("health"), self.views.get("layers")
        if health is not None and layers is not None and "layers" not in self._cross:
            self._cross.add("layers")
            layers.badges = health.badges()
            health.observe(lambda _: setattr(layers, "badges", health.badges()), "findings")

            def open_layer(change: Any) -> None:
                names = {row["name"] for row in layers.layers}
                if change["new"] in names:
                    layers.selected_layer = change["new"]
                    self.tab = "layers"

            health.observe(open_layer, "layer")
        data_map = self.views.get("data_map")
        if health is not None and data_map is not None and "data_map" not in self._cross:
            self._cross.add("data_map")
            # a finding about training samples (the mislabelled ones) selects them

            def show_samples(change: Any) -> None:
                if health.selected_split == data_map.split and change["new"]:
                    data_map.selected_ids = list(change["new"])
                    self.tab = "data"

            health.observe(show_samples, "selected_ids")
        confusion, projector = self.views.get("confusion"), self.views.get("projector")
        if confusion is not None and projector is not None and "projector" not in self._cross:
            self._cross.add("projector")
            if "highlight_ids" in projector.trait_names():
                self._dlinks.append(
                    W.dlink((confusion, "selected_ids"), (projector, "highlight_ids"))
                )

            def same_split(change: Any) -> None:  # the highlighted ids are that split's
                if change["new"] in projector.splits:
                    projector.split = change["new"]

            confusion.observe(same_split, "split")

    # -- following ------------------------------------------------------------------------

    def _on_run_grew(self) -> None:
        """From the poller: add the views whose data arrived."""
        with self._lock:
            if self._closed or len(self.views) == len(_VIEWS) or self.scrubber is None:
                return
            with self.hold_sync():
                self.scrubber._on_run_grew()  # up to date first: new views open at its step
                if self._add_views():
                    self._layout()

    def _on_replaced(self) -> None:
        """From the poller: the run's file was replaced; show the new run in its place."""
        from nbviz.run import open_run

        with self._lock:
            if self._closed:
                return
            path = Path(self.run.run_dir)
            self._close_views()
            if self._opened is not None:
                self._opened.close()
            try:
                self._opened = open_run(path)
            except Exception as exc:  # the new file is still being created: look again soon
                self._opened = None
                self.sections = []
                self.banner = (
                    f"The run at {path} was replaced; the new one cannot be read yet ({exc})."
                )
                if self._retries < 25:
                    self._retries += 1
                    retry = threading.Timer(POLL_INTERVAL, self._on_replaced)
                    retry.daemon = True
                    retry.start()
                return
            self._retries = 0
            with self.hold_sync():
                self._build(self._opened)
                self.banner = (
                    f"The run at {path} was recorded afresh at {time.strftime('%H:%M:%S')}; "
                    "this dashboard now shows the new run (the old one is gone)."
                )
            follow(self, self._opened, self._on_run_grew, replaced=self._on_replaced)

    # -- the rest -------------------------------------------------------------------------

    def save_html(self, path: str | Path, **kwargs: Any) -> Any:
        """Write the dashboard as one self-contained HTML file that opens offline.

        The scrubber still moves every view and clicks still open what they open,
        on the recorded data; see :func:`nbviz.widgets.export.offline_page` for the
        options. Returns a ``PageInfo`` (path, size, notes).
        """
        return save_html(self, path, **kwargs)

    def _close_views(self) -> None:
        for link in self.__dict__.get("links", ()):
            link.close()
        for link in self.__dict__.get("_dlinks", ()):
            with contextlib.suppress(ValueError):  # unlinked already
                link.unlink()
        self.__dict__["links"], self.__dict__["_dlinks"] = [], []
        for view in self.__dict__.get("views", {}).values():
            view.close()
        scrubber = self._trait_values.get("scrubber")
        if scrubber is not None:
            scrubber.close()

    def close(self) -> None:
        """Close every view (they stop following the run) and the layout."""
        unfollow(self)
        self._closed = True
        lock = self.__dict__.get("_lock")
        with lock if lock is not None else threading.RLock():
            self._close_views()
            opened = self.__dict__.get("_opened")
            if opened is not None:
                opened.close()
                self._opened = None
        super().close()


Dashboard._css = (
    NbvizWidget._css
    + """
.nbviz-dash-header { position: relative; z-index: 20;
  background: var(--jp-layout-color0, #fff); padding: 4px 0 2px 0;
  border-bottom: 1px solid var(--jp-border-color2, #e0e0e0); }
.nbviz-dash-stuck { box-shadow: 0 2px 4px rgba(0, 0, 0, 0.15); }
.nbviz-dash-tabs { display: flex; flex-wrap: wrap; gap: 2px; margin-top: 4px; }
.nbviz-dash-tab { font: inherit; padding: 2px 12px; cursor: pointer; color: inherit;
  border: 1px solid var(--jp-border-color1, #bdbdbd); border-bottom: none;
  border-radius: 4px 4px 0 0; background: var(--jp-layout-color2, #f5f5f5); }
.nbviz-dash-tab-open { background: var(--jp-layout-color0, #fff); font-weight: 600;
  box-shadow: inset 0 2px 0 var(--jp-brand-color1, #1976d2); }
.nbviz-dash-banner { margin-top: 4px; padding: 2px 8px; border-left: 4px solid #e65100;
  background: #fff3e0; }
.nbviz-dash-pending { margin-top: 2px; color: var(--jp-ui-font-color2, #616161);
  font-style: italic; white-space: pre-line; }
.nbviz-dash-grid { display: flex; flex-wrap: wrap; gap: 10px 16px; align-items: flex-start; }
.nbviz-dash-panel { flex: 1 1 100%; min-width: 0; }
.nbviz-dash-title { font-size: 1em; font-weight: 600; margin: 8px 0 4px 0; }
.nbviz-dash-view { min-width: 0; overflow-x: auto; }
"""
)
