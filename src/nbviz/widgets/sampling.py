"""Long series sent in part: evenly spaced picks, and the words that say how much is shown.

Views never send a whole long run to the browser; they pick at most so many
steps (the first and last always among them) and say what they left out.
"""

from __future__ import annotations

import numpy as np

__all__ = ["count_text", "evenly"]


def count_text(shown: int, total: int, what: str) -> str:
    """'4,000 of 100,000 points' (or '' when everything is shown)."""
    return "" if shown >= total else f"{shown:,} of {total:,} {what}"


def evenly(values: np.ndarray, k: int) -> np.ndarray:
    """At most ``k`` items of sorted ``values``, evenly spaced, the first and last included."""
    n = len(values)
    if n <= k:
        return values
    idx = np.unique(np.linspace(0, n - 1, k).round().astype(np.int64))
    return values[idx]
