"""Recording what the kernel would answer, for a page that has no kernel.

A live view answers in Python: setting its ``step`` (or a clicked cell, a
layer) fills other synced traits. :class:`Recorder` sets a view's inputs to
each combination a :class:`Group`'s plan walks through, and keeps, per
combination, every synced trait of the widget tree that changed. Values are
kept once each in a :class:`Pool` (binary buffers apart, as base64), which is
what the page stores. The plans themselves (which inputs, which values) are in
:mod:`nbviz.widgets.answer_plans`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as W
import numpy as np
from ipywidgets.widgets.widget import _instances

from nbviz.store import RunFileError

__all__ = ["MAX_GROUP_SECONDS", "Group", "Pool", "Recorder", "browser_links", "widget_tree"]

MAX_GROUP_SECONDS = 60.0
"""Time spent recording one view's answers at most; the rest is left out (and listed)."""

_SKIP = {
    "_esm",
    "_css",
    "_anywidget_id",
    "_model_module_version",
    "_view_module_version",
    "_view_count",
    "comm",
}
_REF = "IPY_MODEL_"


# -- the widget tree ------------------------------------------------------------------------


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, str) and value.startswith(_REF):
        yield value[len(_REF) :]
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _refs(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _refs(v)


def widget_tree(root: W.Widget) -> dict[str, W.Widget]:
    """Every widget ``root`` shows or refers to (children, layouts, embedded views), by id."""
    found: dict[str, W.Widget] = {}
    todo = [root]
    while todo:
        w = todo.pop()
        if w.model_id in found:
            continue
        found[w.model_id] = w
        for ref in _refs(w.get_state()):
            child = _instances.get(ref)
            if child is not None and child.model_id not in found:
                todo.append(child)
    return found


def browser_links(tree: dict[str, W.Widget]) -> list[dict[str, Any]]:
    """Browser-side links (jslink/jsdlink) between widgets of the tree."""
    out = []
    for w in list(_instances.values()):
        if not isinstance(w, (W.widgets.widget_link.Link, W.widgets.widget_link.DirectionalLink)):
            continue
        (src, strait), (dst, dtrait) = w.source, w.target
        if src.model_id in tree and dst.model_id in tree:
            out.append(
                {
                    "source": [src.model_id, strait],
                    "target": [dst.model_id, dtrait],
                    # DirectionalLink subclasses Link: jsdlink copies one way only
                    "both": not isinstance(w, W.widgets.widget_link.DirectionalLink),
                }
            )
    return out


# -- the pool of stored values --------------------------------------------------------------


class Pool:
    """Distinct values and binary buffers of a page, each stored once."""

    def __init__(self) -> None:
        self.values: list[str] = []  # JSON text with {"$buffer": i} for bytes
        self._value_index: dict[str, int] = {}
        self.buffers: list[str] = []  # base64
        self._buffer_index: dict[bytes, int] = {}
        self.nbytes = 0

    def _buffer(self, data: bytes) -> int:
        digest = hashlib.sha1(data).digest()
        i = self._buffer_index.get(digest)
        if i is None:
            text = base64.b64encode(data).decode("ascii")
            i = self._buffer_index[digest] = len(self.buffers)
            self.buffers.append(text)
            self.nbytes += len(text) + 3
        return i

    def _lift(self, value: Any) -> Any:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return {"$buffer": self._buffer(bytes(value))}
        if isinstance(value, dict):
            return {str(k): self._lift(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._lift(v) for v in value]
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, float) and not np.isfinite(value):
            return None  # what ipywidgets' JSON sends for NaN/Inf
        return value

    def add(self, value: Any) -> int:
        text = json.dumps(self._lift(value), separators=(",", ":"), ensure_ascii=False)
        i = self._value_index.get(text)
        if i is None:
            i = self._value_index[text] = len(self.values)
            self.values.append(text)
            self.nbytes += len(text) + 1
        return i


def _plain(value: Any) -> Any:
    """A value as a key spells it: an integer array payload (``{data, dtype, shape}``, as
    a click's point indices travel) as the list of its values, which the page's runtime
    spells alike (js/lib/offline.js ``keyText``)."""
    if isinstance(value, dict):
        data = value.get("data")
        if set(value) == {"data", "dtype", "shape"} and isinstance(data, bytes | memoryview):
            dtype = np.dtype(str(value["dtype"]))
            if dtype.kind in "iu":
                return np.frombuffer(bytes(data), dtype=dtype).tolist()
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _key_text(value: Any) -> str:
    return json.dumps(_plain(value), separators=(",", ":"), ensure_ascii=False)


# -- recording ----------------------------------------------------------------------------------


@dataclass
class Group:
    owner: W.Widget
    label: str
    inputs: list[str]
    plan: Callable[[], Iterator[None]]
    loose: list[str] = field(default_factory=list)
    steps: list[int] | None = None
    entries: list[tuple[list[str], dict[tuple[str, str], int]]] = field(default_factory=list)
    outputs: list[tuple[str, str]] = field(default_factory=list)
    complete: bool = True
    contexts: list[tuple[str, int, list[int]]] = field(default_factory=list)
    unreadable: str = ""
    """Why the recording stopped early: the run file could not be read (empty when it did not)."""


class Recorder:
    """Sets view inputs in Python and keeps what every widget of the tree sent back."""

    def __init__(self, tree: dict[str, W.Widget], pool: Pool, max_bytes: int) -> None:
        self.tree = tree
        self.pool = pool
        self.max_bytes = max_bytes
        self.current: dict[tuple[str, str], int] = {}
        self.dirty: set[tuple[str, str]] = set()
        self._handlers: list[tuple[W.Widget, Callable[[Any], None]]] = []
        for mid, w in tree.items():
            for name, value in w.get_state().items():
                if name not in _SKIP:
                    self.current[(mid, name)] = pool.add(value)

    def __enter__(self) -> Recorder:
        for mid, w in self.tree.items():
            synced = set(w.keys)

            def mark(change: Any, mid: str = mid, synced: set[str] = synced) -> None:
                if change["name"] in synced and change["name"] not in _SKIP:
                    self.dirty.add((mid, change["name"]))

            w.observe(mark)
            self._handlers.append((w, mark))
        return self

    def __exit__(self, *exc: Any) -> None:
        for w, mark in self._handlers:
            w.unobserve(mark)
        self._handlers.clear()

    def settle(self) -> None:
        """Store the values that changed since the last look."""
        for mid, name in sorted(self.dirty):
            value = self.tree[mid].get_state(name)[name]
            self.current[(mid, name)] = self.pool.add(value)
        self.dirty.clear()

    def _restore(
        self, base: dict[tuple[str, str], int], values: dict[tuple[str, str], Any]
    ) -> None:
        """Set back what a plan left changed elsewhere (a linked view, a hover read-out)."""
        for _ in range(3):
            left = [p for p, i in self.current.items() if base.get(p) != i and p in values]
            if not left:
                return
            for mid, name in left:
                try:
                    setattr(self.tree[mid], name, values[(mid, name)])
                except RunFileError:  # a damaged table: the value recorded before is kept
                    pass
            self.settle()

    def record(self, group: Group) -> None:
        """Run the group's plan; keep, per combination of inputs, every changed trait."""
        owner = group.owner
        start = {n: getattr(owner, n) for n in group.inputs}
        values = {
            (mid, name): getattr(w, name)
            for mid, w in self.tree.items()
            for name in w.keys
            if name not in _SKIP
        }
        self.settle()
        base = dict(self.current)
        diffs: list[tuple[list[str], dict[tuple[str, str], int]]] = []
        seen: set[tuple[str, ...]] = set()
        deadline = time.perf_counter() + MAX_GROUP_SECONDS
        try:
            for _ in group.plan():
                self.settle()
                key = [_key_text(getattr(owner, n)) for n in group.inputs]
                if tuple(key) in seen:
                    continue
                seen.add(tuple(key))
                diff = {p: i for p, i in self.current.items() if base.get(p) != i}
                diffs.append((key, diff))
                if self.pool.nbytes > self.max_bytes or time.perf_counter() > deadline:
                    group.complete = False
                    break
        except RunFileError as exc:
            # a damaged table behind some answers: the page keeps those recorded and says
            # why the others are not (as the live Dashboard leaves out a view it cannot read)
            group.complete = False
            group.unreadable = str(exc)
        for n in group.inputs:  # back to where it was
            try:
                setattr(owner, n, start[n])
            except RunFileError:  # what it showed before is kept below (base)
                pass
        self.settle()
        self._restore(base, values)
        own = {(owner.model_id, n) for n in group.inputs}
        outputs = sorted({p for _, d in diffs for p in d} - own)
        group.outputs = outputs
        group.entries = [(key, {p: d.get(p, base[p]) for p in outputs}) for key, d in diffs]
        # the plan may leave values behind that no entry needs (restored state): keep base
        for p, i in base.items():
            self.current[p] = i
