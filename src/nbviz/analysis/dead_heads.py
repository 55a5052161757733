"""Which attention heads are dead: the one rule every view that says so applies.

A head is dead when its output RMS is 0, or below both :data:`DEAD` times the largest
of its layer's heads and the absolute :data:`FLOOR`: a layer whose heads are all 0 reads
all dead, and one outlier head hundreds of times larger than the rest (a value projection
scaled up) does not make heads of an ordinary size (0.1) read dead. A NaN/inf RMS
is non-finite, never dead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["DEAD", "FLOOR", "dead_heads"]

DEAD = 1e-3
"""A head whose output RMS is below this fraction of its layer's largest is dead."""

FLOOR = 1e-3
"""... and below this output RMS: live heads' outputs are 0.01 to 1 (a weighted mean of
values a few hundredths to one in size), a dead head's 0 or rounding noise."""


def dead_heads(rms: Any) -> np.ndarray:
    """Booleans shaped like ``rms`` (``(..., heads)``, the heads of one layer along the
    last axis): which heads are dead (see the module doc)."""
    r = np.asarray(rms, dtype=np.float64)
    finite = np.isfinite(r)
    top = np.max(np.where(finite, r, 0.0), axis=-1, keepdims=True, initial=0.0)
    return finite & ((r == 0.0) | ((r < DEAD * top) & (r < FLOOR)))
