"""What every read query of a run shares: connections, filters and error texts.

:class:`ReaderBase` opens ``run.sqlite`` read-only, one connection per thread
(so one reader may be shared between threads), each call a fresh read
transaction that sees the latest commit. The query modules of the store
(:mod:`~nbviz.store.scalars`, :mod:`~nbviz.store.layer_stats`, ...) are mixins on
it; :class:`nbviz.store.Reader` combines them.

Step selection, wherever a query takes ``steps`` and ``step_range``:

- ``steps=None`` and ``step_range=None``: every recorded step;
- ``steps=<int>``: that one step, which must be recorded (else
  :class:`MissingStepError`, a KeyError naming the recorded range);
- ``steps=<sequence of ints>``: a filter, the rows of those steps that exist;
- ``step_range=(lo, hi)``: a filter on ``lo <= step <= hi`` (both inclusive).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from nbviz.store.closing import Closing
from nbviz.store.columns import int_array
from nbviz.store.connection import MAX_STEP
from nbviz.store.errors import (
    RunClosedError,
    RunFileError,
    StoredValueError,
    from_sqlite_error,
)
from nbviz.store.file_checks import warn_lost_commits
from nbviz.store.schema import DB_NAME, READ_AS_IS, SIGNALS, check_version, connect, db_path

_F = TypeVar("_F", bound=Callable[..., Any])

__all__ = [
    "MissingStepError",
    "ReaderBase",
    "and_equal",
    "close_matches",
    "describe_steps",
    "skip_scan_sql",
]


class MissingStepError(KeyError, ValueError):
    """A step that was asked for is not recorded; the message gives the recorded range."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


# -- error texts -------------------------------------------------------------------------


def close_matches(name: str, choices: Sequence[str]) -> str:
    """The hint for a name not found: close matches, else what is recorded (the first ten)."""
    close = difflib.get_close_matches(name, list(choices), n=5, cutoff=0.5)
    if close:
        return "close matches: " + ", ".join(close)
    shown = ", ".join(list(choices)[:10])
    more = f" (and {len(choices) - 10} more)" if len(choices) > 10 else ""
    return f"recorded: {shown}{more}" if choices else "nothing is recorded yet"


def describe_steps(steps: np.ndarray, step: int | None = None) -> str:
    """The recorded range of sorted ``steps``, and the ones nearest ``step`` if given."""
    if len(steps) == 0:
        return "no steps are recorded yet"
    text = f"recorded steps run {steps[0]}..{steps[-1]} ({len(steps)} steps)"
    if step is not None:
        i = int(np.searchsorted(steps, step))
        near = [int(s) for s in steps[max(i - 1, 0) : i + 1]]
        text += "; nearest: " + ", ".join(map(str, near))
    return text


# -- SQL pieces --------------------------------------------------------------------------


def skip_scan_sql(table: str, col: str, where: str = "", having: str = "") -> str:
    """Distinct values of ``col`` by successive index seeks (a skip scan).

    One seek per distinct value instead of reading every row. ``where`` holds
    equality terms on the index columns before ``col``; ``having`` filters the values.
    """
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


def and_equal(**terms: Any) -> tuple[str, list[Any]]:
    """``" AND column = ?"`` for each term that is not None, and its parameters."""
    given = [(column, value) for column, value in terms.items() if value is not None]
    return "".join(f" AND {column} = ?" for column, _ in given), [v for _, v in given]


# -- the base of every query -------------------------------------------------------------


# -- arguments of the read queries, checked by their annotations ---------------------------

_INT64 = 2**63 - 1
_STEP_LIKE = frozenset({"step", "steps", "id", "ids"})


def _check_int(method: str, arg: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{method}: {arg} must be an integer, got {value!r}")
    top = MAX_STEP if arg in _STEP_LIKE else _INT64
    low = 0 if arg in _STEP_LIKE else -_INT64 - 1
    if not low <= int(value) <= top:
        raise ValueError(f"{method}: {arg} must be an integer in {low}..{top}, got {value!r}")


def _check_str(method: str, arg: str, value: Any) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{method}: {arg} must be a string, got {value!r}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"{method}: {arg} {value!r} holds a lone surrogate; no run stores such text"
            ) from None


def _each(check: Callable[[str, str, Any], None]) -> Callable[[str, str, Any], None]:
    def check_all(method: str, arg: str, value: Any) -> None:
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise TypeError(f"{method}: {arg} must be a sequence, got {value!r}")
        for item in value:
            check(method, arg, item)

    return check_all


def _either(
    expected: str, *checks: Callable[[str, str, Any], None]
) -> Callable[[str, str, Any], None]:
    def check_any(method: str, arg: str, value: Any) -> None:
        errors: list[Exception] = []
        for check in checks:
            try:
                check(method, arg, value)
                return
            except (TypeError, ValueError) as exc:
                errors.append(exc)
        values = [e for e in errors if isinstance(e, ValueError)]
        if values:
            raise values[0]
        raise TypeError(f"{method}: {arg} must be {expected}, got {value!r}")

    return check_any


def _pair(method: str, arg: str, value: Any) -> None:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"{method}: {arg} must be a (low, high) pair, got {value!r}")
    for v in value:
        _check_int(method, arg, v)


def _mapping_of_ints(method: str, arg: str, value: Any) -> None:
    if not isinstance(value, Mapping):
        raise TypeError(f"{method}: {arg} must be a mapping, got {value!r}")
    for k, v in value.items():
        _check_str(method, f"a key of {arg}", k)
        _check_int(method, f"{arg}[{k!r}]", v)


# what each annotation of a read query's arguments admits (None is checked apart)
_ANNOTATION_CHECKS: dict[str, Callable[[str, str, Any], None]] = {
    "int": _check_int,
    "str": _check_str,
    "Sequence[int]": _each(_check_int),
    "int | Sequence[int]": _either("an integer or integers", _check_int, _each(_check_int)),
    "str | Sequence[str]": _either("a string or strings", _check_str, _each(_check_str)),
    "tuple[int, int]": _pair,
    "Mapping[str, int]": _mapping_of_ints,
}


def _argument_checks(method: Callable[..., Any]) -> dict[str, tuple[bool, Callable]]:
    """``{argument: (None allowed, check)}`` for the annotated arguments of ``method``."""
    checks = {}
    for name, param in inspect.signature(method).parameters.items():
        annotation = param.annotation if isinstance(param.annotation, str) else ""
        parts = [p.strip() for p in annotation.split(" | ")]
        optional = "None" in parts
        key = " | ".join(p for p in parts if p != "None")
        if key in _ANNOTATION_CHECKS:
            checks[name] = (optional, _ANNOTATION_CHECKS[key])
    return checks


def _naming_the_file(method: _F) -> _F:
    """``method`` with its arguments checked by their annotations (TypeError/ValueError
    naming the argument and the value), and a damaged file's errors made RunFileErrors
    that name the file."""
    signature = inspect.signature(method)
    checks = _argument_checks(method)
    name = method.__name__

    @functools.wraps(method)
    def read(self: ReaderBase, *args: Any, **kwargs: Any) -> Any:
        if checks and (args or kwargs):
            try:
                bound = signature.bind(self, *args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{name}: {exc}") from None
            for arg, value in bound.arguments.items():
                check = checks.get(arg)
                if check is not None and not (value is None and check[0]):
                    check[1](name, arg, value)
        try:
            return method(self, *args, **kwargs)
        except StoredValueError as exc:
            raise RunFileError(
                self._file, f"{method.__name__}: a stored value does not decode: {exc}"
            ) from exc
        except sqlite3.ProgrammingError:
            raise
        except sqlite3.DatabaseError as exc:
            raise from_sqlite_error(self._file, exc, method.__name__) from exc

    return read  # type: ignore[return-value]


class ReaderBase(Closing):
    """Read-only access to one run directory (see the module docstring for steps).

    Raises FileNotFoundError when the directory holds no ``run.sqlite``,
    SchemaError when its schema is not the one this nbviz reads and
    RunFileError when the file is damaged or foreign. Every public query of
    the store's mixins turns a damaged file's errors, met at any later read,
    into a RunFileError naming the file.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__module__.startswith("nbviz.store."):
            for name, value in list(vars(cls).items()):
                if not name.startswith("_") and inspect.isfunction(value):
                    setattr(cls, name, _naming_the_file(value))

    def __init__(self, run_dir: Path | str, *, must_exist: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self._file = db_path(self.run_dir)
        if must_exist and not self.run_dir.exists():
            raise FileNotFoundError(f"no nbviz run at {self.run_dir}: the path does not exist")
        if must_exist and not self._file.exists():
            raise FileNotFoundError(
                f"no nbviz run at {self.run_dir}: the directory has no {DB_NAME}"
            )
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified when no read is running
        self._reading = 0  # reads running now, in any thread (close waits for them)
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._closed = False
        self._checked = False
        self._absent: frozenset[str] = frozenset()  # tables an older run read as it is lacks
        if must_exist:  # else: a run another process is creating, opened at the first read
            self._conn()

    # -- connections ---------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise RunClosedError(self.run_dir)
            with self._lock:
                first = not self._checked
                lost = None
                if first:  # the first connection checks the file: once per reader
                    self._file = db_path(self.run_dir)
                    lost = warn_lost_commits(self._file)
                conn = connect(self.run_dir, readonly=True)
                try:
                    if first:
                        version = check_version(conn, self.run_dir, readonly=True, lost=lost)
                        self._absent = frozenset(READ_AS_IS.get(version, ()))
                        self._checked = True
                except BaseException:
                    conn.close()
                    raise
                self._conns.append(conn)
            self._local.conn = conn
        return conn

    def _fetch(
        self,
        sql: str,
        params: Sequence[Any] | dict[str, Any],
        fetch: Callable[[sqlite3.Cursor], Any],
    ) -> Any:
        """Run ``sql`` and ``fetch`` its rows; a damaged file's error becomes a RunFileError.

        The read is counted while it runs: :meth:`close` from another thread (a
        notebook closing the run while a view refreshes from it) waits for it
        instead of closing the connection under it.
        """
        with self._lock:
            if self._closed:
                raise RunClosedError(self.run_dir)
            self._reading += 1
        try:
            return fetch(self._conn().execute(sql, params))
        except sqlite3.ProgrammingError:
            raise
        except sqlite3.DatabaseError as exc:
            raise from_sqlite_error(self._file, exc, "reading the run") from exc
        finally:
            with self._lock:
                self._reading -= 1
                if not self._reading:
                    self._idle.notify_all()

    def _holds(self, table: str) -> bool:
        """Whether the run has ``table``: False for a table added after the schema of
        an older run that is read as it is (:data:`~nbviz.store.tables.READ_AS_IS`),
        until a writer migrates the run."""
        self._conn()  # the first connection reads the version
        if table not in self._absent:
            return True
        found = self._one("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
        if found is None:
            return False
        self._absent = self._absent - {table}  # migrated since it was opened
        return True

    def _q(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple]:
        return self._fetch(sql, params, sqlite3.Cursor.fetchall)

    def _one(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        row = self._row(sql, params)
        return None if row is None else row[0]

    def _row(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> tuple | None:
        return self._fetch(sql, params, sqlite3.Cursor.fetchone)

    def close(self) -> None:
        """Close every connection this Reader opened (idempotent).

        Reads running in other threads finish first (past a few seconds they are
        interrupted): a connection closed under a running statement would crash.
        """
        with self._lock:
            self._closed = True
            if self._reading and not self._idle.wait_for(lambda: not self._reading, 5.0):
                for conn in self._conns:
                    conn.interrupt()
                self._idle.wait_for(lambda: not self._reading, 5.0)
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"Reader({str(self.run_dir)!r})"

    # -- checks and filters shared by the queries ------------------------------------

    @staticmethod
    def _check_signal(signal: str) -> None:
        if signal not in SIGNALS:
            raise ValueError(f"unknown signal {signal!r}; valid signals: {', '.join(SIGNALS)}")

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

    def _all_steps(self, table: str) -> np.ndarray:
        rows = self._q(skip_scan_sql(table, "step"))
        return int_array(r[0] for r in rows)

    def _sid(self, layer: str, signal: str) -> int | None:
        """The ``series.id`` of ``(layer, signal)``, None when nothing was recorded for it."""
        return self._one("SELECT id FROM series WHERE layer = ? AND signal = ?", (layer, signal))

    def _layer_steps(self, table: str, layer: str, signal: str) -> np.ndarray:
        sid = self._sid(layer, signal)
        if sid is None:
            return np.zeros(0, dtype=np.int64)
        rows = self._q(f"SELECT step FROM {table} WHERE sid = ? ORDER BY step", (sid,))
        return int_array(r[0] for r in rows)

    def _pairs(self, table: str) -> list[tuple[str, str]]:
        """Distinct (layer, signal) pairs of a table: one index seek per series."""
        rows = self._q(
            f"SELECT layer, signal FROM series s WHERE EXISTS (SELECT 1 FROM {table} t "
            "WHERE t.sid = s.id) ORDER BY layer, signal"
        )
        return [(r[0], r[1]) for r in rows]

    def _unknown_layer(self, table: str, layer: str, signal: str) -> ValueError:
        pairs = self._pairs(table)
        for_signal = [la for la, s in pairs if s == signal]
        others = sorted({s for la, s in pairs if la == layer})
        hint = f"; it has {', '.join(others)}" if others else ""
        return ValueError(
            f"no {table} for layer {layer!r} and signal {signal!r}{hint}; "
            f"{close_matches(layer, for_signal or sorted({la for la, _ in pairs}))}"
        )

    def splits(self, table: str = "predictions") -> list[str]:
        """Splits with rows in ``table`` (predictions, probabilities, outputs, samples,
        embeddings)."""
        tables = ("predictions", "probabilities", "outputs", "samples", "embeddings")
        if not isinstance(table, str) or table not in tables:
            raise ValueError(f"splits: {table!r} is not a table with splits")
        return [r[0] for r in self._q(skip_scan_sql(table, "split"))]
