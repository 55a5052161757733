"""Progress reports and cancellation of a long projection.

A caller (the projector's background job) passes ``progress(fraction,
message)`` and a cancel token; the fit reports through :class:`Progress`, which
maps each stage onto its slice of the whole and raises
:class:`ProjectionCancelled` at the next check once the token is set.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["CancelToken", "Progress", "ProgressFn", "ProjectionCancelled"]

ProgressFn = Callable[[float, str], None]
"""``progress(fraction in [0, 1], message)``."""


class CancelToken(Protocol):
    """Anything with ``is_set()`` (a ``threading.Event``): set means stop."""

    def is_set(self) -> bool: ...


class ProjectionCancelled(Exception):
    """A projection stopped because its cancel token was set."""


class Progress:
    """Reports progress (clamped to [0, 1]) and checks for cancellation at each report."""

    def __init__(self, fn: ProgressFn | None, cancel: CancelToken | None) -> None:
        self.fn = fn
        self.cancel = cancel

    def __call__(self, fraction: float, message: str) -> None:
        self.check()
        if self.fn is not None:
            self.fn(min(max(float(fraction), 0.0), 1.0), message)

    def check(self) -> None:
        """Raise ProjectionCancelled if the cancel token is set."""
        if self.cancel is not None and self.cancel.is_set():
            raise ProjectionCancelled("projection cancelled")

    def part(self, lo: float, hi: float) -> Progress:
        """A reporter for a sub-task whose progress fills the slice [lo, hi] of this one."""
        outer = self

        class _Part(Progress):
            def __call__(self, fraction: float, message: str) -> None:
                outer(lo + (hi - lo) * min(max(float(fraction), 0.0), 1.0), message)

        return _Part(None, self.cancel)
