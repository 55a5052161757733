"""The base of the training views: :class:`LiveView`, a view that follows its runs.

Views read a run through its shared :class:`~nbviz.widgets.run_index.RunIndex`
and follow it with the poller of :mod:`nbviz.widgets.poller` (both re-exported
here). :class:`LiveView` is the base of the training views, with what they all
do: build under a lock while following (``_building``), declare the linked
``step`` (:func:`linked_step`), react to the browser once built
(:func:`reacts_to`; a run closed meanwhile is said in ``error``), keep
following the newest step (:func:`followed_step`) and compose their style
(:func:`view_css`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import traitlets

from nbviz.store import RunClosedError
from nbviz.widgets.base import NbvizWidget
from nbviz.widgets.checks import check_flag, check_run, id_trait
from nbviz.widgets.poller import (
    POLL_INTERVAL,
    FileIdentity,
    file_identity,
    follow,
    following,
    replaced_message,
    unfollow,
)
from nbviz.widgets.run_index import RunIndex, Series

__all__ = [
    "POLL_INTERVAL",
    "TRAINING_CSS",
    "FileIdentity",
    "LiveView",
    "RunIndex",
    "Series",
    "file_identity",
    "follow",
    "followed_step",
    "following",
    "linked_step",
    "opening_step",
    "reacts_to",
    "replaced_message",
    "unfollow",
    "view_css",
]


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

    #: While True, a view at the newest step of what it shows moves on to the newest as
    #: the run grows (a view on its own, watching a training loop). A Dashboard turns it
    #: off for the views its scrubber drives: the scrubber follows, and they follow it.
    follow_newest = True

    def _followed(self, step: int, before: Sequence[int], after: Sequence[int]) -> int:
        """The step to show once what the view shows grew from ``before`` to ``after``
        (sorted steps; see :func:`followed_step`), ``step`` when it does not follow."""
        if not (self._ready and self.follow_newest):
            return step
        return followed_step(step, before, after)

    empty = traitlets.Unicode(
        "", help="Readable message shown instead of the view when there is nothing to show yet."
    ).tag(sync=True)
    notice = traitlets.Unicode(
        "", help="What part of the data is shown, e.g. '4,000 of 100,000 points'."
    ).tag(sync=True)

    def _init_live(self, runs: list[Any], live: bool) -> None:
        live = check_flag(type(self).__name__, "live", live)
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
                try:
                    method(self, change)
                except RunClosedError as exc:  # a click on a view of a closed run: said
                    self.error = f"{type(self).__name__}: {exc}"

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
.nbviz-export { position: relative; display: inline-block; }
.nbviz-export-list { position: absolute; z-index: 10; right: 0; top: 100%; display: flex;
  flex-direction: column; background: var(--jp-layout-color1, #fff);
  border: 1px solid var(--jp-border-color1, #bdbdbd); border-radius: 3px; }
.nbviz-export-list[hidden] { display: none; }
.nbviz-export-item { font: inherit; border: none; background: transparent; color: inherit;
  padding: 3px 14px; cursor: pointer; text-align: left; }
.nbviz-export-item:hover { background: var(--jp-layout-color2, #eeeeee); }
.nbviz-export-note { color: #b71c1c; margin-left: 0.4em; }
.nbviz-export-note:empty { display: none; }
"""


def view_css(own: str) -> str:
    """The style of a training view: the shared look and :data:`TRAINING_CSS`, then ``own``."""
    return NbvizWidget._css + TRAINING_CSS + own
