"""What torch.profiler's events say about a training step, module by module.

The capture (:mod:`nbviz.probes.profile`) wraps each module's forward in a
``record_function`` range; this module reads the profiler's events back into
a :class:`~nbviz.analysis.profile.Profile`'s tables: the step breakdown, the
time and memory of each module, the operator table, and an annotated trace.

Backward time is attributed without backward hooks. A module's full backward
hooks wrap its outputs in an extra autograd function, which breaks in-place
operations on them (``ReLU(inplace=True)``) and fires early for a module whose
inputs need no gradient. Instead, each backward node that the profiler records
(``autograd::engine::evaluate_function: AddmmBackward0``) carries the sequence
number of the forward operator that created it; the operator ran inside a
module's forward range, so the node's time is that module's backward time. The
exported trace gets an extra track, ``nbviz backward by module``, that labels
those nodes with their module.

The step breakdown splits each profiled step (the profiler's ``ProfilerStep``
range) into data loading (``data=`` batches, DataLoader iteration), forward
(the module ranges), backward (autograd nodes), optimizer (``Optimizer.step``
and ``zero_grad``, which torch labels itself) and other (the rest), each
instant counted once, so the parts add up to the step.

The events are torch's own objects (``FunctionEvent``, ``key_averages()``
rows), so reading them stays beside the capture, among the probes; the
analysis layer sees only the stored :class:`~nbviz.analysis.profile.Profile`.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, Protocol

DATA_LABEL = "nbviz.data"
"""record_function range around fetching a batch from ``data``."""

BACKWARD_NODE = "autograd::engine::evaluate_function: "
_DATA_PREFIXES = (DATA_LABEL, "enumerate(DataLoader)")
_OPTIMIZER_PREFIXES = ("Optimizer.step#", "Optimizer.zero_grad#")


class ModuleRanges(Protocol):
    """The module ranges of a capture (a :class:`~nbviz.probes.profile.ModuleLabels`)."""

    labels: dict[str, str]  # range label -> module name
    types: dict[str, str]  # module name -> type name, in named_modules() order
    shapes: dict[str, list[list[list[int]]]]  # module name -> input shape signatures


def _range(e: Any) -> tuple[float, float]:
    return float(e.time_range.start), float(e.time_range.end)


def _ancestors(e: Any) -> Iterator[Any]:
    p = e.cpu_parent
    while p is not None:
        yield p
        p = p.cpu_parent


def _merge(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _covers(merged: list[tuple[float, float]], starts: list[float], x: float) -> bool:
    i = bisect.bisect_right(starts, x) - 1
    return i >= 0 and merged[i][0] <= x < merged[i][1]


def _breakdown(
    step: tuple[float, float], categories: dict[str, list[tuple[float, float]]]
) -> dict[str, float]:
    """Microseconds of ``step`` in each category, each instant in the first that covers it."""
    s, e = step
    merged = {}
    points = {s, e}
    for cat, ivs in categories.items():
        clipped = [(max(a, s), min(b, e)) for a, b in ivs if b > s and a < e]
        merged[cat] = _merge(clipped)
        for a, b in merged[cat]:
            points.update((a, b))
    starts = {cat: [a for a, _ in m] for cat, m in merged.items()}
    out = dict.fromkeys([*categories, "other"], 0.0)
    ordered = sorted(points)
    for a, b in zip(ordered, ordered[1:]):
        mid = (a + b) / 2
        for cat in categories:
            if _covers(merged[cat], starts[cat], mid):
                out[cat] += b - a
                break
        else:
            out["other"] += b - a
    return out


def _device_self_us(e: Any) -> float:
    return float(getattr(e, "self_device_time_total", 0.0) or 0.0)


def analyse(events: list[Any], labels: ModuleRanges, n_active: int) -> dict[str, Any]:
    """Step breakdown and per-module times from the profiler's events (times in ms per step)."""
    label_of = labels.labels
    step_events = sorted(
        (e for e in events if e.name.startswith("ProfilerStep")), key=lambda e: e.time_range.start
    )
    notes: list[str] = []
    if not step_events:
        raise RuntimeError("profile: the trace has no ProfilerStep ranges to measure steps by")
    n = len(step_events)
    if n != n_active:
        notes.append(f"the trace holds {n} profiled steps (asked for {n_active})")

    fwd_total: dict[str, float] = defaultdict(float)
    fwd_child: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    bwd_self: dict[str, float] = defaultdict(float)
    device_us: dict[str, float] = defaultdict(float)
    mem: dict[str, float] = defaultdict(float)
    dev_mem: dict[str, float] = defaultdict(float)
    seq_owner: dict[tuple[int, int], tuple[float, str]] = {}
    cats: dict[str, list[tuple[float, float]]] = {
        "data": [],
        "backward": [],
        "forward": [],
        "optimizer": [],
    }
    bwd_nodes: list[Any] = []
    unattributed_bwd = 0.0

    def module_range(e: Any) -> str | None:
        return label_of.get(e.name)

    def owner(e: Any) -> str | None:
        for p in _ancestors(e):
            m = module_range(p)
            if m is not None:
                return m
        return None

    def node_of(e: Any) -> Any:
        if e.name.startswith(BACKWARD_NODE):
            return e
        for p in _ancestors(e):
            if p.name.startswith(BACKWARD_NODE):
                return p
        return None

    # forward ranges and the forward owner of each sequence number
    for e in events:
        name = e.name
        m = module_range(e)
        if m is not None:
            outer = [label_of.get(p.name) for p in _ancestors(e)]
            outer = [o for o in outer if o is not None]
            if m in outer:  # a module inside its own forward (recursion): count the outer call
                continue
            a, b = _range(e)
            fwd_total[m] += b - a
            calls[m] += 1
            if outer:
                fwd_child[outer[0]] += b - a
            cats["forward"].append((a, b))
            continue
        if name.startswith(_DATA_PREFIXES):
            cats["data"].append(_range(e))
        elif name.startswith(_OPTIMIZER_PREFIXES):
            cats["optimizer"].append(_range(e))
        elif name.startswith(BACKWARD_NODE):
            if not any(p.name.startswith(BACKWARD_NODE) for p in _ancestors(e)):
                bwd_nodes.append(e)
                cats["backward"].append(_range(e))
        elif e.sequence_nr is not None and e.sequence_nr >= 0 and node_of(e) is None:
            m2 = owner(e)
            if m2 is not None:
                key = (int(e.thread), int(e.sequence_nr))
                start = float(e.time_range.start)
                known = seq_owner.get(key)
                if known is None or start >= known[0]:
                    seq_owner[key] = (start, m2)

    # backward nodes -> the module whose forward created them
    bwd_spans: list[tuple[int, float, float, str, str]] = []
    for e in bwd_nodes:
        a, b = _range(e)
        fwd_thread = e.fwd_thread if e.fwd_thread is not None else e.thread
        known = seq_owner.get((int(fwd_thread), int(e.sequence_nr)))
        if known is None:
            unattributed_bwd += b - a
            continue
        bwd_self[known[1]] += b - a
        bwd_spans.append((int(e.thread), a, b, known[1], e.name[len(BACKWARD_NODE) :]))
    if unattributed_bwd > 0:
        notes.append(
            f"{unattributed_bwd / 1000 / n:.3g} ms of backward per step is outside the model's "
            "modules (the loss, gradient accumulation into parameters)"
        )

    # device time and memory of each operator, to its forward module or backward node's module
    node_owner = {
        id(e): seq_owner.get((int(e.fwd_thread or e.thread), int(e.sequence_nr))) for e in bwd_nodes
    }
    for e in events:
        if module_range(e) is not None or e.name.startswith("ProfilerStep"):
            continue
        dev = _device_self_us(e)
        cpu_mem = float(getattr(e, "self_cpu_memory_usage", 0) or 0)
        gpu_mem = float(getattr(e, "self_device_memory_usage", 0) or 0)
        if not (dev or cpu_mem or gpu_mem):
            continue
        node = node_of(e)
        if node is not None:
            known = node_owner.get(id(node))
            if known is not None:
                device_us[known[1]] += dev
            continue
        m = owner(e)
        if m is not None:
            device_us[m] += dev
            mem[m] += cpu_mem
            dev_mem[m] += gpu_mem

    # the step breakdown
    per_step = [_breakdown(_range(s), cats) for s in step_events]
    step_us = [b - a for a, b in map(_range, step_events)]
    step_ms = sum(step_us) / n / 1000
    breakdown = {k: sum(p[k] for p in per_step) / n / 1000 for k in per_step[0]}

    # the module tree: totals of the backward over subtrees, per step
    names = list(labels.types)
    parent = {name: _parent(name, labels.types) for name in names}
    children: dict[str, list[str]] = defaultdict(list)
    for name in names:
        if name:
            children[parent[name]].append(name)

    def subtree(name: str, table: dict[str, float]) -> float:
        return table[name] + sum(subtree(c, table) for c in children.get(name, ()))

    modules = []
    for name in names:
        f_total = fwd_total[name] / n / 1000
        f_self = max(fwd_total[name] - fwd_child[name], 0.0) / n / 1000
        b_self = bwd_self[name] / n / 1000
        b_total = subtree(name, bwd_self) / n / 1000
        total = f_total + b_total
        modules.append(
            {
                "name": name,
                "type": labels.types[name],
                "parent": parent[name],
                "depth": 0 if not name else name.count(".") + 1,
                "calls": calls[name] / n,
                "self_ms": f_self + b_self,
                "total_ms": total,
                "pct": 100 * total / step_ms if step_ms > 0 else 0.0,
                "forward_self_ms": f_self,
                "forward_ms": f_total,
                "backward_self_ms": b_self,
                "backward_ms": b_total,
                "device_ms": subtree(name, device_us) / n / 1000,
                "memory_bytes": subtree(name, mem) / n,
                "device_memory_bytes": subtree(name, dev_mem) / n,
                "input_shapes": labels.shapes.get(name, []),
            }
        )
    return {
        "step_start_us": _range(step_events[0])[0],
        "step_ms": step_ms,
        "step_ms_each": [u / 1000 for u in step_us],
        "breakdown": breakdown,
        "breakdown_each": [{k: v / 1000 for k, v in p.items()} for p in per_step],
        "backward_outside_ms": unattributed_bwd / n / 1000,
        "modules": modules,
        "notes": notes,
        "_bwd_spans": bwd_spans,
    }


def _parent(name: str, known: dict[str, str]) -> str:
    """The nearest named ancestor of a qualified module name ("" for the root)."""
    while "." in name:
        name = name.rsplit(".", 1)[0]
        if name in known:
            return name
    return ""


def operator_table(averages: Any, labels: ModuleRanges, step_ms: float, top: int) -> list[dict]:
    """The operator table from ``key_averages()`` (the module ranges left out), per step."""
    own = set(labels.labels)
    n_steps = None
    rows = []
    for avg in averages:
        name = avg.key
        if name in own or name.startswith(("ProfilerStep", DATA_LABEL)):
            continue
        rows.append(avg)
    if not rows:
        return []
    # per step: divide by the number of ProfilerStep ranges
    for avg in averages:
        if avg.key.startswith("ProfilerStep"):
            n_steps = avg.count
    n = max(int(n_steps or 1), 1)
    out = []
    for avg in rows:
        self_ms = float(avg.self_cpu_time_total) / n / 1000
        out.append(
            {
                "name": avg.key,
                "calls": avg.count / n,
                "self_ms": self_ms,
                "total_ms": float(avg.cpu_time_total) / n / 1000,
                "pct": 100 * self_ms / step_ms if step_ms > 0 else 0.0,
                "self_device_ms": float(getattr(avg, "self_device_time_total", 0) or 0) / n / 1000,
                "device_ms": float(getattr(avg, "device_time_total", 0) or 0) / n / 1000,
                "memory_bytes": float(getattr(avg, "self_cpu_memory_usage", 0) or 0) / n,
                "device_memory_bytes": float(getattr(avg, "self_device_memory_usage", 0) or 0) / n,
            }
        )
    device = any(r["self_device_ms"] for r in out)
    key = "self_device_ms" if device else "self_ms"
    out.sort(key=lambda r: (r[key], r["self_ms"]), reverse=True)
    return out[: max(int(top), 0)]


def annotate_trace(
    text: str, spans: list[tuple[int, float, float, str, str]], step_start: float
) -> str:
    """Add a ``nbviz backward by module`` track: each backward node labelled with its module."""
    trace = json.loads(text)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    steps = [
        ev
        for ev in events
        if ev.get("ph") == "X" and str(ev.get("name")).startswith("ProfilerStep")
    ]
    if not steps or not spans:
        return text
    # the trace's clock is absolute; the events' is relative to the first step's start
    first = min(steps, key=lambda ev: ev["ts"])
    offset = float(first["ts"]) - step_start
    pid = first.get("pid", 0)
    tid_of: dict[int, str] = {}
    for thread, a, b, module, node in spans:
        tid = tid_of.setdefault(thread, f"nbviz backward by module (thread {thread})")
        events.append(
            {
                "ph": "X",
                "cat": "nbviz_module",
                "name": f"nbviz.backward {module or '(model)'}",
                "pid": pid,
                "tid": tid,
                "ts": a + offset,
                "dur": b - a,
                "args": {"module": module, "node": node},
            }
        )
    for tid in tid_of.values():
        events.append(
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": tid}}
        )
    return json.dumps(trace)
