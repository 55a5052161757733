"""StepScrubber: move through a run's recorded steps; every linked view follows.

The positions are every step anything was recorded at (scalars, probe
captures, predictions), sent as arithmetic runs: a few bytes for a run logged
every step, however long (:mod:`nbviz.widgets.step_runs`). Play/pause,
back/forward buttons and the arrow keys move ``step``; the scalars logged at (or
last before) that step are shown.
While the run grows, a scrubber standing on the last step moves on with it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import traitlets

from nbviz.widgets.checks import id_trait
from nbviz.widgets.frontend import esm
from nbviz.widgets.live import LiveView, linked_step, reacts_to, view_css
from nbviz.widgets.step_runs import runs_payload
from nbviz.widgets.wire import array_from_payload, floats_payload, steps_payload

__all__ = ["StepScrubber"]


class StepScrubber(LiveView):
    """A slider over the recorded steps of ``run`` with play/pause and step buttons.

    Parameters
    ----------
    run
        A run (``nbviz.Run`` or ``nbviz.open_run(...)``).
    fps
        Positions per second while playing.
    live
        Follow the run while it grows.

    Traits: ``step`` (the current step; link other views' ``step`` to it),
    ``playing``, ``fps``, ``stride`` (positions advanced per tick of play).
    """

    _esm = esm("scrubber")

    step = linked_step("The current step (any int; the slider shows the nearest).")
    positions = traitlets.Dict(
        help="Recorded steps as arithmetic runs: runs (binary [first, count, stride] rows), "
        "total (steps recorded) and every (1, or k where every k-th step is sent)."
    ).tag(sync=True)
    scalars_at = traitlets.Dict(
        help="The scalars at the step: names, steps they were logged at, values (binary)."
    ).tag(sync=True)
    playing = traitlets.Bool(False).tag(sync=True)
    fps = traitlets.Float(4.0, help="Positions per second while playing.").tag(sync=True)
    stride = id_trait(1, "Positions advanced per tick while playing.", low=1, high=2**31 - 1)
    run_name = traitlets.Unicode("").tag(sync=True)

    def __init__(self, run: Any, *, fps: float = 4.0, live: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._run = run
        self._positions = np.zeros(0, dtype=np.int64)
        with self._building([run], live):
            self.run_name = str(getattr(run, "name", run))
            self.fps = fps
            self._rebuild()
            if len(self._positions):
                self.step = int(self._positions[-1])
            self._update_scalars()

    @traitlets.validate("fps")
    def _check_fps(self, proposal: Any) -> float:
        value = proposal["value"]
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise traitlets.TraitError(f"StepScrubber.fps must be a number, got {value!r}")
        value = float(value)
        if not 0 < value <= 60:
            raise traitlets.TraitError(f"StepScrubber.fps must be in (0, 60], got {value}")
        return value

    @property
    def steps(self) -> np.ndarray:
        """The positions: every recorded step, sorted (int64)."""
        return self._positions

    def _rebuild(self) -> None:
        index = self._indexes[0]
        old = self._positions
        # on the newest step, or none yet (a scrubber made before the first step): follow
        at_end = len(old) == 0 or self.step >= int(old[-1])
        self._positions = index.positions()
        n = len(self._positions)
        # a bounded payload: a run logged every step is one run (see step_runs)
        self.positions = runs_payload(self._positions)
        self.stride = max(1, math.ceil(n / self.positions["every"] / 400))
        if n == 0:
            self.empty = (
                f"Nothing recorded yet in {self.run_name}: log scalars with run.log(step, ...) "
                "or attach a probe with run.watch(model); the scrubber fills in as steps arrive."
            )
        else:
            self.empty = ""
            if at_end:
                self.step = int(self._positions[-1])
        self._update_scalars()

    @reacts_to("step", hold=False)
    def _on_step(self, change: Any) -> None:
        self._update_scalars()

    def _update_scalars(self) -> None:
        # one index seek per scalar, however long the run
        at = self._run.scalars_at(self.step)
        self.scalars_at = {
            "names": [str(n) for n in at["name"]],
            "steps": steps_payload(at["step"].to_numpy(dtype=np.int64)),
            "values": floats_payload(at["value"].to_numpy(dtype=np.float64)),
        }

    def scalar_values(self) -> dict[str, tuple[int, float]]:
        """What the scrubber shows: ``{name: (step logged at, value)}`` at ``step``."""
        names = self.scalars_at.get("names", [])
        steps = array_from_payload(self.scalars_at["steps"])
        values = array_from_payload(self.scalars_at["values"])
        return {n: (int(s), float(v)) for n, s, v in zip(names, steps, values)}

    def next(self, by: int = 1) -> int:
        """Move ``by`` positions forward (negative: back); returns the new step."""
        if len(self._positions) == 0:
            return self.step
        i = int(np.searchsorted(self._positions, self.step, "right")) - 1
        if by < 0 and i >= 0 and self._positions[i] != self.step:
            i += 1  # between positions: one back is the one at or before
        i = min(max(i + by, 0), len(self._positions) - 1)
        self.step = int(self._positions[i])
        return self.step


StepScrubber._css = view_css(
    """
.nbviz-scrubber { outline: none; }
.nbviz-scrubber:focus-visible { box-shadow: 0 0 0 2px var(--jp-brand-color1, #1976d2); }
.nbviz-scrub-row { display: flex; align-items: center; gap: 6px; }
.nbviz-scrub-slider { flex: 1; min-width: 120px; }
.nbviz-scrub-step { font-variant-numeric: tabular-nums; min-width: 13em; }
.nbviz-scrub-scalars { font-variant-numeric: tabular-nums; margin-top: 2px;
  color: var(--jp-ui-font-color1, #1f1f1f); }
.nbviz-scrub-scalars b { font-weight: 600; }
"""
)
