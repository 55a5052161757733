"""Selecting points in a scatter view: the browser speaks in point indices, Python in sample ids.

A click, box or lasso in the browser sets ``picked`` (point indices, binary); the
view turns them into ``selected_ids``. Whenever ``selected_ids`` changes, from the
browser or from Python, ``selection`` sends back the point indices of those ids on
screen, so that the browser marks them (after a redraw too). The DataMap and the
EmbeddingProjector select this way.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import traitlets

from nbviz.widgets.wire import array_from_payload, array_trait_payload

__all__ = ["PointSelection"]


class PointSelection(traitlets.HasTraits):
    """The selection traits of a scatter view, and the handlers between them.

    A view keeps ``_ids`` (each point's sample id, in point order) and defines
    ``_indices(ids)`` (the point indices of ``ids`` on screen) and ``_show_selected()``
    (what a new selection opens beside the points, such as a gallery).
    """

    picked = traitlets.Dict(help="Point indices picked in the browser (binary).").tag(sync=True)
    selected_ids = traitlets.List(traitlets.Int(), help="Ids of the selected samples.").tag(
        sync=True
    )
    selection = traitlets.Dict(help="Point indices of selected_ids (binary).").tag(sync=True)

    _ids: np.ndarray
    #: Picked ids in ascending order (a box or a lasso has no order of its own); else
    #: in the order of the picked points.
    _sort_picked: ClassVar[bool] = False

    def _indices(self, ids: list[int]) -> np.ndarray:
        """Point indices of ``ids`` on screen (ids not on screen are skipped)."""
        raise NotImplementedError

    def _show_selected(self) -> None:
        """What follows a change of ``selected_ids``, once ``selection`` is sent."""

    def _send_selection(self) -> None:
        self.selection = {"indices": array_trait_payload(self._indices(self.selected_ids))}

    @traitlets.observe("picked")
    def _on_picked(self, change: Any) -> None:
        payload = change["new"] or {}
        if "indices" not in payload:
            return
        idx = np.asarray(array_from_payload(payload["indices"]), dtype=np.int64)
        ids = self._ids[idx[(idx >= 0) & (idx < len(self._ids))]]
        self.selected_ids = [int(i) for i in (np.sort(ids) if self._sort_picked else ids)]

    @traitlets.observe("selected_ids")
    def _on_selected(self, change: Any) -> None:
        self._send_selection()
        self._show_selected()
