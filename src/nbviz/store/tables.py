"""The run store's tables: what ``Writer.insert`` takes, and what each schema version holds.

:data:`TABLES` is the column order of the rows handed to ``Writer.insert`` (the
write API, the same in every version). Schema 3 stores three of those tables
otherwise than they are handed over (:data:`STORED`): the statistics,
histograms and per-unit values of a layer name a *series* by an integer
(``series.id`` for a ``(layer, signal)`` pair) instead of repeating the two
names in every row and index entry, statistics and histograms cluster on
``(step, series)`` so that a run is appended to in key order, and histogram
counts are kept at the narrowest width that holds them (``bins`` says how many;
1, 2 or 4 byte unsigned or 8 byte signed little-endian integers). The writer
turns rows into that form (:mod:`nbviz.store.encoding`) and keeps summaries as
it writes (:mod:`nbviz.store.summaries`): min/max/mean buckets of every series
at a few resolutions and the runs of steps each signal was recorded at, so
that a view reads a bounded amount of a run however long it is.

Schema 6 adds ``histogram_bins``: a histogram's bins as they were logged where
they are not the uniform bins of its ``histograms`` row (a TensorBoard log's
exponential buckets), keyed like ``histograms`` by ``(step, sid)``; the views
keep drawing the uniform row, ``run.histogram`` returns these.

Schema 7 adds ``unit_tokens``: for a language model's evaluation, the tokens on
which each unit of a layer was most active (:mod:`nbviz.recording.unit_tokens`),
one row per ``(split, layer, step)``.

Schema 8 adds ``scalar_chunks`` and ``scalar_bucket_chunks``: every scalar's rows,
and its buckets of each level, packed in blocks (:mod:`nbviz.store.scalar_chunks`),
so that a zoom into a long run reads a handful of rows.
"""

from __future__ import annotations

SCHEMA_VERSION = 8
SIGNALS = ("activation", "gradient", "weight", "update")

# Column order of every table: the order of the tuples handed to Writer.insert.
TABLES: dict[str, tuple[str, ...]] = {
    "meta": ("key", "value"),
    "scalars": ("name", "step", "value", "wall_time"),
    "layer_stats": (
        "step",
        "layer",
        "signal",
        "count",
        "mean",
        "std",
        "min",
        "max",
        "zero_frac",
        "nonfinite",
        "norm",
        "rel",
    ),
    "histograms": (
        "step",
        "layer",
        "signal",
        "lo",
        "hi",
        "counts",
        "underflow",
        "overflow",
        "nonfinite",
    ),
    "unit_stats": ("step", "layer", "signal", "values"),
    "events": ("kind", "layer", "signal", "step", "detail"),
    "predictions": ("split", "step", "id", "label", "pred", "loss", "confidence"),
    "probabilities": ("split", "step", "ids", "probs", "dtype", "shape"),
    "samples": ("split", "id", "label", "kind", "payload", "dtype", "shape", "text"),
    "embeddings": (
        "split",
        "layer",
        "kind",
        "step",
        "ids",
        "matrix",
        "dtype",
        "shape",
    ),
    "projections": (
        "key",
        "split",
        "layer",
        "step",
        "method",
        "params",
        "matrix",
        "dtype",
        "shape",
        "created",
    ),
    "profiles": ("step", "name", "payload"),
    "outputs": (
        "split",
        "step",
        "ids",
        "outputs",
        "outputs_dtype",
        "outputs_shape",
        "targets",
        "targets_dtype",
        "targets_shape",
        "targets_from",
    ),
    "captures": (
        "split",
        "id",
        "step",
        "position",
        "layer",
        "type",
        "summary",
        "units",
        "maps",
        "maps_shape",
    ),
    "attention": ("step", "layer", "position", "maps", "dtype", "shape", "stats"),
    "histogram_bins": ("step", "layer", "signal", "edges", "counts"),
    "unit_tokens": (
        "split",
        "step",
        "layer",
        "units",
        "k",
        "before",
        "width",
        "ids",
        "positions",
        "values",
        "contexts",
        "nonfinite",
    ),
}

_CAPTURES_DDL = """CREATE TABLE IF NOT EXISTS captures(
        split TEXT NOT NULL, id INTEGER NOT NULL, step INTEGER NOT NULL,
        position INTEGER NOT NULL, layer TEXT NOT NULL, type TEXT, summary TEXT NOT NULL,
        units BLOB, maps BLOB, maps_shape TEXT,
        PRIMARY KEY(split, id, step, layer))"""

# Schema 2, as nbviz wrote it (runs of that version are read after a migration).
_DDL_V2: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS meta(
        key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS scalars(
        name TEXT NOT NULL, step INTEGER NOT NULL, value REAL, wall_time REAL,
        PRIMARY KEY(name, step)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS layer_stats(
        step INTEGER NOT NULL, layer TEXT NOT NULL, signal TEXT NOT NULL,
        count INTEGER, mean REAL, std REAL, min REAL, max REAL, zero_frac REAL,
        nonfinite INTEGER, norm REAL, rel REAL,
        PRIMARY KEY(step, signal, layer)) WITHOUT ROWID""",
    """CREATE INDEX IF NOT EXISTS layer_stats_by_layer
        ON layer_stats(layer, signal, step)""",
    """CREATE TABLE IF NOT EXISTS histograms(
        step INTEGER NOT NULL, layer TEXT NOT NULL, signal TEXT NOT NULL,
        lo REAL, hi REAL, counts BLOB NOT NULL, underflow INTEGER,
        overflow INTEGER, nonfinite INTEGER,
        PRIMARY KEY(step, signal, layer))""",
    """CREATE INDEX IF NOT EXISTS histograms_by_layer
        ON histograms(layer, signal, step)""",
    """CREATE TABLE IF NOT EXISTS unit_stats(
        step INTEGER NOT NULL, layer TEXT NOT NULL, signal TEXT NOT NULL,
        "values" BLOB NOT NULL,
        PRIMARY KEY(layer, signal, step))""",
    """CREATE TABLE IF NOT EXISTS events(
        kind TEXT NOT NULL, layer TEXT NOT NULL, signal TEXT NOT NULL,
        step INTEGER, detail TEXT,
        PRIMARY KEY(kind, layer, signal)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS predictions(
        split TEXT NOT NULL, step INTEGER NOT NULL, id INTEGER NOT NULL,
        label INTEGER, pred INTEGER, loss REAL, confidence REAL,
        PRIMARY KEY(split, step, id)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS probabilities(
        split TEXT NOT NULL, step INTEGER NOT NULL, ids BLOB NOT NULL,
        probs BLOB NOT NULL, dtype TEXT NOT NULL, shape TEXT NOT NULL,
        PRIMARY KEY(split, step))""",
    """CREATE TABLE IF NOT EXISTS samples(
        split TEXT NOT NULL, id INTEGER NOT NULL, label INTEGER,
        kind TEXT NOT NULL, payload BLOB, dtype TEXT, shape TEXT, text TEXT,
        PRIMARY KEY(split, id))""",
    """CREATE TABLE IF NOT EXISTS embeddings(
        split TEXT NOT NULL, layer TEXT NOT NULL, kind TEXT NOT NULL,
        step INTEGER NOT NULL, ids BLOB NOT NULL, matrix BLOB NOT NULL,
        dtype TEXT NOT NULL, shape TEXT NOT NULL,
        PRIMARY KEY(split, layer, kind, step))""",
    """CREATE TABLE IF NOT EXISTS projections(
        key TEXT PRIMARY KEY, split TEXT, layer TEXT, step INTEGER,
        method TEXT, params TEXT, matrix BLOB NOT NULL, dtype TEXT NOT NULL,
        shape TEXT NOT NULL, created REAL)""",
    """CREATE TABLE IF NOT EXISTS profiles(
        step INTEGER NOT NULL, name TEXT NOT NULL, payload TEXT,
        PRIMARY KEY(step, name)) WITHOUT ROWID""",
    _CAPTURES_DDL,
)


#: Tables stored in another shape than :data:`TABLES` hands them over (schema 3; 6):
#: their stored column order, ``sid`` being the ``series.id`` of ``(layer, signal)``.
STORED: dict[str, tuple[str, ...]] = {
    "layer_stats": (
        "step",
        "sid",
        "count",
        "mean",
        "std",
        "min",
        "max",
        "zero_frac",
        "nonfinite",
        "norm",
        "rel",
    ),
    "histograms": (
        "step",
        "sid",
        "lo",
        "hi",
        "counts",
        "bins",
        "underflow",
        "overflow",
        "nonfinite",
    ),
    "unit_stats": ("step", "sid", "values"),
    "histogram_bins": ("step", "sid", "edges", "counts"),
}

#: Tables the writer keeps itself (not written through ``Writer.insert``): the series
#: ids and the summaries of :mod:`nbviz.store.summaries`.
INTERNAL_TABLES: tuple[str, ...] = (
    "series",
    "step_runs",
    "scalar_buckets",
    "stat_buckets",
    "scalar_chunks",
    "scalar_bucket_chunks",
)

#: Bucket widths of the summaries: level k holds buckets of ``16 ** (k + 1)`` steps.
LEVEL_WIDTHS: tuple[int, ...] = tuple(16 ** (k + 1) for k in range(5))

_V3_CHANGED = {"layer_stats", "layer_stats_by_layer", "histograms", "histograms_by_layer"}
_V3_CHANGED |= {"unit_stats"}


def _name(statement: str) -> str:
    """The name a ``CREATE ... IF NOT EXISTS name`` statement creates."""
    return statement.split()[5].partition("(")[0]


# Small rows cluster on their key (WITHOUT ROWID); rows that carry blobs of any
# size keep a rowid (SQLite advises against WITHOUT ROWID for rows over ~1/20 of
# a page). Histograms are kept compact enough to cluster.
_DDL_V3: tuple[str, ...] = (
    *(d for d in _DDL_V2 if _name(d) not in _V3_CHANGED),
    """CREATE TABLE IF NOT EXISTS series(
        id INTEGER PRIMARY KEY, layer TEXT NOT NULL, signal TEXT NOT NULL,
        UNIQUE(layer, signal))""",
    """CREATE TABLE IF NOT EXISTS layer_stats(
        step INTEGER NOT NULL, sid INTEGER NOT NULL,
        count INTEGER, mean REAL, std REAL, min REAL, max REAL, zero_frac REAL,
        nonfinite INTEGER, norm REAL, rel REAL,
        PRIMARY KEY(step, sid)) WITHOUT ROWID""",
    """CREATE INDEX IF NOT EXISTS layer_stats_by_series ON layer_stats(sid, step)""",
    """CREATE TABLE IF NOT EXISTS histograms(
        step INTEGER NOT NULL, sid INTEGER NOT NULL, lo REAL, hi REAL,
        counts BLOB NOT NULL, bins INTEGER NOT NULL, underflow INTEGER,
        overflow INTEGER, nonfinite INTEGER,
        PRIMARY KEY(step, sid)) WITHOUT ROWID""",
    """CREATE INDEX IF NOT EXISTS histograms_by_series ON histograms(sid, step)""",
    """CREATE TABLE IF NOT EXISTS unit_stats(
        step INTEGER NOT NULL, sid INTEGER NOT NULL, "values" BLOB NOT NULL,
        PRIMARY KEY(sid, step))""",
    """CREATE TABLE IF NOT EXISTS step_runs(
        source TEXT NOT NULL, start INTEGER NOT NULL, stride INTEGER NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY(source, start)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS scalar_buckets(
        name TEXT NOT NULL, level INTEGER NOT NULL, bucket INTEGER NOT NULL,
        first_step INTEGER NOT NULL, last_step INTEGER NOT NULL, n INTEGER NOT NULL,
        n_finite INTEGER NOT NULL, total REAL, min REAL, min_step INTEGER, max REAL,
        max_step INTEGER, last REAL, bad_first INTEGER, bad_last INTEGER, bad_kind INTEGER,
        PRIMARY KEY(name, level, bucket)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS stat_buckets(
        level INTEGER NOT NULL, bucket INTEGER NOT NULL, sid INTEGER NOT NULL,
        first_step INTEGER NOT NULL, last_step INTEGER NOT NULL, n INTEGER NOT NULL,
        mean_total REAL, mean_n INTEGER, std_total REAL, std_n INTEGER, min REAL, max REAL,
        norm REAL, zero_total REAL, zero_n INTEGER, rel_total REAL, rel_n INTEGER,
        nonfinite INTEGER,
        PRIMARY KEY(level, bucket, sid)) WITHOUT ROWID""",
    """CREATE INDEX IF NOT EXISTS stat_buckets_by_series ON stat_buckets(sid, level, bucket)""",
)

# Schema 4: what a model that is not a classifier gave at an evaluation.
OUTPUTS_DDL = """CREATE TABLE IF NOT EXISTS outputs(
        split TEXT NOT NULL, step INTEGER NOT NULL, ids BLOB NOT NULL,
        outputs BLOB, outputs_dtype TEXT, outputs_shape TEXT,
        targets BLOB, targets_dtype TEXT, targets_shape TEXT, targets_from TEXT,
        PRIMARY KEY(split, step))"""

# Schema 5: a probe batch's attention maps, one row per attention layer and capture step.
ATTENTION_DDL = """CREATE TABLE IF NOT EXISTS attention(
        step INTEGER NOT NULL, layer TEXT NOT NULL, position INTEGER NOT NULL,
        maps BLOB NOT NULL, dtype TEXT NOT NULL, shape TEXT NOT NULL, stats BLOB NOT NULL,
        PRIMARY KEY(layer, step))"""

# Schema 6: a histogram's own bins where they are not its uniform row's: ``edges``
# little-endian float64 (n + 1, non-decreasing, finite), ``counts`` little-endian
# float64 (n, finite, >= 0). A blob per row of any size: the rows keep a rowid.
HISTOGRAM_BINS_DDL = """CREATE TABLE IF NOT EXISTS histogram_bins(
        step INTEGER NOT NULL, sid INTEGER NOT NULL,
        edges BLOB NOT NULL, counts BLOB NOT NULL,
        PRIMARY KEY(step, sid))"""

# Schema 7: the top-activating tokens of each unit of a layer at an evaluation: ``ids``
# little-endian int64 (units, k) sample ids (-1: none), ``positions`` int32 (units, k)
# token positions, ``values`` float32 (units, k) activations, most active first,
# ``contexts`` int32 (units, k, width) the input token ids from ``before`` positions
# ahead of the token (-1 outside the sample), ``nonfinite`` int64 (units,) each unit's
# positions whose activation was not finite.
UNIT_TOKENS_DDL = """CREATE TABLE IF NOT EXISTS unit_tokens(
        split TEXT NOT NULL, step INTEGER NOT NULL, layer TEXT NOT NULL,
        units INTEGER NOT NULL, k INTEGER NOT NULL, before INTEGER NOT NULL,
        width INTEGER NOT NULL, ids BLOB NOT NULL, positions BLOB NOT NULL,
        "values" BLOB NOT NULL, contexts BLOB NOT NULL, nonfinite BLOB NOT NULL,
        PRIMARY KEY(split, layer, step))"""

# Schema 8: every scalar's rows and its buckets of each level, packed in blocks
# (nbviz.store.scalar_chunks: the records' dtypes). Rows of a few kB: they keep a rowid.
SCALAR_CHUNKS_DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS scalar_chunks(
        name TEXT NOT NULL, chunk INTEGER NOT NULL, n INTEGER NOT NULL, points BLOB NOT NULL,
        PRIMARY KEY(name, chunk))""",
    """CREATE TABLE IF NOT EXISTS scalar_bucket_chunks(
        name TEXT NOT NULL, level INTEGER NOT NULL, chunk INTEGER NOT NULL,
        n INTEGER NOT NULL, buckets BLOB NOT NULL,
        PRIMARY KEY(name, level, chunk))""",
)

_DDL_V6: tuple[str, ...] = (*_DDL_V3, OUTPUTS_DDL, ATTENTION_DDL, HISTOGRAM_BINS_DDL)
_DDL_V7: tuple[str, ...] = (*_DDL_V6, UNIT_TOKENS_DDL)
DDL: tuple[str, ...] = (*_DDL_V7, *SCALAR_CHUNKS_DDL)

#: The DDL of each schema version this nbviz reads: what a run of that version holds.
DDL_OF_VERSION: dict[int, tuple[str, ...]] = {
    1: tuple(d for d in _DDL_V2 if d is not _CAPTURES_DDL),
    2: _DDL_V2,
    3: _DDL_V3,
    4: (*_DDL_V3, OUTPUTS_DDL),
    5: (*_DDL_V3, OUTPUTS_DDL, ATTENTION_DDL),
    6: _DDL_V6,
    7: _DDL_V7,
    8: DDL,
}

#: Older versions that a read-only reader reads as they are, without migrating them
#: (a reader never changes a run): ``version -> tables added since``, which such a
#: run holds none of and which its reads treat as empty (each read of such a table
#: asks ``ReaderBase._holds`` first). A version missing here is read only once a
#: writer has migrated it. A new schema that adds a table lists it for every version
#: here, or takes that version out (tests/test_store_schema.py checks the lists).
_CHUNKS = ("scalar_chunks", "scalar_bucket_chunks")
READ_AS_IS: dict[int, tuple[str, ...]] = {
    5: ("histogram_bins", "unit_tokens", *_CHUNKS),
    6: ("unit_tokens", *_CHUNKS),
    7: _CHUNKS,
}
