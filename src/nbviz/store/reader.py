"""Read queries on a run: tidy pandas frames and numpy arrays.

A :class:`Reader` opens ``run.sqlite`` read-only and can follow a run that
another process is writing: every call is a fresh read transaction, so it sees
the latest commit. Each thread gets its own connection, so one Reader may be
shared between threads.

Step selection, wherever a method takes ``steps`` and ``step_range``:

- ``steps=None`` and ``step_range=None``: every recorded step;
- ``steps=<int>``: that one step, which must be recorded (else
  :class:`MissingStepError`, a KeyError naming the recorded range);
- ``steps=<sequence of ints>``: a filter, the rows of those steps that exist;
- ``step_range=(lo, hi)``: a filter on ``lo <= step <= hi`` (both inclusive).
"""

from __future__ import annotations

import difflib
import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from nbviz.store.arrays import from_blob, to_blob
from nbviz.store.schema import (
    BUSY_TIMEOUT_MS,
    DB_NAME,
    SIGNALS,
    TABLES,
    check_version,
    connect,
    db_path,
)

__all__ = ["HistogramRows", "MissingStepError", "Reader"]

STAT_COLUMNS = TABLES["layer_stats"]
_STAT_KINDS = "issifffffiff"  # i: int, s: str, f: float (NULL -> NaN), j: JSON, o: object
_STAT_SELECT = ", ".join(f'"{c}"' for c in STAT_COLUMNS)


class MissingStepError(KeyError, ValueError):
    """A step that was asked for is not recorded; the message gives the recorded range."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class HistogramRows(NamedTuple):
    """One layer's histograms over time; row i of ``counts`` is the histogram at ``steps[i]``."""

    steps: np.ndarray  # int64 [n_steps]
    lo: np.ndarray  # float64 [n_steps]
    hi: np.ndarray  # float64 [n_steps]
    counts: np.ndarray  # int64 [n_steps, n_bins]
    underflow: np.ndarray  # int64 [n_steps]
    overflow: np.ndarray  # int64 [n_steps]
    nonfinite: np.ndarray  # int64 [n_steps]


# -- column helpers ------------------------------------------------------------------


def _floats(values: Sequence[Any]) -> np.ndarray:
    """float64 column; SQL NULL (a NaN on the way in) becomes NaN again."""
    return np.array(values, dtype=np.float64)


def _ints(values: Sequence[Any]) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """int64 column, or a nullable Int64 one where some values are NULL."""
    try:
        return np.array(values, dtype=np.int64)
    except TypeError:
        return pd.array(list(values), dtype="Int64")


def _column(values: Sequence[Any], kind: str) -> Any:
    if kind == "i":
        return _ints(values)
    if kind == "f":
        return _floats(values)
    if kind == "j":
        return [None if v is None else json.loads(v) for v in values]
    return list(values)  # text (pandas picks its string dtype), bytes, objects


def _frame(rows: list[tuple], columns: Sequence[str], kinds: str) -> pd.DataFrame:
    cols = list(zip(*rows)) if rows else [() for _ in columns]
    return pd.DataFrame({name: _column(col, k) for name, col, k in zip(columns, cols, kinds)})


def _ids_blob(data: bytes) -> np.ndarray:
    return from_blob(data, "<i8", json.dumps([len(data) // 8]))


def _close_matches(name: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=5, cutoff=0.5)
    if close:
        return "close matches: " + ", ".join(close)
    shown = ", ".join(list(choices)[:10])
    more = f" (and {len(choices) - 10} more)" if len(choices) > 10 else ""
    return f"recorded: {shown}{more}" if choices else "nothing is recorded yet"


def _describe_steps(steps: np.ndarray, step: int | None = None) -> str:
    if len(steps) == 0:
        return "no steps are recorded yet"
    text = f"recorded steps run {steps[0]}..{steps[-1]} ({len(steps)} steps)"
    if step is not None:
        i = int(np.searchsorted(steps, step))
        near = [int(s) for s in steps[max(i - 1, 0) : i + 1]]
        text += "; nearest: " + ", ".join(map(str, near))
    return text


# Distinct values of `col` by successive index seeks (a skip scan): one seek per
# distinct value instead of reading every row. `where` holds equality terms on
# the index columns before `col`.
def _skip_scan_sql(table: str, col: str, where: str = "", having: str = "") -> str:
    pre = f"{where} AND " if where else ""
    first_where = f" WHERE {where}" if where else ""
    keep = f" AND {having}" if having else ""
    return (
        f"WITH RECURSIVE d(v) AS ("
        f"SELECT min({col}) FROM {table}{first_where} "
        f"UNION ALL SELECT (SELECT min({col}) FROM {table} WHERE {pre}{col} > d.v) "
        f"FROM d WHERE d.v IS NOT NULL) "
        f"SELECT v FROM d WHERE v IS NOT NULL{keep}"
    )


class Reader:
    """Read-only access to one run directory (see the module docstring for steps).

    Raises FileNotFoundError when the directory holds no ``run.sqlite`` and
    SchemaError when its schema is not the one this nbviz reads.
    """

    def __init__(self, run_dir: Path | str, *, must_exist: bool = True) -> None:
        self.run_dir = Path(run_dir)
        if must_exist and not self.run_dir.exists():
            raise FileNotFoundError(f"no nbviz run at {self.run_dir}: the path does not exist")
        if must_exist and not db_path(self.run_dir).exists():
            raise FileNotFoundError(
                f"no nbviz run at {self.run_dir}: the directory has no {DB_NAME}"
            )
        self._lock = threading.Lock()
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._memory_projections: dict[str, tuple[np.ndarray, dict[str, Any]]] = {}
        self._closed = False
        if must_exist:  # else: a run another process is creating, opened at the first read
            check_version(self._conn(), self.run_dir, readonly=True)

    # -- connections ---------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise RuntimeError(f"Reader of run at {self.run_dir} is closed")
            conn = connect(self.run_dir, readonly=True)
            with self._lock:
                self._conns.append(conn)
            self._local.conn = conn
        return conn

    def _q(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple]:
        return self._conn().execute(sql, params).fetchall()

    def _one(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        row = self._conn().execute(sql, params).fetchone()
        return None if row is None else row[0]

    def close(self) -> None:
        """Close every connection this Reader opened (idempotent)."""
        with self._lock:
            self._closed = True
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()
        self._local = threading.local()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Reader({str(self.run_dir)!r})"

    # -- validation ----------------------------------------------------------------

    @staticmethod
    def _check_signal(signal: str) -> None:
        if signal not in SIGNALS:
            raise ValueError(f"unknown signal {signal!r}; valid signals: {', '.join(SIGNALS)}")

    def _pairs(self, table: str) -> list[tuple[str, str]]:
        """Distinct (layer, signal) pairs of a table, by skip scan on its layer index."""
        out: list[tuple[str, str]] = []
        row = (
            self._conn()
            .execute(f"SELECT layer, signal FROM {table} ORDER BY layer, signal LIMIT 1")
            .fetchone()
        )
        nxt = (
            f"SELECT layer, signal FROM {table} WHERE (layer, signal) > (?, ?) "
            f"ORDER BY layer, signal LIMIT 1"
        )
        while row is not None:
            out.append((row[0], row[1]))
            row = self._conn().execute(nxt, row).fetchone()
        return out

    def _unknown_layer(self, table: str, layer: str, signal: str) -> ValueError:
        pairs = self._pairs(table)
        for_signal = [la for la, s in pairs if s == signal]
        others = sorted({s for la, s in pairs if la == layer})
        hint = f"; it has {', '.join(others)}" if others else ""
        return ValueError(
            f"no {table} for layer {layer!r} and signal {signal!r}{hint}; "
            f"{_close_matches(layer, for_signal or sorted({la for la, _ in pairs}))}"
        )

    @staticmethod
    def _step_filter(
        steps: int | Sequence[int] | None, step_range: tuple[int, int] | None
    ) -> tuple[str, list[Any]]:
        if steps is not None and step_range is not None:
            raise ValueError("give steps or step_range, not both")
        if step_range is not None:
            lo, hi = step_range
            return " AND step BETWEEN ? AND ?", [int(lo), int(hi)]
        if steps is None:
            return "", []
        if isinstance(steps, (int, np.integer)):
            return " AND step = ?", [int(steps)]
        return " AND step IN (SELECT value FROM json_each(?))", [
            json.dumps([int(s) for s in steps])
        ]

    # -- meta and scalars --------------------------------------------------------------

    def meta(self, key: str | None = None, default: Any = None) -> Any:
        """One meta value (decoded JSON), or the whole meta dict when ``key`` is None."""
        if key is None:
            return {k: json.loads(v) for k, v in self._q("SELECT key, value FROM meta")}
        value = self._one("SELECT value FROM meta WHERE key = ?", (key,))
        return default if value is None else json.loads(value)

    def scalar_names(self) -> list[str]:
        """Names of the logged scalars, sorted."""
        return [r[0] for r in self._q(_skip_scan_sql("scalars", "name"))]

    def scalars(self, names: str | Sequence[str] | None = None) -> pd.DataFrame:
        """Scalars as a frame ``[step, name, value, wall_time]`` sorted by name, step.

        ``names``: one name, a list, or None for all. An unknown name raises
        ValueError naming close matches. NaN values come back as NaN.
        """
        sql = "SELECT step, name, value, wall_time FROM scalars"
        params: list[Any] = []
        if names is not None:
            names = [names] if isinstance(names, str) else list(names)
            known = set(self.scalar_names())
            for name in names:
                if name not in known:
                    raise ValueError(
                        f"no scalar named {name!r}; {_close_matches(name, sorted(known))}"
                    )
            sql += " WHERE name IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(names))
        rows = self._q(sql + " ORDER BY name, step", params)
        return _frame(rows, ("step", "name", "value", "wall_time"), "isff")

    # -- layer statistics --------------------------------------------------------------

    def steps(self, signal: str) -> np.ndarray:
        """Sorted unique steps that have layer_stats rows for ``signal`` (int64)."""
        self._check_signal(signal)
        sql = _skip_scan_sql(
            "layer_stats",
            "step",
            having="EXISTS (SELECT 1 FROM layer_stats t WHERE t.step = v AND t.signal = ?)",
        )
        return np.array([r[0] for r in self._q(sql, (signal,))], dtype=np.int64)

    def recorded_layers(self, signal: str | None = None, table: str = "layer_stats") -> list[str]:
        """Names with rows in ``table`` (layer_stats, histograms, unit_stats), sorted."""
        if table not in ("layer_stats", "histograms", "unit_stats"):
            raise ValueError(
                "recorded_layers: table must be layer_stats, histograms or unit_stats, "
                f"got {table!r}"
            )
        return sorted({la for la, s in self._pairs(table) if signal is None or s == signal})

    def stats(
        self,
        signal: str,
        layer: str | None = None,
        steps: int | Sequence[int] | None = None,
        *,
        step_range: tuple[int, int] | None = None,
    ) -> pd.DataFrame:
        """layer_stats rows for one signal, sorted by step then layer.

        Columns: step, layer, signal, count, mean, std, min, max, zero_frac,
        nonfinite, norm, rel. ``layer=None`` means every layer.
        """
        self._check_signal(signal)
        sql = f"SELECT {_STAT_SELECT} FROM layer_stats WHERE signal = ?"
        params: list[Any] = [signal]
        if layer is not None:
            sql += " AND layer = ?"
            params.append(layer)
        where, extra = self._step_filter(steps, step_range)
        rows = self._q(sql + where + " ORDER BY step, layer", params + extra)
        if not rows:
            if (
                layer is not None
                and self._one(
                    "SELECT 1 FROM layer_stats WHERE layer = ? AND signal = ? LIMIT 1",
                    (layer, signal),
                )
                is None
            ):
                raise self._unknown_layer("layer_stats", layer, signal)
            if isinstance(steps, (int, np.integer)):
                raise MissingStepError(
                    f"no {signal} stats{'' if layer is None else f' for {layer!r}'} at step "
                    f"{steps}; {_describe_steps(self.steps(signal), int(steps))}"
                )
        return _frame(rows, STAT_COLUMNS, _STAT_KINDS)

    def stats_at(self, step: int, signal: str | None = None) -> pd.DataFrame:
        """Every layer's stats at one step (all signals, or one), sorted by signal, layer."""
        sql = f"SELECT {_STAT_SELECT} FROM layer_stats WHERE step = ?"
        params: list[Any] = [int(step)]
        if signal is not None:
            self._check_signal(signal)
            sql += " AND signal = ?"
            params.append(signal)
        rows = self._q(sql + " ORDER BY signal, layer", params)
        if not rows:
            recorded = self.steps(signal) if signal else self._all_steps("layer_stats")
            raise MissingStepError(
                f"no layer stats at step {step}; {_describe_steps(recorded, int(step))}"
            )
        return _frame(rows, STAT_COLUMNS, _STAT_KINDS)

    def _all_steps(self, table: str) -> np.ndarray:
        rows = self._q(_skip_scan_sql(table, "step"))
        return np.array([r[0] for r in rows], dtype=np.int64)

    def _layer_steps(self, table: str, layer: str, signal: str) -> np.ndarray:
        rows = self._q(
            f"SELECT step FROM {table} WHERE layer = ? AND signal = ? ORDER BY step",
            (layer, signal),
        )
        return np.array([r[0] for r in rows], dtype=np.int64)

    # -- histograms ------------------------------------------------------------------

    def histogram(self, layer: str, signal: str, step: int) -> tuple[np.ndarray, np.ndarray]:
        """``(edges, counts)`` of one layer's histogram: n + 1 float64 edges, n int64 counts."""
        self._check_signal(signal)
        row = (
            self._conn()
            .execute(
                "SELECT lo, hi, counts FROM histograms WHERE step = ? AND signal = ? AND layer = ?",
                (int(step), signal, layer),
            )
            .fetchone()
        )
        if row is None:
            raise self._missing_histogram(layer, signal, int(step))
        lo, hi, blob = row
        counts = from_blob(blob, "<i8", json.dumps([len(blob) // 8]))
        return np.linspace(_nan(lo), _nan(hi), len(counts) + 1), counts

    def _missing_histogram(self, layer: str, signal: str, step: int) -> Exception:
        recorded = self._layer_steps("histograms", layer, signal)
        if len(recorded) == 0:
            return self._unknown_layer("histograms", layer, signal)
        return MissingStepError(
            f"no {signal} histogram for {layer!r} at step {step}; {_describe_steps(recorded, step)}"
        )

    def histogram_rows(
        self,
        layer: str,
        signal: str,
        steps: int | Sequence[int] | None = None,
        *,
        step_range: tuple[int, int] | None = None,
    ) -> HistogramRows:
        """One layer's histograms over time as a :class:`HistogramRows` (sorted by step)."""
        self._check_signal(signal)
        where, extra = self._step_filter(steps, step_range)
        rows = self._q(
            "SELECT step, lo, hi, counts, underflow, overflow, nonfinite FROM histograms "
            f"WHERE layer = ? AND signal = ?{where} ORDER BY step",
            [layer, signal, *extra],
        )
        if not rows:
            recorded = self._layer_steps("histograms", layer, signal)
            if len(recorded) == 0:
                raise self._unknown_layer("histograms", layer, signal)
            if isinstance(steps, (int, np.integer)):
                raise self._missing_histogram(layer, signal, int(steps))
        st, lo, hi, blobs, under, over, nonfin = (
            list(zip(*rows)) if rows else [(), (), (), (), (), (), ()]
        )
        sizes = {len(b) for b in blobs}
        if len(sizes) > 1:
            raise ValueError(
                f"histograms of {layer!r}/{signal} have different bin counts "
                f"({sorted(s // 8 for s in sizes)}); select steps with one bin count"
            )
        n_bins = sizes.pop() // 8 if sizes else 0
        counts = np.frombuffer(b"".join(blobs), dtype="<i8").reshape(len(rows), n_bins)
        return HistogramRows(
            np.array(st, dtype=np.int64),
            _floats(lo),
            _floats(hi),
            counts,
            _nz_ints(under),
            _nz_ints(over),
            _nz_ints(nonfin),
        )

    def histograms_at(self, step: int, signal: str | None = None) -> pd.DataFrame:
        """Every layer's histogram at one step, sorted by signal, layer.

        Columns: layer, signal, lo, hi, underflow, overflow, nonfinite, and
        ``counts`` holding one read-only int64 array per row.
        """
        sql = (
            "SELECT layer, signal, lo, hi, underflow, overflow, nonfinite, counts "
            "FROM histograms WHERE step = ?"
        )
        params: list[Any] = [int(step)]
        if signal is not None:
            self._check_signal(signal)
            sql += " AND signal = ?"
            params.append(signal)
        rows = self._q(sql + " ORDER BY signal, layer", params)
        if not rows:
            raise MissingStepError(
                f"no histograms at step {step}; "
                f"{_describe_steps(self._all_steps('histograms'), int(step))}"
            )
        frame = _frame(
            [r[:7] for r in rows],
            ("layer", "signal", "lo", "hi", "underflow", "overflow", "nonfinite"),
            "ssffiii",
        )
        frame["counts"] = [np.frombuffer(r[7], dtype="<i8") for r in rows]
        return frame

    # -- per-unit statistics -------------------------------------------------------------

    def unit_stats(
        self,
        layer: str,
        signal: str,
        steps: int | Sequence[int] | None = None,
        *,
        step_range: tuple[int, int] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(steps int64 [n], values float32 [n, n_units])`` for one layer and unit signal."""
        where, extra = self._step_filter(steps, step_range)
        rows = self._q(
            f'SELECT step, "values" FROM unit_stats WHERE layer = ? AND signal = ?{where} '
            "ORDER BY step",
            [layer, signal, *extra],
        )
        if not rows:
            recorded = self._layer_steps("unit_stats", layer, signal)
            if len(recorded) == 0:
                pairs = self._pairs("unit_stats")
                raise ValueError(
                    f"no unit_stats for layer {layer!r} and signal {signal!r}; "
                    f"{_close_matches(f'{layer}/{signal}', [f'{la}/{s}' for la, s in pairs])}"
                )
            if isinstance(steps, (int, np.integer)):
                raise MissingStepError(
                    f"no unit_stats {signal} for {layer!r} at step {steps}; "
                    f"{_describe_steps(recorded, int(steps))}"
                )
        sizes = {len(r[1]) for r in rows}
        if len(sizes) > 1:
            raise ValueError(
                f"unit_stats of {layer!r}/{signal} have different unit counts "
                f"({sorted(s // 4 for s in sizes)})"
            )
        n_units = sizes.pop() // 4 if sizes else 0
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4")
        return np.array([r[0] for r in rows], dtype=np.int64), matrix.reshape(len(rows), n_units)

    # -- events and profiles -----------------------------------------------------------

    def events(self, kind: str | None = None) -> pd.DataFrame:
        """Events ``[kind, layer, signal, step, detail]`` (detail decoded), sorted by step."""
        sql = "SELECT kind, layer, signal, step, detail FROM events"
        params: list[Any] = []
        if kind is not None:
            sql += " WHERE kind = ?"
            params.append(kind)
        rows = self._q(sql + " ORDER BY step, kind, layer, signal", params)
        return _frame(rows, ("kind", "layer", "signal", "step", "detail"), "sssij")

    def profiles(self, step: int | None = None) -> pd.DataFrame:
        """Profiles ``[step, name, payload]`` (payload decoded JSON); all steps when None.

        Chrome traces (rows named ``<name>/trace``) are left out: see :meth:`profile_trace`.
        """
        sql = "SELECT step, name, payload FROM profiles WHERE name NOT LIKE '%/trace'"
        params: list[Any] = []
        if step is not None:
            sql += " AND step = ?"
            params.append(int(step))
        rows = self._q(sql + " ORDER BY step, name", params)
        return _frame(rows, ("step", "name", "payload"), "isj")

    def profile_steps(self, name: str | None = None) -> np.ndarray:
        """Sorted steps with a stored profile (of ``name``, or any name), int64."""
        sql = "SELECT DISTINCT step FROM profiles WHERE name NOT LIKE '%/trace'"
        params: list[Any] = []
        if name is not None:
            sql += " AND name = ?"
            params.append(name)
        rows = self._q(sql + " ORDER BY step", params)
        return np.array([r[0] for r in rows], dtype=np.int64)

    def load_profile(self, step: int | None = None, name: str | None = None) -> dict[str, Any]:
        """One stored profile's payload: at ``step`` (default: the latest), named ``name``.

        Without ``name`` the step must hold one profile (or one named ``"profile"``).
        Raises MissingStepError naming the recorded steps when there is none.
        """
        steps = self.profile_steps(name)
        if step is None:
            if not len(steps):
                raise MissingStepError(
                    f"no profiles in run at {self.run_dir}"
                    + (f" named {name!r}" if name is not None else "")
                    + "; record one with run.profile(model, step_fn)"
                )
            step = int(steps[-1])
        rows = self._q(
            "SELECT name, payload FROM profiles WHERE step = ? AND name NOT LIKE '%/trace'"
            + (" AND name = ?" if name is not None else "")
            + " ORDER BY name",
            (int(step), name) if name is not None else (int(step),),
        )
        if not rows:
            raise MissingStepError(
                f"no profile{f' named {name!r}' if name else ''} at step {step}; "
                f"profiles are stored at: {', '.join(map(str, steps)) or 'no steps'}"
            )
        if len(rows) > 1:
            named = dict(rows)
            if "profile" not in named:
                raise ValueError(
                    f"step {step} holds profiles {', '.join(named)}: pass name= to choose one"
                )
            return json.loads(named["profile"])
        return json.loads(rows[0][1])

    def profile_trace(self, step: int, name: str = "profile") -> str | None:
        """The Chrome trace (JSON text) stored with profile ``name`` at ``step``, or None."""
        return self._one(
            "SELECT payload FROM profiles WHERE step = ? AND name = ?",
            (int(step), f"{name}/trace"),
        )

    # -- predictions -------------------------------------------------------------------

    def prediction_steps(self, split: str = "val") -> np.ndarray:
        """Sorted steps with predictions for ``split`` (int64)."""
        rows = self._q(
            _skip_scan_sql("predictions", "step", where="split = :split"), {"split": split}
        )
        return np.array([r[0] for r in rows], dtype=np.int64)

    def splits(self, table: str = "predictions") -> list[str]:
        """Splits with rows in ``table`` (predictions, probabilities, samples, embeddings)."""
        if table not in ("predictions", "probabilities", "samples", "embeddings"):
            raise ValueError(f"splits: {table!r} is not a table with splits")
        return [r[0] for r in self._q(_skip_scan_sql(table, "split"))]

    def predictions(self, step: int | None = None, split: str = "val") -> pd.DataFrame:
        """Predictions ``[step, id, label, pred, loss, confidence]`` at one step, by id.

        ``step=None``: the latest step with predictions for the split (an empty
        frame when there is none yet).
        """
        if step is None:
            step = self._one("SELECT max(step) FROM predictions WHERE split = ?", (split,))
            if step is None:
                return _frame([], ("step", "id", "label", "pred", "loss", "confidence"), "iiiiff")
        rows = self._q(
            "SELECT step, id, label, pred, loss, confidence FROM predictions "
            "WHERE split = ? AND step = ? ORDER BY id",
            (split, int(step)),
        )
        if not rows:
            recorded = self.prediction_steps(split)
            if len(recorded) == 0:
                raise ValueError(
                    f"no predictions for split {split!r}; splits with predictions: "
                    f"{', '.join(self.splits()) or 'none yet'}"
                )
            raise MissingStepError(
                f"no {split} predictions at step {step}; {_describe_steps(recorded, int(step))}"
            )
        return _frame(rows, ("step", "id", "label", "pred", "loss", "confidence"), "iiiiff")

    def probabilities(self, step: int, split: str = "val") -> tuple[np.ndarray, np.ndarray] | None:
        """``(ids int64 [n], probs [n, n_classes])`` logged at a step, or None."""
        row = (
            self._conn()
            .execute(
                "SELECT ids, probs, dtype, shape FROM probabilities WHERE split = ? AND step = ?",
                (split, int(step)),
            )
            .fetchone()
        )
        if row is None:
            return None
        return _ids_blob(row[0]), from_blob(row[1], row[2], row[3])

    # -- samples -----------------------------------------------------------------------

    def sample_ids(self, split: str = "val") -> np.ndarray:
        """Sorted ids of the stored samples of a split (int64)."""
        rows = self._q("SELECT id FROM samples WHERE split = ? ORDER BY id", (split,))
        return np.array([r[0] for r in rows], dtype=np.int64)

    def samples(self, ids: Sequence[int] | None = None, split: str = "val") -> pd.DataFrame:
        """Samples ``[id, label, kind, payload, dtype, shape, text]``.

        ``ids=None``: every sample of the split, by id; otherwise those ids in
        the order given (a missing id raises KeyError naming it). ``label`` is
        a nullable Int64 column; ``payload`` holds PNG bytes for images and raw
        array bytes (see :func:`nbviz.store.from_blob`) for arrays.
        """
        columns = ("id", "label", "kind", "payload", "dtype", "shape", "text")
        sql = "SELECT id, label, kind, payload, dtype, shape, text FROM samples WHERE split = ?"
        if ids is None:
            rows = self._q(sql + " ORDER BY id", (split,))
        else:
            wanted = [int(i) for i in ids]
            found = {
                r[0]: r
                for r in self._q(
                    sql + " AND id IN (SELECT value FROM json_each(?))",
                    (split, json.dumps(wanted)),
                )
            }
            missing = [i for i in wanted if i not in found]
            if missing:
                more = f" (and {len(missing) - 10} more)" if len(missing) > 10 else ""
                raise KeyError(
                    f"no {split} samples with ids {missing[:10]}{more}; "
                    f"{len(self.sample_ids(split))} {split} samples are stored"
                )
            rows = [found[i] for i in wanted]
        frame = _frame(rows, columns, "iisoooo")
        frame["label"] = pd.array(list(frame["label"]), dtype="Int64")
        return frame

    # -- captures ----------------------------------------------------------------------

    def captured_ids(self, split: str = "val") -> np.ndarray:
        """Sorted ids of the samples with a recorded capture (``run.capture``) in a split."""
        rows = self._q("SELECT DISTINCT id FROM captures WHERE split = ? ORDER BY id", (split,))
        return np.array([r[0] for r in rows], dtype=np.int64)

    def capture_steps(self, id: int, split: str = "val") -> np.ndarray:
        """Sorted steps at which sample ``id`` of ``split`` was captured (int64; may be empty)."""
        rows = self._q(
            "SELECT DISTINCT step FROM captures WHERE split = ? AND id = ? ORDER BY step",
            (split, int(id)),
        )
        return np.array([r[0] for r in rows], dtype=np.int64)

    def captures(self, id: int, split: str = "val", step: int | None = None) -> pd.DataFrame:
        """One sample's recorded activations, one row per layer in forward order.

        Columns: step, position, layer, type, shape (list), mean, std, min, max,
        zero_frac, nonfinite, n_units, note, ``units`` (float32 array of per-unit
        means, or None) and ``maps`` (float32 ``(channels, H, W)`` feature maps of
        a spatial output, or None). ``step=None``: the latest capture of the
        sample; otherwise the latest at or before ``step``. No capture: an empty frame.
        """
        columns = ["step", "position", "layer", "type", "shape", "mean", "std", "min", "max"]
        columns += ["zero_frac", "nonfinite", "n_units", "note", "units", "maps"]
        steps = self.capture_steps(id, split)
        if step is not None:
            steps = steps[steps <= int(step)]
        if not len(steps):
            return pd.DataFrame({c: [] for c in columns})
        rows = self._q(
            "SELECT position, layer, type, summary, units, maps, maps_shape FROM captures "
            "WHERE split = ? AND id = ? AND step = ? ORDER BY position",
            (split, int(id), int(steps[-1])),
        )
        out = []
        for position, layer, type_, summary, units, maps, maps_shape in rows:
            info = json.loads(summary)
            u = None if units is None else np.frombuffer(units, dtype="<f4").copy()
            m = None
            if maps is not None:
                m = from_blob(maps, "<f2", maps_shape).astype(np.float32)
            out.append(
                [int(steps[-1]), int(position), layer, type_ or "", list(info.get("shape", []))]
                + [_nan(info.get(k)) for k in ("mean", "std", "min", "max", "zero_frac")]
                + [int(info.get("nonfinite", 0)), int(info.get("n_units", 0))]
                + [str(info.get("note", "")), u, m]
            )
        frame = pd.DataFrame(out, columns=columns)
        return frame

    # -- embeddings --------------------------------------------------------------------

    def embedding_layers(self, split: str = "val", kind: str | None = None) -> list[str]:
        """Layers with embeddings for a split (and kind), in order of first record."""
        sql = "SELECT layer, min(step), min(rowid) FROM embeddings WHERE split = ?"
        params: list[Any] = [split]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        rows = self._q(sql + " GROUP BY layer ORDER BY 2, 3", params)
        return [r[0] for r in rows]

    def _embedding_layer(self, split: str, layer: str | None, kind: str) -> str:
        layers = self.embedding_layers(split, kind)
        if layer is None:
            if not layers:
                raise ValueError(
                    f"no {kind} embeddings recorded for split {split!r}; splits with "
                    f"embeddings: {', '.join(self.splits('embeddings')) or 'none yet'}"
                )
            return layers[0]
        if layer not in layers:
            raise ValueError(
                f"no {kind} embeddings of layer {layer!r} for split {split!r}; "
                f"{_close_matches(layer, layers)}"
            )
        return layer

    def embedding_steps(
        self, split: str = "val", layer: str | None = None, kind: str = "embedding"
    ) -> np.ndarray:
        """Sorted steps with embeddings for a split, layer (None: the first) and kind."""
        if layer is None:
            layers = self.embedding_layers(split, kind)
            if not layers:
                return np.zeros(0, dtype=np.int64)
            layer = layers[0]
        rows = self._q(
            "SELECT step FROM embeddings WHERE split = ? AND layer = ? AND kind = ? ORDER BY step",
            (split, layer, kind),
        )
        return np.array([r[0] for r in rows], dtype=np.int64)

    def embeddings(
        self,
        step: int | None,
        split: str = "val",
        layer: str | None = None,
        kind: str = "embedding",
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(ids int64 [n], matrix [n, d])`` recorded at ``step`` (None: the latest).

        ``layer=None``: the first layer recorded for the split (the only one, usually).
        """
        layer = self._embedding_layer(split, layer, kind)
        params: list[Any] = [split, layer, kind]
        sql = (
            "SELECT ids, matrix, dtype, shape FROM embeddings "
            "WHERE split = ? AND layer = ? AND kind = ?"
        )
        if step is None:
            sql += " ORDER BY step DESC LIMIT 1"
        else:
            sql += " AND step = ?"
            params.append(int(step))
        row = self._conn().execute(sql, params).fetchone()
        if row is None:
            raise MissingStepError(
                f"no {kind} embeddings of {layer!r} ({split}) at step {step}; "
                f"{_describe_steps(self.embedding_steps(split, layer, kind), step)}"
            )
        return _ids_blob(row[0]), from_blob(row[1], row[2], row[3])

    # -- projections -----------------------------------------------------------------

    def projection(self, key: str) -> tuple[np.ndarray, dict[str, Any]] | None:
        """A cached projection ``(matrix, meta)`` or None; meta holds split, layer,
        step, method, params (decoded), created."""
        row = (
            self._conn()
            .execute(
                "SELECT split, layer, step, method, params, matrix, dtype, shape, created "
                "FROM projections WHERE key = ?",
                (key,),
            )
            .fetchone()
        )
        if row is None:
            return self._memory_projections.get(key)
        split, layer, step, method, params, blob, dtype, shape, created = row
        meta = {
            "key": key,
            "split": split,
            "layer": layer,
            "step": step,
            "method": method,
            "params": None if params is None else json.loads(params),
            "created": created,
        }
        return from_blob(blob, dtype, shape), meta

    def put_projection(
        self,
        key: str,
        split: str,
        layer: str,
        step: int,
        method: str,
        params: dict[str, Any],
        matrix: np.ndarray,
    ) -> bool:
        """Cache a projection in the run; True when stored there.

        Writes through its own short-lived connection (waiting for a writer of
        the run, if any, to commit). When the run cannot be written (read-only
        directory or file), the projection is kept in this Reader's memory for
        its lifetime instead and False is returned.
        """
        blob, dtype, shape = to_blob(matrix)
        created = time.time()
        row = (
            key,
            split,
            layer,
            int(step),
            method,
            json.dumps(params),
            blob,
            dtype,
            shape,
            created,
        )
        try:
            conn = sqlite3.connect(db_path(self.run_dir), timeout=BUSY_TIMEOUT_MS / 1000)
            try:
                with conn:
                    conn.execute(
                        "INSERT OR REPLACE INTO projections VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        row,
                    )
            finally:
                conn.close()
        except sqlite3.OperationalError:
            meta = {
                "key": key,
                "split": split,
                "layer": layer,
                "step": int(step),
                "method": method,
                "params": json.loads(json.dumps(params)),
                "created": created,
            }
            self._memory_projections[key] = (from_blob(blob, dtype, shape), meta)
            return False
        self._memory_projections.pop(key, None)
        return True


def _nan(value: float | None) -> float:
    return float("nan") if value is None else float(value)


def _nz_ints(values: Sequence[Any]) -> np.ndarray:
    """int64 column where NULL counts as 0 (histogram tallies)."""
    return np.array([0 if v is None else v for v in values], dtype=np.int64)
