"""Following a run as it grows: a cached index of what it holds, and a poller.

Views read a run through one :class:`RunIndex` per run object (shared by every
view of that run in the kernel): the scalars as numpy arrays, the recorded
steps of each signal, and the union of steps a scrubber moves over. The index
is built once and then extended with cheap queries (rows after the last step
seen), because full reads of a 100k-step run take most of a second.

:func:`follow` registers a view with one shared background thread. Every
``POLL_INTERVAL`` seconds it asks SQLite whether anything was committed to each
followed run (``PRAGMA data_version``: one cheap call per run, whether the
writer is this kernel's training loop or another process). Only then does it
refresh the index and call each view's refresh; so a displayed view updates a
few times a second at most while training runs, and costs nothing once the run
is finished. :func:`unfollow` (called by a view's ``close``) stops it; the
thread exits when nothing is followed.

:class:`LiveView` is the base of the training views, with what they all do:
build under a lock while following (``_building``), declare the linked
``step`` (:func:`linked_step`), react to the browser once built
(:func:`reacts_to`), keep following the newest step (:func:`followed_step`)
and compose their style (:func:`view_css`).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import traitlets

from nbviz.store import SIGNALS, RunFileError
from nbviz.store.schema import connect
from nbviz.widgets.base import NbvizWidget
from nbviz.widgets.checks import check_run, id_trait

__all__ = [
    "POLL_INTERVAL",
    "TRAINING_CSS",
    "LiveView",
    "RunIndex",
    "Series",
    "follow",
    "followed_step",
    "following",
    "linked_step",
    "opening_step",
    "reacts_to",
    "unfollow",
    "view_css",
]

POLL_INTERVAL = 0.4
"""Seconds between checks for new data in a followed run."""

_log = logging.getLogger(__name__)


@dataclass
class Series:
    """One scalar over time: sorted int64 steps and float64 values (NaN/Inf kept)."""

    steps: np.ndarray
    values: np.ndarray

    def last(self, step: int | None = None) -> tuple[int, float] | None:
        """(step, value) at the latest step <= ``step`` (or the last one), None if before."""
        if len(self.steps) == 0:
            return None
        i = (
            len(self.steps) - 1
            if step is None
            else int(np.searchsorted(self.steps, step, "right")) - 1
        )
        if i < 0:
            return None
        return int(self.steps[i]), float(self.values[i])


def _union(parts: Sequence[np.ndarray]) -> np.ndarray:
    """The sorted union of int64 arrays (a sort and a mask: no hashing of every step)."""
    if not parts:
        return np.zeros(0, dtype=np.int64)
    out = np.sort(np.concatenate(parts), kind="stable")
    keep = np.empty(len(out), dtype=bool)
    keep[:1] = True
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    return out[keep]


def _concat(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return b if len(a) == 0 else np.concatenate([a, b])


class RunIndex:
    """What one run holds, cached for the views and extended as the run grows.

    Get it with :meth:`of` so that views of the same run object share it. All
    methods are safe to call from the poller thread and the kernel's thread.
    """

    _shared: weakref.WeakKeyDictionary[Any, RunIndex] = weakref.WeakKeyDictionary()
    _shared_lock = threading.Lock()

    def __init__(self, run: Any) -> None:
        self.run = run
        self.lock = threading.RLock()
        self._scalars: dict[str, Series] | None = None
        self._steps: dict[str, np.ndarray] = {}
        self._scalar_steps: np.ndarray | None = None
        self._scalar_counts: dict[str, int] | None = None
        self._positions: np.ndarray | None = None
        self.version = 0
        """Bumped by every refresh that found something new."""

    @classmethod
    def of(cls, run: Any) -> RunIndex:
        """The shared index of ``run`` (made on first use)."""
        with cls._shared_lock:
            index = cls._shared.get(run)
            if index is None:
                index = cls._shared[run] = cls(run)
            return index

    # -- scalars -------------------------------------------------------------------------

    def scalars(self) -> dict[str, Series]:
        """Every scalar by name (a copy of the dict; the arrays are shared, do not modify)."""
        with self.lock:
            if self._scalars is None:
                self._scalars = {}
                self._add_scalars(self.run.scalars())
            return dict(self._scalars)

    def _add_scalars(self, frame: Any) -> bool:
        assert self._scalars is not None
        if len(frame) == 0:
            return False
        for name, rows in frame.groupby("name", sort=True):
            steps = rows["step"].to_numpy(dtype=np.int64)
            values = rows["value"].to_numpy(dtype=np.float64)
            old = self._scalars.get(str(name))
            if old is None:
                self._scalars[str(name)] = Series(steps, values)
            else:
                self._scalars[str(name)] = Series(
                    _concat(old.steps, steps), _concat(old.values, values)
                )
        return True

    def scalar_steps(self) -> np.ndarray:
        """Sorted steps any scalar was logged at (int64; from the run's runs of steps)."""
        with self.lock:
            if self._scalar_steps is None:
                self._scalar_steps = np.asarray(self.run.recorded_steps("scalars"), dtype=np.int64)
            return self._scalar_steps

    def scalar_counts(self) -> dict[str, int]:
        """Rows logged of each scalar (from the run's summaries; watched for growth)."""
        with self.lock:
            if self._scalar_counts is None:
                self._scalar_counts = self.run.scalar_counts()
            return dict(self._scalar_counts)

    # -- captures ------------------------------------------------------------------------

    def steps(self, signal: str) -> np.ndarray:
        """Sorted steps with layer_stats rows for ``signal`` (int64)."""
        with self.lock:
            steps = self._steps.get(signal)
            if steps is None:
                steps = self._steps[signal] = np.asarray(self.run.steps(signal), dtype=np.int64)
            return steps

    def capture_at(self, signal: str, step: int) -> int | None:
        """The latest capture of ``signal`` at or before ``step`` (None: none yet)."""
        steps = self.steps(signal)
        i = int(np.searchsorted(steps, step, "right")) - 1
        return int(steps[i]) if i >= 0 else None

    def positions(self) -> np.ndarray:
        """Every step anything was recorded at: scalars, captures, predictions (sorted)."""
        with self.lock:
            if self._positions is None:
                parts = [self.scalar_steps()]
                parts += [self.steps(signal) for signal in SIGNALS]
                for split in self.run.splits():
                    parts.append(np.asarray(self.run.prediction_steps(split), dtype=np.int64))
                parts = [p for p in parts if len(p)]
                self._positions = _union(parts)
            return self._positions

    # -- growing -------------------------------------------------------------------------

    def refresh(self) -> bool:
        """Read what was committed since the last look; True when anything was new."""
        with self.lock:
            grew = False
            if self._scalars is not None:
                after = {
                    name: int(s.steps[-1]) for name, s in self._scalars.items() if len(s.steps)
                }
                grew |= self._add_scalars(self.run.scalars_after(after))
            # the runs of steps: a few rows, whatever the run's length
            for signal, known in list(self._steps.items()):
                steps = np.asarray(self.run.steps(signal), dtype=np.int64)
                if len(steps) != len(known):
                    self._steps[signal] = steps
                    grew = True
            if self._scalar_steps is not None:
                steps = np.asarray(self.run.recorded_steps("scalars"), dtype=np.int64)
                if len(steps) != len(self._scalar_steps):
                    self._scalar_steps = steps
                    grew = True
            if self._scalar_counts is not None:
                counts = self.run.scalar_counts()
                if counts != self._scalar_counts:
                    self._scalar_counts = counts
                    grew = True
            if grew:
                self._positions = None
                self.version += 1
            elif self._positions is not None and self._predictions_grew():
                self._positions = None
                self.version += 1
                grew = True
            return grew

    def _predictions_grew(self) -> bool:
        assert self._positions is not None
        last = int(self._positions[-1]) if len(self._positions) else -1
        for split in self.run.splits():
            steps = self.run.prediction_steps(split)
            if len(steps) and int(steps[-1]) > last:
                return True
        return False


# -- the poller -------------------------------------------------------------------------


@dataclass
class _Entry:
    widget: weakref.ref
    path: Path
    index: RunIndex
    refresh: Callable[[], None]
    seen: bool = False


@dataclass
class _Poller:
    entries: dict[int, _Entry] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    wake: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


_poller = _Poller()


def follow(widget: Any, run: Any, refresh: Callable[[], None]) -> None:
    """Call ``refresh()`` (from the poller thread) after ``run`` grows, while ``widget`` lives.

    The run's shared :class:`RunIndex` is refreshed first, once per change,
    so ``refresh`` sees the new steps. Calls are at least ``POLL_INTERVAL`` apart.
    """
    entry = _Entry(weakref.ref(widget), Path(run.run_dir), RunIndex.of(run), refresh)
    with _poller.lock:
        _poller.entries[id(widget)] = entry
        _poller.wake.clear()
        if _poller.thread is None or not _poller.thread.is_alive():
            _poller.thread = threading.Thread(target=_loop, name="nbviz-live", daemon=True)
            _poller.thread.start()


def unfollow(widget: Any) -> None:
    """Stop following for ``widget`` (idempotent); the thread ends when nothing is followed."""
    with _poller.lock:
        _poller.entries.pop(id(widget), None)
        if not _poller.entries:
            _poller.wake.set()


def following(widget: Any) -> bool:
    """Whether ``widget`` is registered with the poller."""
    with _poller.lock:
        entry = _poller.entries.get(id(widget))
        return entry is not None and entry.widget() is widget


def _data_version(conns: dict[Path, sqlite3.Connection], path: Path) -> int | None:
    conn = conns.get(path)
    try:
        if conn is None:
            conn = conns[path] = connect(path, readonly=True)
        return int(conn.execute("PRAGMA data_version").fetchone()[0])
    except (sqlite3.Error, FileNotFoundError, RunFileError):
        return None


def _loop() -> None:
    conns: dict[Path, sqlite3.Connection] = {}
    versions: dict[Path, int] = {}
    try:
        while True:
            with _poller.lock:
                for key, entry in list(_poller.entries.items()):
                    if entry.widget() is None:
                        del _poller.entries[key]
                entries = list(_poller.entries.values())
                if not entries:
                    _poller.thread = None
                    return
            changed: set[Path] = set()
            for path in {e.path for e in entries}:
                version = _data_version(conns, path)
                if version is not None and versions.get(path, version) != version:
                    changed.add(path)
                if version is not None:
                    versions[path] = version
            refreshed: set[int] = set()
            for entry in entries:
                # a new entry looks once: something may have landed since its view was built
                if entry.path not in changed and entry.seen:
                    continue
                entry.seen = True
                try:
                    if id(entry.index) not in refreshed:
                        refreshed.add(id(entry.index))
                        entry.index.refresh()
                    if entry.widget() is not None:
                        entry.refresh()
                except Exception as exc:  # a view's refresh must not stop the others
                    _log.warning("nbviz: refreshing a view of %s failed: %s", entry.path, exc)
                    widget = entry.widget()
                    if widget is not None and hasattr(widget, "error"):
                        widget.error = f"refreshing from {entry.path} failed: {exc}"
            _poller.wake.wait(POLL_INTERVAL)
            with _poller.lock:
                if _poller.entries:
                    _poller.wake.clear()
    finally:
        for conn in conns.values():
            conn.close()


# -- the base of the training views ------------------------------------------------------


def linked_step(help: str) -> traitlets.Int:
    """The synced ``step`` of a view with a time axis: what a Dashboard's scrubber moves.

    Bounded to the steps a run can hold (``0..2**53 - 1``): a value outside is a
    TraitError naming it, and the view keeps the step it had.
    """
    return id_trait(0, help, low=0)


def opening_step(step: int | None, steps: Sequence[int]) -> int:
    """The step a view opens at: ``step`` when given, else the latest of ``steps`` (or 0)."""
    return int(steps[-1]) if step is None and len(steps) else int(step or 0)


def followed_step(step: int, before: Sequence[int], after: Sequence[int]) -> int:
    """The step a view shows once its run grew from ``before`` to ``after`` (sorted steps):
    the newest when it showed the newest (or there was none), else ``step``."""
    if len(after) and (not len(before) or step >= int(before[-1])):
        return int(after[-1])
    return step


class LiveView(NbvizWidget):
    """A view of one or more runs that follows them while ``live`` (the default).

    Subclasses build their state in ``_rebuild()`` (under ``self._lock``) and
    get it called again from the poller thread when the run grew; ``close()``
    stops following. A constructor builds the view ``with self._building(runs,
    live):``; ``_ready`` turns True after that block (or where a view sets it
    earlier): methods decorated with :func:`reacts_to` wait for it.
    """

    _ready = False

    empty = traitlets.Unicode(
        "", help="Readable message shown instead of the view when there is nothing to show yet."
    ).tag(sync=True)
    notice = traitlets.Unicode(
        "", help="What part of the data is shown, e.g. '4,000 of 100,000 points'."
    ).tag(sync=True)

    def _init_live(self, runs: list[Any], live: bool) -> None:
        for run in runs:
            check_run(type(self).__name__, run)
        self._lock = threading.RLock()
        self._indexes = [RunIndex.of(r) for r in runs]
        self._built_versions = [i.version for i in self._indexes]
        self.live = bool(live)
        if live:
            for run in runs:
                follow(self, run, self._on_run_grew)

    @contextlib.contextmanager
    def _building(self, runs: list[Any], live: bool) -> Iterator[None]:
        """Follow ``runs`` (while ``live``) and build the view in the block: under the
        view's lock, in one message to the browser; the view is ``_ready`` after it."""
        self._init_live(runs, live)
        with self._lock, self.hold_sync():
            yield
            self._ready = True

    def _on_run_grew(self) -> None:
        versions = [i.version for i in self._indexes]
        if versions == self._built_versions:
            return
        with self._lock:
            self._built_versions = versions
            with self.hold_sync():
                self._rebuild()

    def _rebuild(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def close(self) -> None:
        """Stop following the run and close the view."""
        unfollow(self)
        super().close()


Reaction = Callable[[Any, Any], None]


def reacts_to(*names: str, hold: bool = True) -> Callable[[Reaction], Any]:
    """Observe the traits ``names`` of a :class:`LiveView` once it is built (``_ready``).

    The method runs under the view's lock (so the poller's rebuild waits) and,
    with ``hold``, inside ``hold_sync()``: what it changes reaches the browser in
    one message. Changes made while the constructor builds the view are left to
    the constructor, which fills everything once.
    """

    def decorate(method: Reaction) -> Any:
        def react(self: Any, change: Any) -> None:
            if not self._ready:
                return
            with self._lock, self.hold_sync() if hold else contextlib.nullcontext():
                method(self, change)

        react.__name__ = method.__name__
        react.__qualname__ = method.__qualname__
        react.__doc__ = method.__doc__
        return traitlets.observe(*names)(react)

    return decorate


#: Style shared by the training views (toolbars, swatches, small tables).
TRAINING_CSS = """
.nbviz-toolbar { display: flex; flex-wrap: wrap; align-items: center; gap: 0.4em 1em;
  margin-bottom: 0.4em; }
.nbviz-toolbar label { display: inline-flex; align-items: center; gap: 0.3em; }
.nbviz-toolbar button, .nbviz-button { font: inherit; padding: 1px 8px; cursor: pointer;
  border: 1px solid var(--jp-border-color1, #bdbdbd); border-radius: 3px;
  background: var(--jp-layout-color1, #fff); color: inherit; }
.nbviz-toolbar button:disabled { opacity: 0.5; cursor: default; }
.nbviz-notice { color: var(--jp-ui-font-color2, #616161); font-style: italic; }
.nbviz-swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px;
  margin-right: 4px; vertical-align: middle; }
.nbviz-muted { color: var(--jp-ui-font-color2, #616161); }
.nbviz-badge { display: inline-block; padding: 0 5px; border-radius: 8px; font-size: 0.85em;
  line-height: 1.5; margin: 0 2px; background: var(--jp-layout-color3, #e0e0e0); }
.nbviz-badge-info { background: #e3f2fd; color: #0d47a1; }
.nbviz-badge-warning { background: #fff3e0; color: #e65100; }
.nbviz-badge-error { background: #ffebee; color: #b71c1c; }
.nbviz canvas { display: block; }
"""


def view_css(own: str) -> str:
    """The style of a training view: the shared look and :data:`TRAINING_CSS`, then ``own``."""
    return NbvizWidget._css + TRAINING_CSS + own
