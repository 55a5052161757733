"""A run's layouts: what one is, its cache key, and its storage in the run.

Each layout is stored in the run (``run.put_projection``) under a key that
hashes the run, split, layer, step, method, parameters and, for aligned
layouts, the recorded steps it was chained over; a second view reads it back
instead of computing. Stored beside the coordinates: the resolved parameters,
``align``, ``fitted_on`` and ``n``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from nbviz.analysis.embedding.methods import resolve_params
from nbviz.analysis.embedding.sampling import fit_note

if TYPE_CHECKING:
    from nbviz.store import Reader

__all__ = [
    "ALGORITHM_VERSION",
    "Layout",
    "layout_key",
    "load_layout",
    "run_identity",
    "stored_params",
]

ALGORITHM_VERSION = 1
"""Bump when a method's computation changes, so layouts cached by an older nbviz are redone."""

_NOT_PARAMS = ("align", "fitted_on", "n")  # stored with the parameters, not among them


@dataclass(frozen=True)
class Layout:
    """The layout of one recorded embedding: ``coords[i]`` is where sample ``ids[i]`` goes."""

    ids: np.ndarray
    coords: np.ndarray
    step: int
    split: str
    layer: str
    method: str
    params: dict[str, Any]
    align: bool
    fitted_on: int
    key: str
    cached: bool = field(default=False, compare=False)

    @classmethod
    def from_stored(
        cls,
        key: str,
        ids: np.ndarray,
        coords: np.ndarray,
        step: int,
        split: str,
        layer: str,
        method: str,
        stored: Mapping[str, Any],
        cached: bool = False,
    ) -> Layout:
        """A Layout from its coordinates and what is stored with them (:func:`stored_params`)."""
        return cls(
            ids=np.asarray(ids),
            coords=np.asarray(coords, dtype=np.float32),
            step=int(step),
            split=split,
            layer=layer,
            method=method,
            params={k: v for k, v in stored.items() if k not in _NOT_PARAMS},
            align=bool(stored.get("align", False)),
            fitted_on=int(stored.get("fitted_on", len(ids))),
            key=key,
            cached=cached,
        )

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def note(self) -> str:
        """ "fitted on 20,000 of 100,000 points" when fitted on a sample, else ""."""
        return fit_note(self.fitted_on, self.n)


def run_identity(run: Reader) -> str:
    """What tells this run apart in a cache key: its creation time, else its directory."""
    created = run.meta("created")
    if created is None:
        return str(getattr(run, "run_dir", "run"))
    return json.dumps(created)


def layout_key(
    run: Reader | str,
    split: str,
    layer: str,
    step: int,
    method: str,
    params: Mapping[str, Any] | None = None,
    chain: Sequence[int] | None = None,
) -> str:
    """The cache key of a layout: a hash of run, split, layer, step, method, parameters
    and (aligned layouts) the recorded steps up to ``step`` it is chained over."""
    identity = run if isinstance(run, str) else run_identity(run)
    payload = {
        "v": ALGORITHM_VERSION,
        "run": identity,
        "split": split,
        "layer": layer,
        "step": int(step),
        "method": method,
        "params": resolve_params(method, params),
        "chain": None if chain is None else [int(s) for s in chain],
    }
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return f"layout-{method}-{digest[:40]}"


def stored_params(params: Mapping[str, Any], align: bool, fitted_on: int, n: int) -> dict[str, Any]:
    """What is stored with a layout's coordinates: its parameters, align, fitted_on and n."""
    return {**params, "align": align, "fitted_on": fitted_on, "n": n}


def load_layout(run: Reader, key: str, step: int, split: str, layer: str) -> Layout | None:
    """The layout stored under ``key``, or None (none, or the embedding was logged again
    with other rows since)."""
    hit = run.projection(key)
    if hit is None:
        return None
    coords, meta = hit
    ids, _ = run.embeddings(step, split, layer)
    if len(ids) != len(coords):  # the embedding was logged again with other rows
        return None
    stored = meta.get("params") or {}
    return Layout.from_stored(key, ids, coords, step, split, layer, meta["method"], stored, True)
