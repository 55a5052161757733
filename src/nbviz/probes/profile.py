"""Profile a training step with torch.profiler, attributed to the model's own modules.

:func:`profile_step` runs ``step_fn`` (one training step) under
``torch.profiler`` with its wait/warmup/active schedule, on the CPU always and
on CUDA when it is available. While it runs, forward pre/post hooks on every
module of the model open and close a ``record_function`` range named after the
module (``nbviz.forward <name>``), so the trace and the tables speak of the
model's own modules; the model's code is not changed and every hook is removed
afterwards, also when ``step_fn`` raises.

Backward time is attributed without backward hooks, from the profiler's own
autograd nodes, and the events become the profile's tables in
:mod:`nbviz.probes.profile_events`. The profiler's own overhead is measured
by timing ``baseline`` more steps without it.

``step_fn`` runs ``wait + warmup + steps + baseline`` times: it trains the
model for that many steps.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch import nn

from nbviz.analysis.profile import PAYLOAD_VERSION, Profile
from nbviz.probes.native_stderr import profiler_lines_dropped
from nbviz.probes.profile_events import DATA_LABEL, analyse, annotate_trace, operator_table

__all__ = ["FORWARD_PREFIX", "ModuleLabels", "profile_step"]

FORWARD_PREFIX = "nbviz.forward "
"""Prefix of the record_function range opened around each module's forward."""

_MAX_SHAPE_SIGNATURES = 4
_MAX_TRACE_BYTES = 64 * 1024 * 1024


# --------------------------------------------------------------------------- hooks


def _shapes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[list[int]]:
    """Shapes of the tensors among a call's arguments (metadata only: no sync)."""
    out = []
    for value in itertools.chain(args, kwargs.values()):
        if isinstance(value, torch.Tensor):
            out.append(list(value.shape))
        elif isinstance(value, (list, tuple)):
            out.extend(list(v.shape) for v in value if isinstance(v, torch.Tensor))
    return out


class ModuleLabels:
    """Forward pre/post hooks that wrap each module's forward in a ``record_function`` range.

    Hooks are global state on someone else's model: every handle is kept and
    :meth:`close` removes them all (idempotent), closing any range a failed
    forward left open. Also a context manager. The hooks record the tensor
    shapes a module is called with (the first few distinct signatures).
    """

    def __init__(self, model: nn.Module) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"profile: model must be a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        self.names: dict[int, str] = {}
        self.types: dict[str, str] = {}
        self.labels: dict[str, str] = {}  # range label -> module name
        self.shapes: dict[str, list[list[list[int]]]] = defaultdict(list)
        self._open: list[tuple[int, Any]] = []
        self._handles: list[Any] = []
        for name, module in model.named_modules():
            label = FORWARD_PREFIX + (name or f"({type(module).__name__})")
            while label in self.labels:  # a child named like the root's type
                label += "'"
            self.names[id(module)] = name
            self.types[name] = type(module).__name__
            self.labels[label] = name
            self._handles.append(
                module.register_forward_pre_hook(
                    self._make_pre(label, name), with_kwargs=True, prepend=True
                )
            )
            self._handles.append(
                module.register_forward_hook(self._post, with_kwargs=True, always_call=True)
            )

    def _make_pre(self, label: str, name: str) -> Callable[..., None]:
        shapes = self.shapes[name]

        def pre(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if len(shapes) < _MAX_SHAPE_SIGNATURES:
                signature = _shapes(args, kwargs)
                if signature not in shapes:
                    shapes.append(signature)
            rf = torch.autograd.profiler.record_function(label)
            rf.__enter__()
            self._open.append((id(module), rf))

        return pre

    def _post(self, module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        key = id(module)
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i][0] == key:
                # ranges above it belong to children whose forward raised
                while len(self._open) > i:
                    self._open.pop()[1].__exit__(None, None, None)
                return

    def close(self) -> None:
        """Remove every hook and close ranges left open (idempotent)."""
        while self._open:
            self._open.pop()[1].__exit__(None, None, None)
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def __enter__(self) -> ModuleLabels:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- running


def _batches(data: Any) -> Iterator[Any] | None:
    """Batches from ``data``: None, a callable returning a batch, or an iterable (cycled)."""
    if data is None:
        return None
    if callable(data) and not hasattr(data, "__iter__"):
        return iter(data, object())  # never exhausted: the sentinel is never returned

    if not isinstance(data, Iterable):
        raise TypeError(
            f"profile: data must be a callable returning a batch or an iterable of batches, "
            f"got {type(data).__name__}"
        )

    def cycle() -> Iterator[Any]:
        while True:
            empty = True
            for batch in data:
                empty = False
                yield batch
            if empty:
                raise ValueError("profile: data yielded no batches")

    return cycle()


def _run_one(
    step_fn: Callable[..., Any], batches: Iterator[Any] | None, sync: bool, label: bool
) -> float:
    """Run one step (fetching its batch first) and return its wall time in seconds."""
    t0 = time.perf_counter()
    if batches is not None:
        if label:
            with torch.autograd.profiler.record_function(DATA_LABEL):
                batch = next(batches)
        else:
            batch = next(batches)
        step_fn(batch)
    else:
        step_fn()
    if sync:
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def profile_step(
    model: nn.Module,
    step_fn: Callable[..., Any],
    *,
    steps: int = 5,
    warmup: int = 2,
    wait: int = 1,
    data: Any = None,
    baseline: int | None = None,
    record_shapes: bool = True,
    profile_memory: bool = True,
    keep_trace: bool = True,
    top_operators: int = 50,
    cuda: bool | None = None,
    name: str = "profile",
    step: int = 0,
) -> Profile:
    """Profile ``steps`` training steps of ``model`` and attribute their time to its modules.

    Parameters
    ----------
    model
        The model whose modules the time is attributed to (hooks are added and removed).
    step_fn
        One training step: ``step_fn()``, or ``step_fn(batch)`` when ``data`` is given.
    steps, warmup, wait
        The profiler's schedule: ``wait`` steps run unprofiled, ``warmup`` steps run
        under the profiler with results discarded, then ``steps`` steps are recorded.
    data
        Optional batches: a callable returning one, or an iterable (a DataLoader),
        cycled. Fetching a batch counts as data loading in the breakdown.
    baseline
        Steps timed without the profiler to measure its overhead (default: ``steps``;
        0 skips the measurement).
    record_shapes, profile_memory
        Passed to ``torch.profiler.profile``.
    keep_trace
        Keep the Chrome trace text in the result (``export_chrome_trace``).
    top_operators
        How many operators the operator table keeps (by self time).
    cuda
        Profile CUDA activity too; default: when CUDA is available.
    name, step
        What the result is called and the training step it belongs to.
    """
    if not callable(step_fn):
        raise TypeError(f"profile: step_fn must be callable, got {type(step_fn).__name__}")
    for what, value, least in (("steps", steps, 1), ("warmup", warmup, 0), ("wait", wait, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"profile: {what} must be an integer >= {least}, got {value!r}")
    baseline = steps if baseline is None else int(baseline)
    if baseline < 0:
        raise ValueError(f"profile: baseline must be >= 0, got {baseline}")
    use_cuda = torch.cuda.is_available() if cuda is None else bool(cuda)
    if use_cuda and not torch.cuda.is_available():
        raise RuntimeError("profile: cuda=True but torch.cuda.is_available() is False")
    activities = [torch.profiler.ProfilerActivity.CPU]
    if use_cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    batches = _batches(data)
    captured: dict[str, Any] = {}

    def ready(prof: torch.profiler.profile) -> None:
        captured["events"] = prof.events()
        captured["averages"] = prof.key_averages()
        if keep_trace:
            fd, path = tempfile.mkstemp(suffix=".json", prefix="nbviz-trace-")
            os.close(fd)
            try:
                prof.export_chrome_trace(path)
                with open(path, encoding="utf-8") as f:
                    captured["trace"] = f.read()
            finally:
                os.unlink(path)

    wall: list[float] = []
    labels = ModuleLabels(model)
    try:
        # the profiler's own native log lines would show as a red stderr box in a notebook
        with (
            profiler_lines_dropped(),
            torch.profiler.profile(
                activities=activities,
                schedule=torch.profiler.schedule(wait=wait, warmup=warmup, active=steps, repeat=1),
                on_trace_ready=ready,
                record_shapes=record_shapes,
                profile_memory=profile_memory,
            ) as prof,
        ):
            for _ in range(wait + warmup + steps):
                wall.append(_run_one(step_fn, batches, use_cuda, label=True))
                prof.step()
    finally:
        labels.close()
    if "events" not in captured:
        raise RuntimeError("profile: torch.profiler delivered no trace for the active steps")
    plain = [_run_one(step_fn, batches, use_cuda, label=False) for _ in range(baseline)]

    events = list(captured["events"])
    analysis = analyse(events, labels, steps)
    spans = analysis.pop("_bwd_spans")
    step_start = analysis.pop("step_start_us")
    payload: dict[str, Any] = {
        "version": PAYLOAD_VERSION,
        "name": str(name),
        "step": int(step),
        "created": time.time(),
        "device": f"cuda:{torch.cuda.current_device()}" if use_cuda else "cpu",
        "torch_version": torch.__version__,
        "model": type(model).__name__,
        "schedule": {"wait": wait, "warmup": warmup, "active": steps},
        "wall_ms": [1000 * w for w in wall[wait + warmup :]],
        **analysis,
        "operators": operator_table(
            captured["averages"], labels, analysis["step_ms"], top_operators
        ),
        "overhead": None,
        "has_trace": False,
    }
    if use_cuda:
        payload["notes"].append(
            "on CUDA the breakdown is host time: 'other' includes waiting for the device "
            "at the end of each step; the device column gives kernel time per module"
        )
    unprofiled = 1000 * statistics.median(plain) if plain else 0.0
    if unprofiled > 0:
        profiled = statistics.median(payload["wall_ms"])
        payload["overhead"] = {
            "profiled_ms": profiled,
            "baseline_ms": unprofiled,
            "ratio": profiled / unprofiled,
            "steps": min(len(plain), len(payload["wall_ms"])),
        }
    trace = None
    if keep_trace:
        trace = annotate_trace(captured["trace"], spans, step_start)
        if len(trace) > _MAX_TRACE_BYTES:
            payload["notes"].append(
                f"the Chrome trace ({len(trace) / 2**20:.0f} MiB) was over "
                f"{_MAX_TRACE_BYTES // 2**20} MiB and was not kept; profile fewer steps"
            )
            trace = None
    payload["has_trace"] = trace is not None
    return Profile(json.loads(json.dumps(payload, default=float)), trace)
