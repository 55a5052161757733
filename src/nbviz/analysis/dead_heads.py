"""Which attention heads are dead: the one rule every view that says so applies.

A head is dead when its output RMS is below :data:`DEAD` times the largest of its
layer's heads, or 0: a layer whose heads are all 0 reads all dead. A NaN/inf RMS
is non-finite, never dead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["DEAD", "dead_heads"]

DEAD = 1e-3
"""A head whose output RMS is below this fraction of its layer's largest is dead."""


def dead_heads(rms: Any) -> np.ndarray:
    """Booleans shaped like ``rms`` (``(..., heads)``, the heads of one layer along the
    last axis): which heads are dead (see the module doc)."""
    r = np.asarray(rms, dtype=np.float64)
    finite = np.isfinite(r)
    top = np.max(np.where(finite, r, 0.0), axis=-1, keepdims=True, initial=0.0)
    return finite & ((r == 0.0) | (r < DEAD * top))
