"""Read queries on ``embeddings`` and ``projections``: per-sample feature matrices and
their cached 2-d layouts."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from nbviz.store.arrays import from_blob, to_blob
from nbviz.store.columns import int64_blob, int_array, json_value
from nbviz.store.connection import connect
from nbviz.store.errors import RunFileError
from nbviz.store.query import MissingStepError, ReaderBase, close_matches, describe_steps
from nbviz.store.schema import TABLES

__all__ = ["EmbeddingQueries"]

_PROJECTION_COLUMNS = ", ".join(TABLES["projections"])
_PROJECTION_INSERT = (
    f"INSERT OR REPLACE INTO projections ({_PROJECTION_COLUMNS}) "
    f"VALUES ({', '.join('?' for _ in TABLES['projections'])})"
)


class EmbeddingQueries(ReaderBase):
    """Embeddings per split, layer and step; the projection cache beside them.

    A projection that cannot be written into the run (a read-only directory) is
    kept in this reader's memory instead, for its lifetime.
    """

    def embedding_layers(self, split: str = "val", kind: str | None = None) -> list[str]:
        """Layers with embeddings for a split (and kind), in order of first record."""
        sql = "SELECT layer, min(step), min(rowid) FROM embeddings WHERE split = ?"
        params: list[Any] = [split]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        rows = self._q(sql + " GROUP BY layer ORDER BY 2, 3", params)
        return [r[0] for r in rows]

    def _embedding_layer(self, split: str, layer: str | None, kind: str) -> str:
        layers = self.embedding_layers(split, kind)
        if layer is None:
            if not layers:
                raise ValueError(
                    f"no {kind} embeddings recorded for split {split!r}; splits with "
                    f"embeddings: {', '.join(self.splits('embeddings')) or 'none yet'}"
                )
            return layers[0]
        if layer not in layers:
            raise ValueError(
                f"no {kind} embeddings of layer {layer!r} for split {split!r}; "
                f"{close_matches(layer, layers)}"
            )
        return layer

    def embedding_steps(
        self, split: str = "val", layer: str | None = None, kind: str = "embedding"
    ) -> np.ndarray:
        """Sorted steps with embeddings for a split, layer (None: the first) and kind."""
        if layer is None:
            layers = self.embedding_layers(split, kind)
            if not layers:
                return np.zeros(0, dtype=np.int64)
            layer = layers[0]
        rows = self._q(
            "SELECT step FROM embeddings WHERE split = ? AND layer = ? AND kind = ? ORDER BY step",
            (split, layer, kind),
        )
        return int_array(r[0] for r in rows)

    def embeddings(
        self,
        step: int | None,
        split: str = "val",
        layer: str | None = None,
        kind: str = "embedding",
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(ids int64 [n], matrix [n, d])`` recorded at ``step`` (None: the latest).

        ``layer=None``: the first layer recorded for the split (the only one, usually).
        """
        layer = self._embedding_layer(split, layer, kind)
        params: list[Any] = [split, layer, kind]
        sql = (
            "SELECT ids, matrix, dtype, shape FROM embeddings "
            "WHERE split = ? AND layer = ? AND kind = ?"
        )
        if step is None:
            sql += " ORDER BY step DESC LIMIT 1"
        else:
            sql += " AND step = ?"
            params.append(int(step))
        row = self._row(sql, params)
        if row is None:
            raise MissingStepError(
                f"no {kind} embeddings of {layer!r} ({split}) at step {step}; "
                f"{describe_steps(self.embedding_steps(split, layer, kind), step)}"
            )
        return int64_blob(row[0]), from_blob(row[1], row[2], row[3])

    # -- projections -----------------------------------------------------------------

    def _kept_projections(self) -> dict[str, tuple[np.ndarray, dict[str, Any]]]:
        """The projections this reader could not write into the run, by key."""
        return self.__dict__.setdefault("_memory_projections", {})

    def projection(self, key: str) -> tuple[np.ndarray, dict[str, Any]] | None:
        """A cached projection ``(matrix, meta)`` or None; meta holds split, layer,
        step, method, params (decoded), created."""
        row = self._row(f"SELECT {_PROJECTION_COLUMNS} FROM projections WHERE key = ?", (key,))
        if row is None:
            return self._kept_projections().get(key)
        return from_blob(*row[6:9]), _projection_meta(row)

    def put_projection(
        self,
        key: str,
        split: str,
        layer: str,
        step: int,
        method: str,
        params: dict[str, Any],
        matrix: np.ndarray,
    ) -> bool:
        """Cache a projection in the run; True when stored there.

        Writes through its own short-lived connection (waiting for a writer of
        the run, if any, to commit). When the run cannot be written (read-only
        directory or file), the projection is kept in this Reader's memory for
        its lifetime instead and False is returned.
        """
        blob, dtype, shape = to_blob(matrix)
        row = (key, split, layer, int(step), method, json.dumps(params))
        row += (blob, dtype, shape, time.time())
        try:
            conn = connect(self.run_dir, readonly=False, wal=False)
            try:
                with conn:
                    conn.execute(_PROJECTION_INSERT, row)
            finally:
                conn.close()
        except (sqlite3.OperationalError, RunFileError):
            self._kept_projections()[key] = (from_blob(blob, dtype, shape), _projection_meta(row))
            return False
        self._kept_projections().pop(key, None)
        return True


def _projection_meta(row: Sequence[Any]) -> dict[str, Any]:
    """The meta of a ``projections`` row (in the table's column order)."""
    key, split, layer, step, method, params, _, _, _, created = row
    return {
        "key": key,
        "split": split,
        "layer": layer,
        "step": step,
        "method": method,
        "params": None if params is None else json_value(params),
        "created": created,
    }
