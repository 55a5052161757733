"""Read queries on ``attention``: a probe batch's attention maps per layer and step.

The maps are large (samples x heads x queries x keys per layer and step), the
statistics beside them small: views read one step's maps at a time and the
statistics over all steps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nbviz.store.arrays import from_blob
from nbviz.store.columns import int_array, json_value
from nbviz.store.errors import StoredValueError
from nbviz.store.query import MissingStepError, ReaderBase, close_matches, describe_steps

__all__ = ["ATTENTION_STATS", "AttentionQueries"]

#: The statistics kept per sample and head (see :mod:`nbviz.probes.attention`).
ATTENTION_STATS = ("entropy", "max_weight", "output_rms")


class AttentionQueries(ReaderBase):
    """Attention maps recorded by ``run.watch(model, attention=probe_batch)``."""

    def attention_layers(self) -> list[str]:
        """Layers with attention maps, in forward order."""
        rows = self._q("SELECT layer, min(position) FROM attention GROUP BY layer ORDER BY 2, 1")
        return [r[0] for r in rows]

    def _attention_layer(self, layer: str | None) -> str:
        layers = self.attention_layers()
        if not layers:
            raise ValueError(
                "no attention maps recorded: watch the model with "
                "run.watch(model, attention=probe_batch)"
            )
        if layer is None:
            return layers[0]
        if layer not in layers:
            raise ValueError(
                f"no attention maps of layer {layer!r}; {close_matches(layer, layers)}"
            )
        return layer

    def attention_steps(self, layer: str | None = None) -> np.ndarray:
        """Sorted steps with attention maps (of ``layer``; None: of any layer)."""
        if layer is None:
            rows = self._q("SELECT DISTINCT step FROM attention ORDER BY step")
        else:
            rows = self._q(
                "SELECT step FROM attention WHERE layer = ? ORDER BY step",
                (self._attention_layer(layer),),
            )
        return int_array(r[0] for r in rows)

    def attention(self, step: int | None = None, layer: str | None = None) -> np.ndarray:
        """``(samples, heads, queries, keys)`` float32 maps of ``layer`` at ``step``.

        ``step=None``: the latest; otherwise the latest at or before ``step``.
        ``layer=None``: the first attention layer.
        """
        layer = self._attention_layer(layer)
        steps = self.attention_steps(layer)
        if step is not None:
            steps = steps[steps <= int(step)]
        if not len(steps):
            raise MissingStepError(
                f"no attention maps of {layer!r} at or before step {step}; "
                f"{describe_steps(self.attention_steps(layer), step)}"
            )
        row = self._row(
            "SELECT maps, dtype, shape FROM attention WHERE layer = ? AND step = ?",
            (layer, int(steps[-1])),
        )
        maps = from_blob(row[0], row[1], row[2])
        if maps.ndim != 4:
            raise StoredValueError(f"attention maps of {layer!r} have shape {maps.shape}, not 4-d")
        return maps.astype(np.float32)

    def attention_stats(self, layer: str | None = None) -> pd.DataFrame:
        """Per step, layer, sample and head: ``entropy``, ``max_weight``, ``output_rms``.

        ``entropy`` is normalised (0: every query looks at one key; 1: uniform over
        the keys it may see). ``layer=None``: every layer.
        """
        sql = "SELECT step, layer, stats, shape FROM attention"
        params: tuple = ()
        if layer is not None:
            sql += " WHERE layer = ?"
            params = (self._attention_layer(layer),)
        rows = self._q(sql + " ORDER BY position, layer, step", params)
        columns = ["step", "layer", "sample", "head", *ATTENTION_STATS]
        parts = []
        for step, name, blob, shape in rows:
            n = len(blob) // 4
            dims = json_value(shape)
            if (
                not isinstance(dims, list)
                or len(dims) != 4
                or n != dims[0] * dims[1] * len(ATTENTION_STATS)
            ):
                raise StoredValueError(
                    f"attention statistics of {name!r} hold {n} values for maps of shape {dims}"
                )
            stats = from_blob(blob, "<f4", f"[{n}]").reshape(-1, len(ATTENTION_STATS))
            parts.append((int(step), name, stats, int(dims[1])))
        if not parts:
            return pd.DataFrame({c: [] for c in columns})
        frames = []
        for step, name, stats, heads in parts:
            idx = np.arange(len(stats))
            frames.append(
                pd.DataFrame(
                    {
                        "step": step,
                        "layer": name,
                        "sample": idx // heads,
                        "head": idx % heads,
                        **{k: stats[:, j] for j, k in enumerate(ATTENTION_STATS)},
                    }
                )
            )
        return pd.concat(frames, ignore_index=True)[columns]
