"""A captured step profile as data: tables, the step breakdown, the Chrome trace.

:func:`nbviz.probes.profile.profile_step` captures a profile with torch and
hands back a :class:`Profile`; a run stores its JSON ``payload`` (and the trace
text) in the ``profiles`` table, and :meth:`Profile.from_run` reads it back.
Nothing here imports torch: a stored profile can be read wherever pandas exists.

All times in the payload are milliseconds per training step, averaged over the
profiled (active) steps; memory is in bytes; ``calls`` are per step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = [
    "BREAKDOWN",
    "MODULE_COLUMNS",
    "OPERATOR_COLUMNS",
    "PAYLOAD_VERSION",
    "TRACE_SUFFIX",
    "Profile",
    "overhead_text",
]

PAYLOAD_VERSION = 1
"""Version of the stored payload layout."""

TRACE_SUFFIX = "/trace"
"""A profile ``name``'s Chrome trace is stored under ``name + TRACE_SUFFIX``."""

BREAKDOWN = ("data", "forward", "backward", "optimizer", "other")
"""The parts of a step, in the order the view stacks them."""

MODULE_COLUMNS = (
    "name",
    "type",
    "parent",
    "depth",
    "calls",
    "self_ms",
    "total_ms",
    "pct",
    "forward_self_ms",
    "forward_ms",
    "backward_self_ms",
    "backward_ms",
    "device_ms",
    "memory_bytes",
    "device_memory_bytes",
    "input_shapes",
)

OPERATOR_COLUMNS = (
    "name",
    "calls",
    "self_ms",
    "total_ms",
    "pct",
    "self_device_ms",
    "device_ms",
    "memory_bytes",
    "device_memory_bytes",
)


def overhead_text(overhead: dict[str, Any] | None) -> str:
    """One line saying what the profiler cost, e.g. 'profiling made a step 1.8x slower ...'."""
    if not overhead:
        return "profiler overhead not measured (baseline=0): times are profiled times"
    ratio = overhead["ratio"]
    return (
        f"profiler overhead: a step took {overhead['profiled_ms']:.3g} ms profiled and "
        f"{overhead['baseline_ms']:.3g} ms without the profiler ({ratio:.2f}x; the median "
        f"wall-clock time of {overhead['steps']} steps each, where the step time above is "
        "the mean of the profiled steps in the trace); times shown are profiled times"
    )


@dataclass
class Profile:
    """Where one training step spends its time, per module and per operator.

    ``payload`` is the JSON-ready record that a run stores; ``trace`` the Chrome
    trace (JSON text for Perfetto or chrome://tracing), or None when not kept.
    """

    payload: dict[str, Any]
    trace: str | None = None

    # ----------------------------------------------------------------- reading
    @classmethod
    def from_run(cls, run: Any, step: int | None = None, name: str | None = None) -> Profile:
        """The profile a run stored at ``step`` (the latest when None), with its trace."""
        payload = run.load_profile(step, name)
        trace = run.profile_trace(int(payload["step"]), payload["name"])
        return cls(payload, trace)

    @property
    def step(self) -> int:
        """The training step this profile is stored at."""
        return int(self.payload["step"])

    @property
    def name(self) -> str:
        return str(self.payload["name"])

    @property
    def step_ms(self) -> float:
        """Mean profiled step time (ms) over the active steps."""
        return float(self.payload["step_ms"])

    @property
    def overhead(self) -> dict[str, Any] | None:
        """``profiled_ms``, ``baseline_ms``, ``ratio``, ``steps``; None when not measured."""
        return self.payload.get("overhead")

    def breakdown(self) -> pd.Series:
        """Milliseconds per step in data, forward, backward, optimizer and other."""
        parts = self.payload["breakdown"]
        return pd.Series({k: float(parts[k]) for k in BREAKDOWN}, name="ms")

    def modules(self) -> pd.DataFrame:
        """One row per module, slowest self time first (see :data:`MODULE_COLUMNS`)."""
        frame = pd.DataFrame(self.payload["modules"], columns=list(MODULE_COLUMNS))
        frame = frame.sort_values(["self_ms", "total_ms"], ascending=False, kind="stable")
        return frame.reset_index(drop=True)

    def operators(self) -> pd.DataFrame:
        """The top operators by self time (see :data:`OPERATOR_COLUMNS`)."""
        frame = pd.DataFrame(self.payload["operators"], columns=list(OPERATOR_COLUMNS))
        key = "self_device_ms" if self.payload.get("device", "cpu") != "cpu" else "self_ms"
        frame = frame.sort_values([key, "self_ms"], ascending=False, kind="stable")
        return frame.reset_index(drop=True)

    def export_chrome_trace(self, path: str | Path) -> Path:
        """Write the Chrome trace (open it in https://ui.perfetto.dev or chrome://tracing)."""
        if self.trace is None:
            raise ValueError(
                f"profile {self.name!r} at step {self.step} has no trace: it was captured "
                "with keep_trace=False; profile again with keep_trace=True"
            )
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.trace)
        return path

    def summary(self) -> str:
        """A few lines of text: step time, breakdown, slowest modules, overhead."""
        parts = self.breakdown()
        lines = [
            f"step {self.step}: {self.step_ms:.3g} ms per step on {self.payload['device']} "
            f"(the mean of {self.payload['schedule']['active']} profiled steps)",
            "  " + ", ".join(f"{k} {v:.3g} ms" for k, v in parts.items()),
        ]
        for row in self.modules().head(5).itertuples():
            label = row.name or f"({row.type})"
            lines.append(
                f"  {label}: self {row.self_ms:.3g} ms, total {row.total_ms:.3g} ms "
                f"({row.pct:.1f}% of the step)"
            )
        lines.append("  " + overhead_text(self.overhead))
        return "\n".join(lines)

    def to_json(self) -> str:
        """The payload as JSON text (what the ``profiles`` table holds)."""
        return json.dumps(self.payload, allow_nan=False)

    def __repr__(self) -> str:
        return (
            f"<nbviz Profile {self.name!r} at step {self.step}: {self.step_ms:.3g} ms/step, "
            f"{len(self.payload['modules'])} modules>"
        )
