"""StatusMessage: one readable line of text, for empty states, notes and errors."""

from __future__ import annotations

from typing import Any

import traitlets

from nbviz.widgets.base import NbvizWidget
from nbviz.widgets.frontend import esm

__all__ = ["StatusMessage"]


class StatusMessage(NbvizWidget):
    """A short message shown as plain text (never parsed as HTML).

    Other views embed it for their empty and error states, e.g.
    ``StatusMessage("No predictions logged for split 'val' yet", kind="empty")``.

    Parameters
    ----------
    message
        The text to show.
    kind
        ``"info"``, ``"empty"``, ``"warning"`` or ``"error"``; sets the look.
    dismissible
        Show a close button; clicking it sets ``dismissed`` to True.
    """

    _esm = esm("status")

    message = traitlets.Unicode("").tag(sync=True)
    kind = traitlets.Enum(("info", "empty", "warning", "error"), default_value="info").tag(
        sync=True
    )
    dismissible = traitlets.Bool(False).tag(sync=True)
    dismissed = traitlets.Bool(False, help="Set by the close button; False shows it again.").tag(
        sync=True
    )

    def __init__(
        self, message: str = "", *, kind: str = "info", dismissible: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(message=message, kind=kind, dismissible=dismissible, **kwargs)
