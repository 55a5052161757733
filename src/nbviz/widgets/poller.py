"""Following runs as they grow: one background thread that looks for new commits.

:func:`follow` registers a view with one shared background thread. Every
``POLL_INTERVAL`` seconds it asks SQLite whether anything was committed to each
followed run (``PRAGMA data_version``: one cheap call per run, whether the
writer is this kernel's training loop or another process). Only then does it
refresh the run's :class:`~nbviz.widgets.run_index.RunIndex` and call each
view's refresh; so a displayed view updates a few times a second at most while
training runs, and costs nothing once the run is finished. :func:`unfollow`
(called by a view's ``close``) stops it; the thread exits when nothing is
followed.

A run's file can be replaced under a view: ``nbviz.Run(path, overwrite=True)``
run again in the same kernel deletes the database and writes a new one at the
same path. The poller tells the files apart by their identity (device and
inode; it holds the old one open, so the number is not reused), opens the new
file, and tells each view that followed the old one: the view's ``replaced``
callback (a Dashboard rebuilds itself on the new run), or by default its
``error``, which says in words that the run it shows was replaced.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbviz.store import RunClosedError, RunFileError
from nbviz.store.schema import connect, db_path
from nbviz.widgets.run_index import RunIndex

__all__ = [
    "POLL_INTERVAL",
    "FileIdentity",
    "file_identity",
    "follow",
    "following",
    "replaced_message",
    "unfollow",
]

POLL_INTERVAL = 0.4
"""Seconds between checks for new data in a followed run."""

_log = logging.getLogger(__name__)


FileIdentity = tuple[int, int]
"""A database file's (device, inode): what tells a replaced run from the one a view read."""


def file_identity(path: Path | str) -> FileIdentity | None:
    """The identity of the database file of the run at ``path`` (None: there is none yet)."""
    try:
        st = os.stat(db_path(path))
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def replaced_message(path: Path | str) -> str:
    """What a view says when the run it shows was replaced by a new one at the same path."""
    return (
        f"The run at {path} was replaced: it was recorded afresh (nbviz.Run(..., "
        "overwrite=True)) after this view was made, so what this view showed is gone. "
        "Make the view again on the new run, e.g. nbviz.Dashboard(run)."
    )


@dataclass
class _Entry:
    widget: weakref.ref
    path: Path
    index: RunIndex
    refresh: Callable[[], None]
    identity: FileIdentity | None
    replaced: Callable[[], None] | None = None
    seen: bool = False


@dataclass
class _Poller:
    entries: dict[int, _Entry] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    wake: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


_poller = _Poller()


def follow(
    widget: Any,
    run: Any,
    refresh: Callable[[], None],
    *,
    replaced: Callable[[], None] | None = None,
) -> None:
    """Call ``refresh()`` (from the poller thread) after ``run`` grows, while ``widget`` lives.

    The run's shared :class:`RunIndex` is refreshed first, once per change,
    so ``refresh`` sees the new steps. Calls are at least ``POLL_INTERVAL`` apart.
    When the run's file is replaced by a new run at the same path, the widget
    stops following and ``replaced()`` is called once (by default the widget's
    ``error`` says so, where it has one).
    """
    path = Path(run.run_dir)
    entry = _Entry(
        weakref.ref(widget), path, RunIndex.of(run), refresh, file_identity(path), replaced
    )
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


@dataclass
class _Open:
    """The poller's connection to one run file, and which file it is."""

    conn: sqlite3.Connection
    identity: FileIdentity


def _data_version(
    conns: dict[Path, _Open], path: Path, identity: FileIdentity | None
) -> int | None:
    """``PRAGMA data_version`` of the file now at ``path`` (None: none there, or unreadable).

    A connection to a file that is no longer the one at ``path`` is closed first:
    it would read the replaced run forever.
    """
    held = conns.get(path)
    if held is not None and held.identity != identity:
        conns.pop(path)
        with contextlib.suppress(sqlite3.Error):
            held.conn.close()
        held = None
    if identity is None:
        return None
    try:
        if held is None:
            held = conns[path] = _Open(connect(path, readonly=True), identity)
        return int(held.conn.execute("PRAGMA data_version").fetchone()[0])
    except (sqlite3.Error, FileNotFoundError, RunFileError):
        return None


def _drop(entry: _Entry) -> None:
    """Stop following for the view of ``entry`` (its run was closed)."""
    with _poller.lock:
        for key, held in list(_poller.entries.items()):
            if held is entry:
                del _poller.entries[key]


def _replace(entry: _Entry) -> None:
    """Tell the view of ``entry`` that its run's file was replaced (it no longer follows)."""
    with _poller.lock:
        key = next((k for k, e in _poller.entries.items() if e is entry), None)
        if key is None:  # unfollowed meanwhile (a Dashboard closed its views)
            return
        del _poller.entries[key]
    widget = entry.widget()
    if widget is None:
        return
    if entry.replaced is not None:
        entry.replaced()
    elif hasattr(widget, "error"):
        widget.error = replaced_message(entry.path)


def _loop() -> None:
    conns: dict[Path, _Open] = {}
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
            identities: dict[Path, FileIdentity | None] = {}
            for path in {e.path for e in entries}:
                identity = identities[path] = file_identity(path)
                held = conns.get(path)
                if held is not None and held.identity != identity:
                    versions.pop(path, None)  # another file: its versions start afresh
                    if identity is not None:
                        changed.add(path)
                version = _data_version(conns, path, identity)
                if version is not None and versions.get(path, version) != version:
                    changed.add(path)
                if version is not None:
                    versions[path] = version
            refreshed: set[int] = set()
            # views that rebuild themselves on a replaced run (a Dashboard) go first: they
            # close the views they hold, which then need no word of their own
            entries.sort(key=lambda e: e.replaced is None)
            for entry in entries:
                identity = identities[entry.path]
                if identity is None:  # no file there now (being replaced): nothing to read
                    continue
                if entry.identity is None:  # the run's file appeared since the view was made
                    entry.identity = identity
                elif identity is not None and identity != entry.identity:
                    try:
                        _replace(entry)
                    except Exception as exc:  # one view's trouble must not stop the others
                        _log.warning(
                            "nbviz: following the new run at %s failed: %s", entry.path, exc
                        )
                    continue
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
                except RunClosedError:  # closed on purpose: the view keeps what it shows
                    _drop(entry)
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
        for held in conns.values():
            held.conn.close()
