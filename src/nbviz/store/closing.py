"""The context-manager protocol of the store's objects: ``with`` closes them."""

from __future__ import annotations

from typing import TypeVar

__all__ = ["Closing"]

_Self = TypeVar("_Self", bound="Closing")


class Closing:
    """Something with an idempotent ``close()``; ``with obj:`` closes it on the way out."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
