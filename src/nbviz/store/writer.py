"""The run store's writer: one background thread that commits rows in batches.

About 550 lines because the queue, the batching and the failure handling share one
thread's state; the row encoding and the summaries are already apart
(:mod:`nbviz.store.encoding`, :mod:`nbviz.store.summaries`).

``Writer.insert`` only puts rows on a bounded queue and returns; a daemon thread
with its own connection executes them (multi-row ``INSERT OR REPLACE``) and
commits. Rows wait in the queue for up to ``commit_interval`` seconds (less when
the queue fills up, none when someone calls ``flush`` or ``close``) and are then
written and committed in one burst: readers only see committed rows anyway, and
a thread that wakes for every insert would take the GIL from a training loop
dozens of times per step. A process that dies loses at most what was not yet
committed.
An error in the thread is kept and raised, with the table and the cause, by
the next ``insert``, ``flush`` or ``close``. A failure to keep the summaries
(derived from rows that are stored) is not an error: the next of those calls
warns of the first one with a RunFileWarning, once per writer.
"""

from __future__ import annotations

import collections
import itertools
import json
import reprlib
import sqlite3
import sys
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbviz.store.closing import Closing
from nbviz.store.connection import close_writer, db_path
from nbviz.store.encoding import SeriesIds, encode_rows
from nbviz.store.errors import warn_run_file
from nbviz.store.schema import TABLES, create_or_open
from nbviz.store.summaries import StepRuns, Touched, refresh
from nbviz.store.tables import STORED

__all__ = ["Writer", "WriterError"]

# Tables whose rows carry blobs or long text: their queued bytes are counted.
_BULKY = frozenset(
    {
        "histograms",
        "histogram_bins",
        "unit_stats",
        "probabilities",
        "outputs",
        "samples",
        "embeddings",
        "projections",
        "profiles",
        "captures",
        "attention",
        "unit_tokens",
        "events",
        "meta",
    }
)
_SIZED = (bytes, bytearray, memoryview, str)
_ROW_OVERHEAD = 64  # rough bytes per queued row, beyond its blobs and strings


class WriterError(RuntimeError):
    """A write that failed in the writer thread, raised on the next call."""


def _insert_sql(table: str, nrows: int = 1) -> str:
    columns = STORED.get(table, TABLES[table])
    names = ", ".join(f'"{c}"' for c in columns)
    row = "(" + ", ".join("?" for _ in columns) + ")"
    return f"INSERT OR REPLACE INTO {table} ({names}) VALUES {', '.join([row] * nrows)}"


_INSERT_SQL = {table: _insert_sql(table) for table in TABLES}

# Rows go to SQLite in multi-row INSERT statements of _CHUNKS[0] rows, then
# smaller ones, then one at a time. The sqlite3 module releases the GIL once per
# executed statement, and a thread that gives up the GIL while another thread
# runs Python may wait a whole switch interval (5 ms) to get it back: one row
# per statement would let a busy training loop starve the writer.
_MAX_CHUNK = 2048
_CHUNK_STEP = 8


@dataclass
class _Item:
    seq: int
    op: str  # "insert" | "sql"
    table: str  # table name, or the SQL text for op == "sql"
    rows: Any  # list of tuples, or the parameters for op == "sql"
    nrows: int
    nbytes: int


@dataclass
class _State:
    """What the caller and the thread share; holds no reference to the Writer."""

    conn: sqlite3.Connection
    where: Path
    commit_interval: float
    max_pending: int
    max_pending_bytes: int
    cond: threading.Condition = field(default_factory=threading.Condition)
    queue: collections.deque = field(default_factory=collections.deque)
    pending_rows: int = 0
    pending_bytes: int = 0
    enqueued: int = 0  # seq of the last item queued
    committed: int = 0  # seq of the last item committed (or failed for good)
    flush_waiters: int = 0
    blocked: int = 0  # inserters waiting for room in the queue
    closing: bool = False
    closed: bool = False
    dead: bool = False  # the thread has stopped
    error: WriterError | None = None  # first unreported error
    more_errors: int = 0
    fatal: WriterError | None = None  # the thread itself failed
    ids: SeriesIds = field(default_factory=SeriesIds)  # the writer thread's alone
    runs: StepRuns = field(default_factory=StepRuns)  # the writer thread's alone
    by_close: bool = False  # shut down by Writer.close, which raises what went wrong
    notice: str | None = None  # summaries that could not be kept: warned once, not raised
    noticed: bool = False  # the notice was given (once per writer)


def _record(state: _State, message: str, exc: BaseException) -> None:
    with state.cond:
        if state.error is None:
            err = WriterError(
                f"nbviz store writer for run at {state.where}: {message}: "
                f"{type(exc).__name__}: {exc}"
            )
            err.__cause__ = exc
            state.error = err
        else:
            state.more_errors += 1


def _notice(state: _State, problems: list[tuple[str, Exception]]) -> None:
    """Keep the first failure to update the summaries, for one RunFileWarning: they are
    derived from rows that are stored, so nothing the caller wrote was lost."""
    with state.cond:
        if state.noticed or state.notice is not None:
            return
        what, exc = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        state.notice = (
            f"{db_path(state.where)}: {what}{more} could not be brought up to date "
            f"({type(exc).__name__}: {exc}); the rows are stored, but views that read "
            "these summaries may miss what was written since (said once per writer)"
        )


def _chunk_sizes(conn: sqlite3.Connection, table: str) -> list[int]:
    """Rows per multi-row statement for a table, largest first, within SQLite's bind limit."""
    getlimit = getattr(conn, "getlimit", None)  # Python >= 3.11
    if getlimit is not None:
        limit = getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    else:
        limit = 32766 if sqlite3.sqlite_version_info >= (3, 32, 0) else 999
    size = _MAX_CHUNK
    while size * len(STORED.get(table, TABLES[table])) > limit:
        size //= 2
    sizes = []
    while size > 1:
        sizes.append(size)
        size //= _CHUNK_STEP
    return sizes


def _insert_rows(state: _State, table: str, rows: list[Sequence[Any]], sizes: list[int]) -> None:
    conn = state.conn
    flat = itertools.chain.from_iterable
    try:
        rows = encode_rows(conn, state.ids, table, rows)
    except Exception:  # noqa: BLE001 - retried row by row to keep the good rows
        _insert_one_by_one(state, table, rows)
        return
    start, n = 0, len(rows)
    for size in sizes:
        sql = None
        while n - start >= size:
            sql = sql or _insert_sql(table, size)
            chunk = rows[start : start + size]
            try:
                conn.execute(sql, list(flat(chunk)))
            except Exception:  # noqa: BLE001 - retried row by row to keep the good rows
                _insert_one_by_one(state, table, chunk, encoded=True)
            start += size
    if start < n:
        _insert_one_by_one(state, table, rows[start:], encoded=True)


def _insert_one_by_one(
    state: _State, table: str, rows: list[Sequence[Any]], encoded: bool = False
) -> None:
    sql = _INSERT_SQL[table]
    failed, first = 0, None
    for row in rows:
        try:
            stored = row if encoded else encode_rows(state.conn, state.ids, table, [row])[0]
            state.conn.execute(sql, stored)
        except Exception as exc:  # noqa: BLE001 - kept and re-raised on the next call
            failed += 1
            if first is None:
                first = (row, exc)
    if first is not None:
        row, exc = first
        _record(
            state,
            f"inserting into {table!r}: {failed} of {len(rows)} row(s) failed, the first "
            f"being {reprlib.repr(tuple(row))}",
            exc,
        )


def _execute(state: _State, items: list[_Item], sizes: dict[str, list[int]]) -> None:
    """Run queued items in order; consecutive inserts into one table go together; then
    bring the summaries of what was written up to date (in the same transaction)."""
    touched = Touched()
    i = 0
    while i < len(items):
        item = items[i]
        if item.op == "sql":
            try:
                state.conn.execute(item.table, item.rows)
            except Exception as exc:  # noqa: BLE001 - kept and re-raised on the next call
                _record(state, f"executing {item.table!r} with {item.rows!r} failed", exc)
            i += 1
            continue
        j = i + 1
        while j < len(items) and items[j].op == "insert" and items[j].table == item.table:
            j += 1
        rows = item.rows if j == i + 1 else [r for it in items[i:j] for r in it.rows]
        if item.table == "layer_stats":
            touched.read_stats_floor(state.conn)  # before the rows: see Touched.appends_stats
        touched.note(item.table, rows)
        if item.table not in sizes:
            sizes[item.table] = _chunk_sizes(state.conn, item.table)
        _insert_rows(state, item.table, rows, sizes[item.table])
        i = j
    if touched:
        try:
            problems = refresh(state.conn, touched, state.runs)
        except Exception as exc:  # noqa: BLE001 - derived data: warned of on the next call
            problems = [("the run's summaries", exc)]
        if problems:
            _notice(state, problems)


def _commit(state: _State) -> None:
    try:
        state.conn.execute("COMMIT")
    except Exception as exc:  # noqa: BLE001
        _record(state, "commit failed; the rows of this batch are lost", exc)
        state.ids.clear()
        state.runs.clear()
        try:
            state.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def _full(state: _State) -> bool:
    """The queue holds enough that the thread should not wait for the interval to end."""
    return (
        state.blocked > 0
        or 2 * state.pending_rows >= state.max_pending
        or 2 * state.pending_bytes >= state.max_pending_bytes
    )


def _loop(state: _State) -> None:
    cond = state.cond
    executed = 0
    sizes: dict[str, list[int]] = {}
    try:
        while True:
            with cond:
                while not state.queue and not state.closing:
                    cond.wait()
                # gather for up to one commit interval: one burst of writes
                deadline = time.monotonic() + state.commit_interval
                while not (state.flush_waiters or state.closing or _full(state)):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    cond.wait(left)
                items = list(state.queue)
                state.queue.clear()
            if not items:
                return  # closing, and everything is committed
            # immediate: the batch reads what it adds to (Touched.read_stats_floor)
            state.conn.execute("BEGIN IMMEDIATE")
            _execute(state, items, sizes)
            executed = items[-1].seq
            _commit(state)
            with cond:
                state.pending_rows -= sum(i.nrows for i in items)
                state.pending_bytes -= sum(i.nbytes for i in items)
                state.committed = executed
                cond.notify_all()
            del items
    except BaseException as exc:  # noqa: BLE001 - reported to the caller
        err = WriterError(
            f"nbviz store writer for run at {state.where} stopped: "
            f"{type(exc).__name__}: {exc}; rows not yet committed are lost"
        )
        err.__cause__ = exc
        with cond:
            state.fatal = err
    finally:
        with cond:
            state.dead = True
            state.committed = state.enqueued
            cond.notify_all()


def _shutdown(state: _State, thread: threading.Thread, at_exit: bool = False) -> None:
    """Flush, stop the thread and close the connection (the finalizer; runs once)."""
    with state.cond:
        state.closing = True
        state.cond.notify_all()
    thread.join()
    # the run becomes one self-contained file: log folded in, WAL mode left when alone
    problem = close_writer(state.conn, db_path(state.where))
    state.closed = True
    if at_exit and not state.by_close and state.notice is not None:
        print(f"nbviz: {state.notice}", file=sys.stderr)
    if at_exit and not state.by_close and (state.error is not None or state.fatal is not None):
        print(f"nbviz: {state.fatal or state.error}", file=sys.stderr)
    if problem:
        if at_exit and not state.by_close:
            print(f"nbviz: {db_path(state.where)}: {problem}", file=sys.stderr)
        else:
            warn_run_file(f"{db_path(state.where)}: {problem}")


class Writer(Closing):
    """The one writer of a run: ``insert`` queues rows, a background thread commits them.

    Parameters
    ----------
    run_dir:
        The run directory; created, with its schema, if it does not exist.
    commit_interval:
        Longest time in seconds that queued rows wait before they are written
        and committed (readers see them then).
    max_pending:
        Most rows queued and not yet written; ``insert`` blocks beyond it
        (back-pressure keeps memory bounded whatever the producer does).
    max_pending_bytes:
        Same bound for the bytes of blobs and text in queued rows.

    The thread is a daemon; ``close`` (also run by a finalizer at interpreter
    exit or when the Writer is garbage-collected) commits everything queued.
    """

    def __init__(
        self,
        run_dir: Path | str,
        *,
        commit_interval: float = 0.5,
        max_pending: int = 10_000,
        max_pending_bytes: int = 8 << 20,
    ) -> None:
        if commit_interval <= 0:
            raise ValueError(f"Writer: commit_interval must be > 0, got {commit_interval}")
        if max_pending < 1 or max_pending_bytes < 1:
            raise ValueError(
                f"Writer: max_pending and max_pending_bytes must be >= 1, got "
                f"{max_pending} and {max_pending_bytes}"
            )
        self.run_dir = Path(run_dir)
        conn = create_or_open(self.run_dir)
        conn.execute("PRAGMA cache_size=-16384")
        self._state = _State(
            conn=conn,
            where=self.run_dir,
            commit_interval=float(commit_interval),
            max_pending=int(max_pending),
            max_pending_bytes=int(max_pending_bytes),
        )
        self._thread = threading.Thread(
            target=_loop, args=(self._state,), name=f"nbviz-writer {self.run_dir}", daemon=True
        )
        self._thread.start()
        self._finalizer = weakref.finalize(self, _shutdown, self._state, self._thread, True)

    # -- state -------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._state.closed or self._state.closing

    @property
    def pending(self) -> int:
        """Rows queued and not yet written (at most ``max_pending``, or one oversized batch)."""
        return self._state.pending_rows

    @property
    def uncommitted(self) -> bool:
        """Whether anything queued is not committed yet (a read would not see it)."""
        return self._state.committed < self._state.enqueued

    def _raise_pending(self) -> None:
        state = self._state
        with state.cond:
            notice, state.notice = state.notice, None
            if notice is not None:
                state.noticed = True
        if notice is not None:
            warn_run_file(notice)
        with state.cond:
            if state.fatal is not None:
                raise state.fatal
            err, more = state.error, state.more_errors
            state.error, state.more_errors = None, 0
        if err is not None:
            if more:
                err.args = (f"{err.args[0]} (and {more} more failed write(s) after it)",)
            raise err

    def _check_open(self, what: str) -> None:
        self._raise_pending()
        if self.closed:
            raise RuntimeError(f"Writer.{what}: the writer of run at {self.run_dir} is closed")

    # -- writing -----------------------------------------------------------------

    def insert(self, table: str, rows: Iterable[Sequence[Any]]) -> None:
        """Queue rows (tuples in the table's column order) for INSERT OR REPLACE.

        Returns at once unless the queue is full, in which case it waits for
        the writer thread to catch up.
        """
        # called on every training step (run.log): kept short
        columns = TABLES.get(table)
        if columns is None:
            raise ValueError(
                f"Writer.insert: unknown table {table!r}; known tables: {', '.join(TABLES)}"
            )
        if type(rows) is not list:
            rows = list(rows)
        if not rows:
            self._check_open("insert")
            return
        width = len(columns)
        for i, row in enumerate(rows):
            if len(row) != width:
                raise ValueError(
                    f"Writer.insert: row {i} for {table!r} has {len(row)} values but the "
                    f"table has {width} columns ({', '.join(columns)})"
                )
        nbytes = _ROW_OVERHEAD * len(rows)
        if table in _BULKY:
            nbytes += sum(len(v) for r in rows for v in r if isinstance(v, _SIZED))
        self._enqueue("insert", table, rows, len(rows), nbytes)

    def set_meta(self, key: str, value: Any) -> None:
        """Queue ``meta[key] = value`` (stored as JSON)."""
        self.insert("meta", [(str(key), json.dumps(value))])

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> None:
        """Queue one SQL statement (rare writes such as a DELETE), run in order with inserts."""
        self._enqueue("sql", sql, params, 1, _ROW_OVERHEAD + len(sql))

    def _enqueue(self, op: str, table: str, rows: Any, nrows: int, nbytes: int) -> None:
        state = self._state
        if state.error is not None or state.fatal is not None or state.closing or state.notice:
            self._check_open("insert" if op == "insert" else "execute")
        with state.cond:
            while (
                state.pending_rows > 0
                and (
                    state.pending_rows + nrows > state.max_pending
                    or state.pending_bytes + nbytes > state.max_pending_bytes
                )
                and not state.dead
            ):
                state.blocked += 1
                state.cond.notify_all()
                try:
                    state.cond.wait()
                finally:
                    state.blocked -= 1
            if state.dead or state.closing:
                raise state.fatal or RuntimeError(
                    f"Writer: the writer of run at {self.run_dir} closed while rows waited"
                )
            state.enqueued += 1
            wake = not state.queue  # the thread sleeps until the first row
            state.queue.append(_Item(state.enqueued, op, table, rows, nrows, nbytes))
            state.pending_rows += nrows
            state.pending_bytes += nbytes
            if wake or _full(state):
                state.cond.notify_all()

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything queued before this call is committed.

        Raises TimeoutError after ``timeout`` seconds, and the writer thread's
        error if a write failed.
        """
        self._raise_pending()
        state = self._state
        deadline = None if timeout is None else time.monotonic() + timeout
        with state.cond:
            target = state.enqueued
            state.flush_waiters += 1
            state.cond.notify_all()
            try:
                while state.committed < target:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise TimeoutError(
                            f"Writer.flush: {target - state.committed} queued batch(es) "
                            f"for run at {self.run_dir} not committed after {timeout} s"
                        )
                    state.cond.wait(left)
            finally:
                state.flush_waiters -= 1
        self._raise_pending()

    def close(self) -> None:
        """Commit everything queued, stop the thread and close the connection (idempotent).

        The log is folded into ``run.sqlite`` and, when no other connection has
        the run open, the database leaves WAL mode: a closed run is one
        self-contained file. If another connection kept it from that, a
        RunFileWarning says so.
        """
        if not self._finalizer.alive:
            return
        self._state.by_close = True
        self._finalizer()  # runs _shutdown once; later calls do nothing
        self._raise_pending()

    def __repr__(self) -> str:
        return f"Writer({str(self.run_dir)!r}{', closed' if self.closed else ''})"
