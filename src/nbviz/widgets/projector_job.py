"""The projector's background layout: t-SNE or UMAP in a thread, with progress, cancellable.

While PCA is on screen, :class:`LayoutJobs` computes the chosen method's layout
in a daemon thread, at most one at a time per view: starting another cancels
the one running, and so does a change that makes it unwanted. Its progress and
status go to the view's ``progress`` and ``status`` traits (a few times a
second); the layout, when done and still wanted, goes to ``deliver``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from nbviz.analysis import projection as proj

__all__ = ["PROGRESS_EVERY", "Job", "LayoutJobs"]

PROGRESS_EVERY = 0.25
"""Seconds between progress updates sent to the browser."""


class Job:
    """One background projection: what it is for, and how to stop it."""

    def __init__(self, want: tuple[Any, ...]) -> None:
        self.want = want
        self.cancel = threading.Event()


class LayoutJobs:
    """The background projection of one view (``progress``, ``status``, ``hold_sync``,
    ``_lock``); ``want`` is ``(split, layer, step, method, params, align)``."""

    def __init__(
        self, view: Any, run: Any, deliver: Callable[[tuple[Any, ...], proj.Layout], None]
    ) -> None:
        self._view = view
        self._run = run
        self._deliver = deliver
        self.job: Job | None = None
        self.lock = threading.Lock()

    def cancel(self) -> None:
        """Stop the job running (if any); the view shows no progress."""
        with self.lock:
            if self.job is not None:
                self.job.cancel.set()
                self.job = None
        self._view.progress = 1.0
        self._view.status = ""

    def start(self, want: tuple[Any, ...]) -> None:
        """Compute ``want`` in the background, unless that is what runs already."""
        view = self._view
        with self.lock:
            if self.job is not None and self.job.want == want:
                return
            if self.job is not None:
                self.job.cancel.set()
            job = self.job = Job(want)
        reason = proj.method_unavailable(want[3])
        if reason:
            self.cancel()
            view.status = f"{reason}; showing PCA"
            return
        view.progress = 0.0
        view.status = f"{proj.METHOD_LABELS[want[3]]}: queued"
        threading.Thread(
            target=self._run_job, args=(job,), name="nbviz-projector", daemon=True
        ).start()

    def _run_job(self, job: Job) -> None:
        view = self._view
        last = [0.0]

        def progress(fraction: float, message: str) -> None:
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY and not job.cancel.is_set():
                last[0] = now
                with view.hold_sync():
                    view.progress = float(fraction)
                    view.status = message

        split, layer, step, method, params, align = job.want
        try:
            layout = proj.compute_layout(
                self._run,
                step,
                split=split,
                layer=layer,
                method=method,
                params=dict(params),
                align=align,
                progress=progress,
                cancel=job.cancel,
            )
        except proj.ProjectionCancelled:
            return
        except Exception as exc:  # shown in the view: the PCA layout stays
            with self.lock:
                if self.job is job:
                    self.job = None
                    view.status = f"{proj.METHOD_LABELS[method]} failed: {exc}; showing PCA"
            return
        with view._lock:
            with self.lock:
                if self.job is not job:
                    return
            try:
                with view.hold_sync():
                    view.progress = 1.0
                    view.status = ""
                    self._deliver(job.want, layout)
            except Exception as exc:  # a run closed or damaged meanwhile: said, not raised
                view.status = f"{proj.METHOD_LABELS[method]} could not be shown: {exc}"
            finally:
                with self.lock:
                    if self.job is job:
                        self.job = None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the background projection (if any) is done; True when it is."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self.lock:
                if self.job is None:
                    return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.05)
