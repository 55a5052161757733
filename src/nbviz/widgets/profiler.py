"""Profiler: where a training step spends its time, per module, in the notebook.

``nbviz.Profiler(model, step_fn)`` profiles a few training steps with
``torch.profiler`` (the capture lives in :mod:`nbviz.probes.profile`) and shows
the result: the step split into data loading, forward, backward, optimizer and
other; an icicle of the model's modules (width = time; click a module to zoom
to it, click the top bar to zoom out); a sortable table of modules (self and
total time, calls, % of the step, input shapes, memory) and the top operators;
and what the profiler itself cost. With ``run=`` the profile is stored in the
run and the view reads it back from there, so ``nbviz.Profiler(run)`` shows it
again after a kernel restart; its ``step`` then picks the profile stored at or
before that step (the Dashboard's scrubber moves it).

The view only shows what was stored: the payload of a
:class:`~nbviz.analysis.profile.Profile`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import traitlets

from nbviz.analysis.profile import MODULE_COLUMNS, Profile, overhead_text
from nbviz.store import Reader
from nbviz.widgets.checks import check_int, check_known
from nbviz.widgets.frontend import esm
from nbviz.widgets.live import LiveView, linked_step, reacts_to, view_css
from nbviz.widgets.view_data import bars_figure, frame

__all__ = ["Profiler"]

PHASES = ("total", "forward", "backward")
# every column of the module table but the tree's own bookkeeping
SORT_KEYS = tuple(c for c in MODULE_COLUMNS if c not in ("parent", "depth", "device_memory_bytes"))


class Profiler(LiveView):
    """A training step's time per module: breakdown, icicle, module and operator tables.

    Parameters
    ----------
    model
        The model to profile, or a run (``nbviz.Run`` / ``nbviz.open_run``) whose
        stored profiles to show (then leave ``step_fn`` out).
    step_fn
        One training step: ``step_fn()``, or ``step_fn(batch)`` with ``data``.
    steps, warmup, wait
        The profiler's schedule (steps recorded, warmup steps discarded, steps skipped).
    data
        Optional batches (a callable or an iterable, cycled); fetching them counts as
        data loading.
    run
        Store the profile in this run at ``step`` (default: its last logged step).
    step
        The step to store at, or, showing a run, the step whose profile to show.
    name
        The profile's name in the run.
    baseline, keep_trace
        Steps timed without the profiler to state its overhead; keep the Chrome trace.
    live
        Showing a run: pick up profiles stored later.

    Traits: ``step`` (linked; the profile at or before it is shown), ``zoom`` (the
    module the icicle is zoomed to, "" for the whole model), ``phase``
    (``"total"``, ``"forward"`` or ``"backward"``: what the icicle's widths show),
    ``sort_by`` and ``descending`` (the module table's order).

    ``data()`` is the module table as a DataFrame (the view's menu downloads it
    as CSV; it offers no picture of the icicle), ``figure()`` a bqplot bar chart
    of the slowest modules' self time.
    """

    _esm = esm("profiler")

    step = linked_step("Linked step: the profile stored at or before it is shown.")
    profile = traitlets.Dict(help="The payload of the profile shown.").tag(sync=True)
    profile_steps = traitlets.List(traitlets.Int(), help="Steps with a stored profile.").tag(
        sync=True
    )
    overhead = traitlets.Unicode("", help="What the profiler cost, in words.").tag(sync=True)
    zoom = traitlets.Unicode("", help="Module the icicle is zoomed to; '' for the model.").tag(
        sync=True
    )
    phase = traitlets.Enum(PHASES, default_value="total", help="Icicle widths.").tag(sync=True)
    sort_by = traitlets.Enum(SORT_KEYS, default_value="self_ms").tag(sync=True)
    descending = traitlets.Bool(True).tag(sync=True)

    def __init__(
        self,
        model: Any,
        step_fn: Callable[..., Any] | None = None,
        *,
        steps: int = 5,
        warmup: int = 2,
        wait: int = 1,
        data: Any = None,
        run: Any = None,
        step: int | None = None,
        name: str = "profile",
        baseline: int | None = None,
        keep_trace: bool = True,
        live: bool = True,
        **kwargs: Any,
    ) -> None:
        check_int("Profiler", "step", step)
        super().__init__(**kwargs)
        self._name = name
        self._run: Any = None
        self._result: Profile | None = None
        options = dict(steps=steps, warmup=warmup, wait=wait, data=data)
        options.update(baseline=baseline, keep_trace=keep_trace)
        if isinstance(model, Reader):
            if step_fn is not None:
                raise TypeError(
                    "Profiler: got a run and a step_fn; to profile, pass the model: "
                    "Profiler(model, step_fn, run=run)"
                )
            self._run = model
        elif step_fn is None or not callable(step_fn):
            raise TypeError(
                f"Profiler: step_fn must be a callable running one training step, got {step_fn!r}"
            )
        elif run is not None:
            self._result = run.profile(model, step_fn, step=step, name=name, **options)
            self._run = run
            step = self._result.step
        else:
            from nbviz.probes.profile import profile_step

            self._result = profile_step(model, step_fn, name=name, step=step or 0, **options)
        self._known_steps: list[int] = []
        runs = [self._run] if self._run is not None else []
        with self._building(runs, live and self._run is not None):
            if self._run is not None:
                steps_now = self._stored_steps()
                if step is None and steps_now:
                    step = steps_now[-1]
            self.step = int(step or 0)
            self._rebuild()

    # ------------------------------------------------------------ reading
    @property
    def result(self) -> Profile | None:
        """The profile shown, with its trace (None when nothing is shown)."""
        if self._result is None and self._run is not None and self.profile:
            self._result = Profile.from_run(self._run, self.profile["step"], self.profile["name"])
        return self._result

    def _shown(self) -> Profile:
        result = self.result
        if result is None:
            raise ValueError(f"Profiler: no profile is shown ({self.empty or 'nothing stored'})")
        return result

    def modules(self) -> pd.DataFrame:
        """The module table of the profile shown, slowest self time first."""
        return self._shown().modules()

    def data(self) -> pd.DataFrame:
        """The module table of the profile shown, slowest self time first; empty (same
        columns) when no profile is shown. Columns: ``name, type, parent, depth, calls,
        self_ms, total_ms, pct, forward_self_ms, forward_ms, backward_self_ms,
        backward_ms, device_ms, memory_bytes, device_memory_bytes, input_shapes``."""
        if self.result is None:
            return frame([], list(MODULE_COLUMNS))
        return self.modules()

    def figure(self, top: int = 15) -> Any:
        """The ``top`` modules by self time as a bqplot bar chart (milliseconds per step)."""
        if top < 1:
            raise ValueError(f"Profiler.figure: top must be >= 1, got {top}")
        table = self._shown().modules().head(top)
        return bars_figure(
            table["name"].tolist(),
            table["self_ms"].to_numpy(),
            title=f"self time per module at step {self.profile.get('step', '')}",
            y_label="ms per step",
        )

    def operators(self) -> pd.DataFrame:
        """The top operators of the profile shown."""
        return self._shown().operators()

    def breakdown(self) -> pd.Series:
        """Milliseconds per step in data, forward, backward, optimizer and other."""
        return self._shown().breakdown()

    def export_chrome_trace(self, path: str | Path) -> Path:
        """Write the shown profile's Chrome trace (for Perfetto or chrome://tracing)."""
        return self._shown().export_chrome_trace(path)

    # ------------------------------------------------------------ state
    def _stored_steps(self) -> list[int]:
        return [int(s) for s in self._run.profile_steps(self._name)]

    @traitlets.validate("zoom")
    def _check_zoom(self, proposal: Any) -> str:
        name = proposal["value"]
        names = [m["name"] for m in self.profile.get("modules", [])]
        if not names:
            return name
        problem = f"Profiler.zoom: no module {name!r} in this profile"
        return check_known(name, names, problem, "modules: ", limit=300)

    @reacts_to("step")
    def _on_step(self, change: Any) -> None:
        if self._run is not None:
            self._show_at(change["new"])

    def _on_run_grew(self) -> None:
        if self._run is not None and self._stored_steps() != self._known_steps:
            with self._lock, self.hold_sync():
                self._rebuild()
            return
        super()._on_run_grew()

    def _rebuild(self) -> None:
        if self._run is None:
            assert self._result is not None
            self.profile_steps = [self._result.step]
            self._set_profile(self._result.payload)
            return
        self._known_steps = self._stored_steps()
        self.profile_steps = self._known_steps
        self._show_at(self.step)

    def _show_at(self, step: int) -> None:
        steps = self._known_steps
        if not steps:
            self._set_profile({})
            self.empty = (
                f"No profile stored in {self._run.name} yet"
                + (f" under the name {self._name!r}" if self._name != "profile" else "")
                + ": record one with run.profile(model, step_fn) or "
                "nbviz.Profiler(model, step_fn, run=run)."
            )
            return
        i = int(np.searchsorted(steps, step, side="right")) - 1
        chosen = steps[max(i, 0)]
        current = self.profile.get("step") if self.profile else None
        if current != chosen:
            self._result = None
            self._set_profile(self._run.load_profile(chosen, self._name))
        self.notice = (
            ""
            if chosen == step
            else f"profile of step {chosen}, the "
            + ("latest at or before" if i >= 0 else "first after")
            + f" step {step}"
        )

    def _set_profile(self, payload: dict[str, Any]) -> None:
        if not payload:
            self.profile = {}
            self.overhead = ""
            return
        missing = [k for k in ("modules", "breakdown", "operators", "step_ms") if k not in payload]
        if missing:
            self.error = (
                f"Profiler: the stored profile {payload.get('name')!r} at step "
                f"{payload.get('step')} lacks {', '.join(missing)}; record it again"
            )
            return
        names = {m["name"] for m in payload["modules"]}
        self.empty = ""
        self.error = ""
        if self.zoom not in names:
            self.zoom = ""
        self.profile = payload
        self.overhead = overhead_text(payload.get("overhead"))

    def __repr__(self) -> str:
        shown = self.profile.get("step")
        return f"<nbviz Profiler: {'nothing shown' if shown is None else f'step {shown}'}>"


Profiler._css = view_css(
    """
.nbviz-prof { display: flex; flex-direction: column; gap: 10px; }
.nbviz-prof-head { display: flex; flex-wrap: wrap; gap: 0.4em 1.2em; align-items: baseline; }
.nbviz-prof-title { font-weight: 600; }
.nbviz-prof-overhead, .nbviz-prof-notes { color: var(--jp-ui-font-color2, #616161);
  font-size: 0.92em; }
.nbviz-prof-bar { display: flex; height: 22px; border-radius: 3px; overflow: hidden;
  border: 1px solid var(--jp-border-color2, #e0e0e0); }
.nbviz-prof-seg { height: 100%; color: #fff; font-size: 0.85em; line-height: 22px;
  overflow: hidden; white-space: nowrap; text-overflow: clip; padding-left: 3px;
  box-sizing: border-box; }
.nbviz-prof-legend { display: flex; flex-wrap: wrap; gap: 0.3em 1.2em; margin-top: 3px;
  font-size: 0.92em; font-variant-numeric: tabular-nums; }
.nbviz-prof-crumbs { display: flex; flex-wrap: wrap; gap: 0.2em; align-items: center; }
.nbviz-prof-crumb { cursor: pointer; color: var(--jp-brand-color1, #1976d2); }
.nbviz-prof-crumb:last-child { color: inherit; cursor: default; font-weight: 600; }
.nbviz-prof-icicle { position: relative; width: 100%; overflow: hidden;
  border: 1px solid var(--jp-border-color2, #e0e0e0); border-radius: 3px; }
.nbviz-prof-node { position: absolute; height: 20px; box-sizing: border-box;
  border: 1px solid var(--jp-layout-color1, #fff); border-radius: 2px; overflow: hidden;
  white-space: nowrap; font-size: 0.82em; line-height: 18px; padding: 0 3px; cursor: pointer;
  color: #102027; }
.nbviz-prof-node:hover { filter: brightness(0.92); }
.nbviz-prof-node.nbviz-prof-root { font-weight: 600; }
.nbviz-prof-scroll { overflow: auto; max-height: 320px; }
.nbviz-prof-table { border-collapse: collapse; font-variant-numeric: tabular-nums; width: 100%; }
.nbviz-prof-table th, .nbviz-prof-table td { padding: 2px 8px; text-align: right;
  border-bottom: 1px solid var(--jp-border-color2, #e0e0e0); white-space: nowrap; }
.nbviz-prof-table th { cursor: pointer; position: sticky; top: 0; user-select: none;
  background: var(--jp-layout-color1, #fff); }
.nbviz-prof-table td.nbviz-prof-text, .nbviz-prof-table th.nbviz-prof-text { text-align: left; }
.nbviz-prof-table tbody tr { cursor: pointer; }
.nbviz-prof-table tbody tr:hover { background: var(--jp-layout-color2, #eeeeee); }
.nbviz-prof-table tbody tr.nbviz-active { outline: 2px solid var(--jp-brand-color1, #1976d2);
  outline-offset: -2px; }
.nbviz-prof-shapes { max-width: 260px; overflow: hidden; text-overflow: ellipsis; }
"""
)
