"""The read side of a run: :class:`Reader`, every table's queries in one object.

Each table's queries live in a module of their own, on the shared base of
:mod:`nbviz.store.query` (connections per thread, step selection, error texts):

- :mod:`~nbviz.store.scalars`: ``meta`` and ``scalars``;
- :mod:`~nbviz.store.scalar_times`: when scalars were logged, by step;
- :mod:`~nbviz.store.layer_stats`: ``layer_stats`` and ``unit_stats``;
- :mod:`~nbviz.store.histograms`: ``histograms``;
- :mod:`~nbviz.store.events`: ``events``;
- :mod:`~nbviz.store.predictions`: ``predictions`` and ``probabilities``;
- :mod:`~nbviz.store.samples`: ``samples`` and ``captures``;
- :mod:`~nbviz.store.embeddings`: ``embeddings`` and ``projections``;
- :mod:`~nbviz.store.profiles`: ``profiles``;
- :mod:`~nbviz.store.summary_queries`: bounded reads of long runs (summaries, seeks);
- :mod:`~nbviz.store.attention`: ``attention``;
- :mod:`~nbviz.store.tokens`: a language model's per-token losses (in ``outputs``);
- :mod:`~nbviz.store.unit_tokens`: ``unit_tokens`` (each unit's top-activating tokens).

A Reader can follow a run that another process is writing: every call is a
fresh read transaction, so it sees the latest commit. Each thread gets its own
connection, so one Reader may be shared between threads. Where a query takes
``steps`` and ``step_range``, see :mod:`nbviz.store.query` for what they select.
"""

from __future__ import annotations

from nbviz.store.attention import AttentionQueries
from nbviz.store.embeddings import EmbeddingQueries
from nbviz.store.events import EventQueries
from nbviz.store.histograms import HistogramQueries, HistogramRows
from nbviz.store.layer_stats import LayerStatsQueries
from nbviz.store.predictions import PredictionQueries
from nbviz.store.profiles import ProfileQueries
from nbviz.store.query import MissingStepError
from nbviz.store.samples import SampleQueries
from nbviz.store.scalar_times import ScalarTimeQueries
from nbviz.store.scalars import ScalarQueries
from nbviz.store.summary_queries import SeriesSummary, SummaryQueries
from nbviz.store.tokens import TokenQueries
from nbviz.store.unit_tokens import UnitTokenQueries

__all__ = ["HistogramRows", "MissingStepError", "Reader", "SeriesSummary"]


class Reader(
    ScalarQueries,
    ScalarTimeQueries,
    LayerStatsQueries,
    HistogramQueries,
    EventQueries,
    PredictionQueries,
    SampleQueries,
    EmbeddingQueries,
    ProfileQueries,
    SummaryQueries,
    AttentionQueries,
    TokenQueries,
    UnitTokenQueries,
):
    """Read-only access to one run directory: ``Reader(run_dir, must_exist=True)``.

    Raises FileNotFoundError when the directory holds no ``run.sqlite`` and
    SchemaError when its schema is not the one this nbviz reads. With
    ``must_exist=False`` the run may appear later (another process creating it);
    it is opened at the first read. ``close()`` (or leaving a ``with`` block)
    closes every connection it opened.
    """
