"""A finding: one thing a check noticed about a run, and the numbers behind it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nbviz.analysis.checks.robust import Onset

#: Severities, worst first. ``error``: training is broken (non-finite values, a
#: layer that passes nothing); ``warning``: the user should act on it; ``info``:
#: worth knowing, nothing to fix.
SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {name: rank for rank, name in enumerate(SEVERITIES)}

#: What a finding can point to, as ``run.triage()`` names it.
CAUSES = ("architecture", "data", "learning_rate", "optimizer", "numerics")


@dataclass(frozen=True)
class Finding:
    """One row of ``run.diagnose()``.

    ``layer`` is a module's qualified name (``""`` for the run as a whole),
    ``step`` the step since which the problem holds (None when it has no time),
    ``evidence`` the numbers behind the message, JSON-serialisable.

    ``cause`` is what the finding points to on its own (one of :data:`CAUSES`),
    ``advice`` what to try if it is a root cause (kept out of ``message``: a
    consequence of another finding gets none of its own), and ``summary`` a
    short clause for the verdict ("the loss rose to 114 at step 3").
    """

    check: str
    severity: str
    message: str
    layer: str = ""
    step: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    cause: str = "architecture"
    advice: str = ""
    summary: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITY_RANK:
            raise ValueError(
                f"Finding: severity must be one of {', '.join(SEVERITIES)}, got {self.severity!r}"
            )
        if self.cause not in CAUSES:
            raise ValueError(
                f"Finding: cause must be one of {', '.join(CAUSES)}, got {self.cause!r}"
            )
        object.__setattr__(self, "evidence", jsonable(self.evidence))
        if self.step is not None:
            object.__setattr__(self, "step", int(self.step))


def onset_warning(
    check: str,
    layer: str,
    onset: Onset,
    message: str,
    advice: tuple[str, str],
    summary: tuple[str, str],
    evidence: dict[str, Any],
) -> Finding:
    """A warning whose cause follows from when it set in.

    There from the first capture, it points at the initialisation or the input's scale
    (``architecture``); set in during training, at weights or logits grown by too large
    steps (``learning_rate``). ``advice`` and ``summary`` are pairs: (from the start, later).
    """
    later = not onset.from_start
    return Finding(
        check=check,
        severity="warning",
        layer=layer,
        step=onset.step,
        cause="learning_rate" if later else "architecture",
        message=message,
        advice=advice[later],
        summary=summary[later],
        evidence=evidence,
    )


def jsonable(value: Any) -> Any:
    """``value`` with numpy scalars and arrays as Python numbers and lists, NaN/inf as None."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if value is None or isinstance(value, str):
        return value
    return str(value)


def fmt(value: float) -> str:
    """A number for a message: 4 significant digits, scientific when very large or small."""
    if value is None or not math.isfinite(value):
        return str(value)
    if value != 0 and (abs(value) >= 1e4 or abs(value) < 1e-3):
        return f"{value:.2e}"
    return f"{value:.3g}"


def pct(frac: float) -> str:
    """A fraction as a percentage for a message."""
    return f"{100 * frac:.0f}%" if frac >= 0.01 or frac == 0 else f"{100 * frac:.2g}%"


def names(items: list[str], limit: int = 6) -> str:
    """``a, b, c`` (and ``N more``) for a message."""
    shown = ", ".join(f"'{i}'" for i in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
