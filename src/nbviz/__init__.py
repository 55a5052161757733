"""nbviz: look inside a neural network while it trains, in the notebook.

Probes watch a PyTorch model through hooks, an embedded SQLite run store keeps
what they saw, and anywidget views show it. The names below are the public API;
they are imported lazily so that ``import nbviz`` stays fast and reading a run
needs neither torch nor a widget library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from nbviz._version import __version__

# public name -> module that defines it
_PUBLIC = {
    "Run": "nbviz.run",
    "open_run": "nbviz.run",
    "open_runs": "nbviz.many_runs",
    "from_tensorboard": "nbviz.importers.tensorboard",
    "Probe": "nbviz.probes.probe",
    "Dashboard": "nbviz.widgets.dashboard",
    "LossCurves": "nbviz.widgets.loss_curves",
    "RunsTable": "nbviz.widgets.runs_table",
    "LayerBrowser": "nbviz.widgets.layer_browser",
    "Histograms": "nbviz.widgets.histograms",
    "ConfusionMatrix": "nbviz.widgets.confusion",
    "SampleGallery": "nbviz.widgets.gallery",
    "EmbeddingProjector": "nbviz.widgets.projector",
    "StepScrubber": "nbviz.widgets.scrubber",
    "HealthReport": "nbviz.widgets.health",
    "DataMap": "nbviz.widgets.data_map",
    "Profiler": "nbviz.widgets.profiler",
    "AttentionMaps": "nbviz.widgets.attention",
}

__all__ = ["__version__", *sorted(_PUBLIC)]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from nbviz.many_runs import open_runs  # noqa: F401
    from nbviz.run import Run, open_run  # noqa: F401


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'nbviz' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
