"""Dashboard: every view of a run in one layout, driven by one step scrubber.

The scrubber's ``step`` is linked to the ``step`` of every view with
``ipywidgets.jslink``, a link kept by the browser: moving the slider moves
every view at once, without a round trip through the kernel, and the link
still holds in a saved HTML page. Views that have nothing to show for this
run (no captures, no predictions) are left out, and ``notes`` says why (also
shown under the views). For a model that is not a classifier (evaluated with a
``loss_fn``) the views of classes stay out and a gallery of its samples,
highest loss first, takes the confusion matrix's place.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

import ipywidgets as W

from nbviz.widgets.checks import check_run
from nbviz.widgets.export import save_html
from nbviz.widgets.scrubber import StepScrubber

__all__ = ["Dashboard"]

_BY_LOSS = {"sort_by": "loss", "descending": True}
_NO_CLASSES = "the predictions have no classes (a model evaluated by its loss, loss_fn=...)"

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
    return f"{cls_name}: no {what} in this run yet"


class Dashboard(W.VBox):
    """The views of ``run`` in one column, linked by a :class:`StepScrubber` on top.

    Each view is also an attribute (``dash.scrubber``, ``dash.loss_curves``,
    ``dash.layers``, ``dash.histograms``, ...; None when left out), so a
    notebook can reach into it, e.g. ``dash.scrubber.step = 40``.

    Parameters
    ----------
    run
        A run (``nbviz.Run`` or ``nbviz.open_run(...)``).
    live
        Follow the run while it grows (the default).
    """

    def __init__(self, run: Any, *, live: bool = True, **kwargs: Any) -> None:
        # what close() reads, set before anything can fail (ipywidgets closes on __del__)
        self.links: list[W.jslink] = []
        self.views: dict[str, Any] = {}
        self.scrubber: StepScrubber | None = None
        check_run("Dashboard", run)
        self.run = run
        self.scrubber = StepScrubber(run, live=live)
        self.notes: list[str] = []
        for attr, module_name, cls_name, needs, extra in _VIEWS:
            setattr(self, attr, None)
            try:
                module = import_module(module_name)
            except ModuleNotFoundError as exc:
                if exc.name != module_name:
                    raise
                continue  # a view this version does not have
            if not _holds(run, needs):
                note = _why_left_out(run, cls_name, needs)
                if note:
                    self.notes.append(note)
                continue
            view = getattr(module, cls_name)(run, live=live, **extra)
            setattr(self, attr, view)
            self.views[attr] = view
            if "step" in view.trait_names():
                view.step = self.scrubber.step
                self.links.append(W.jslink((self.scrubber, "step"), (view, "step")))
        self._link_views()
        children: list[W.Widget] = [self.scrubber]
        for attr, view in self.views.items():
            children.append(self._section(attr, view))
        if self.notes:  # what is not shown, and why: one line each
            lines = [W.Label(value=f"Not shown: {note}") for note in self.notes]
            children.append(W.VBox(lines, layout=W.Layout(margin="8px 0 0 0")))
            children[-1].add_class("nbviz-dashboard-notes")
        super().__init__(children=children, **kwargs)
        self.add_class("nbviz-dashboard")

    def _link_views(self) -> None:
        """Cross-view links: a finding opens its layer, or its training samples in the data
        map; a confusion cell highlights points."""
        health, layers = self.views.get("health"), self.views.get("layers")
        if health is not None and layers is not None:
            layers.badges = health.badges()
            health.observe(lambda _: setattr(layers, "badges", health.badges()), "findings")

            def open_layer(change: Any) -> None:
                names = {row["name"] for row in layers.layers}
                if change["new"] in names:
                    layers.selected_layer = change["new"]

            health.observe(open_layer, "layer")
        data_map = self.views.get("data_map")
        if health is not None and data_map is not None:
            # a finding about training samples (the mislabelled ones) selects them

            def show_samples(change: Any) -> None:
                if health.selected_split == data_map.split and change["new"]:
                    data_map.selected_ids = list(change["new"])

            health.observe(show_samples, "selected_ids")
        confusion, projector = self.views.get("confusion"), self.views.get("projector")
        if confusion is not None and projector is not None:
            if "highlight_ids" in projector.trait_names():
                W.dlink((confusion, "selected_ids"), (projector, "highlight_ids"))

            def same_split(change: Any) -> None:  # the highlighted ids are that split's
                if change["new"] in projector.splits:
                    projector.split = change["new"]

            confusion.observe(same_split, "split")

    @staticmethod
    def _section(attr: str, view: W.Widget) -> W.Widget:
        title = {
            "loss_curves": "Loss and metrics",
            "health": "Findings",
            "layers": "Layers",
            "histograms": "Distributions over steps",
            "confusion": "Where the model errs",
            "samples": "The samples with the highest loss",
            "projector": "Embeddings",
            "data_map": "Training data map",
            "profiler": "Where a step spends its time",
        }[attr]
        header = W.HTML()
        header.value = f"<b>{title}</b>"  # a fixed title, never text from data
        return W.VBox([header, view], layout=W.Layout(margin="8px 0 0 0"))

    def save_html(self, path: str | Path, **kwargs: Any) -> Any:
        """Write the dashboard as one self-contained HTML file that opens offline.

        The scrubber still moves every view and clicks still open what they open,
        on the recorded data; see :func:`nbviz.widgets.export.offline_page` for the
        options. Returns a ``PageInfo`` (path, size, notes).
        """
        return save_html(self, path, **kwargs)

    def close(self) -> None:
        """Close every view (they stop following the run) and the layout."""
        for link in self.__dict__.get("links", ()):
            link.close()
        for view in self.__dict__.get("views", {}).values():
            view.close()
        if self.__dict__.get("scrubber") is not None:
            self.scrubber.close()
        super().close()
