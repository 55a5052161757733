"""Probe: forward/backward hooks that record a model's training without changing it.

Hooks are global state on someone else's model. A probe remembers every handle it
adds and removes them all in ``close()`` (idempotent; also on leaving a ``with``
block), keeps no reference to the autograd graph, and computes only on detached
tensors, so outputs and gradients are bitwise what they would be without it.

Steps
-----
A *training step* is what happens between two training forwards of the watched
model that are separated by a backward (or, with ``optimizer=``, between two
``optimizer.step()`` calls: use that for gradient accumulation). Forwards under
``torch.no_grad()``/``torch.inference_mode()`` or with the model in ``eval()``
mode are not training steps and are ignored.

Each step is tagged with the number the loop passes to ``run.log(step, ...)`` for
it: the first ``run.log`` after the step's forward names it, and the next step is
expected to be that number plus one. A loop that never calls ``run.log`` gets
steps 0, 1, 2, ... With ``optimizer=``, a log that comes after the model's
next forward but before that step's own update (a GAN's discriminator runs again
in the generator's pass) names the step that ended, when its number is that
step's.
A step is *captured* when its number is a multiple of
``every``; histograms are taken every ``hist_every`` steps (a multiple of
``every``). Whatever the period, the non-finite sentinel runs on every step.

Several ranks
-------------
Under ``torch.distributed`` with more than one rank (DDP launched by
``torchrun``), call ``run.watch(model)`` on every rank, with the same options:
the statistics of each capture step are combined over the ranks (see
:mod:`nbviz.probes.distributed`), rank 0 writes them, and the sentinel names
the rank where a non-finite value first appeared. Wrapper prefixes are
stripped: a ``DistributedDataParallel`` model and its ``.module`` record the
same names (``fc1``, not ``module.fc1``). ``rank_shards=True`` also writes
each rank's own statistics to ``<run>/ranks/<rank>/``, a run of its own.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nbviz.probes import distributed as dd
from nbviz.probes import finite
from nbviz.probes import stats as st
from nbviz.probes.measure import StepMeasure
from nbviz.probes.outputs import describe, find_tensor, path_text
from nbviz.probes.records import Records, Sink
from nbviz.probes.select import (
    DEFAULT_MAX_LAYERS,
    LayerPattern,
    select_modules,
    strip_wrapper_prefix,
    unit_dim,
)
from nbviz.probes.sentinel import Sentinel

#: Units beyond this count are not recorded one by one (e.g. a vocabulary's logits).
MAX_UNITS = 8192


SIGNALS = ("activations", "gradients", "weights")
_SIGNAL_ALIASES = {
    "activation": "activations",
    "activations": "activations",
    "gradient": "gradients",
    "gradients": "gradients",
    "grad": "gradients",
    "grads": "gradients",
    "weight": "weights",
    "weights": "weights",
}
#: Capture period by default (a divisor of 100, so captures fall on round steps): a
#: capture costs the reference MLP about 7 ms, most of a step, on 2 CPU cores, so one
#: in 50 keeps it near 1.5% beside the every-step NaN sentinel's 3.5%
#: (benchmarks/probe_overhead.py); a NaN is still reported at the exact step it appeared.
DEFAULT_EVERY = 50
DEFAULT_BINS = 64

_WATCHED: weakref.WeakKeyDictionary[nn.Module, Probe] = weakref.WeakKeyDictionary()


def _is_compiled(model: nn.Module) -> bool:
    return type(model).__name__ == "OptimizedModule" and hasattr(model, "_orig_mod")


def _normalise_signals(signals: Sequence[str] | str | None) -> tuple[str, ...]:
    if signals is None:
        return SIGNALS
    if isinstance(signals, str):
        signals = [signals]
    out = []
    for s in signals:
        canon = _SIGNAL_ALIASES.get(str(s).lower())
        if canon is None:
            raise ValueError(f"signals: unknown signal {s!r}; choose from {', '.join(SIGNALS)}")
        if canon not in out:
            out.append(canon)
    return tuple(out)


class Probe(StepMeasure, Records):
    """Records activations, gradients and weights of ``model`` into a run.

    Create it with ``run.watch(model, ...)``; see the module docstring for how steps
    are counted. Parameters: ``every`` capture period (statistics, per-unit maps;
    default 50); ``hist_every`` histogram period (default ``every``); ``bins``
    histogram bins, fixed per layer at its first capture; ``layers`` glob patterns / types /
    predicates selecting modules (default: all leaf modules but pass-throughs);
    ``signals`` any of ``"activations"``, ``"gradients"``, ``"weights"``;
    ``optimizer`` marks step boundaries at ``optimizer.step()``; ``name`` prefixes
    every layer and parameter name (``name="D"``: ``D.0``, ``D.0.weight``), which
    tells apart two models watched in one run (a GAN's generator and discriminator);
    ``rank_shards`` (several ranks only) also writes each rank's own statistics
    to ``<run>/ranks/<rank>/``.
    """

    def __init__(
        self,
        sink: Sink,
        model: nn.Module,
        *,
        every: int = DEFAULT_EVERY,
        hist_every: int | None = None,
        bins: int = DEFAULT_BINS,
        layers: LayerPattern | Sequence[LayerPattern] | None = None,
        signals: Sequence[str] | str | None = None,
        max_layers: int | None = DEFAULT_MAX_LAYERS,
        optimizer: torch.optim.Optimizer | None = None,
        first_step: int = 0,
        on_close: Callable[[Probe], None] | None = None,
        replace: bool = False,
        name: str | None = None,
        rank_shards: bool = False,
        dist: dd.RankContext | None = None,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"watch: expected a torch.nn.Module, got {type(model).__name__}")
        for option, value in (("every", every), ("bins", bins)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"watch: {option} must be a positive integer, got {value!r}")
        hist_every = every if hist_every is None else hist_every
        if not isinstance(hist_every, int) or hist_every < 1 or hist_every % every:
            raise ValueError(
                f"watch: hist_every must be a positive multiple of every={every}, "
                f"got {hist_every!r}"
            )
        if name is not None and (
            not isinstance(name, str) or not name.strip() or name != name.strip(". \t\n")
        ):
            raise ValueError(
                f"watch: name must be a non-empty string without surrounding dots or spaces, "
                f"such as 'D', got {name!r}"
            )
        params = list(model.named_parameters())
        lazy = [n for n, p in params if isinstance(p, nn.parameter.UninitializedParameter)]
        if lazy:
            more = f" and {len(lazy) - 3} more" if len(lazy) > 3 else ""
            which = "parameters" if len(lazy) > 1 else "parameter"
            raise ValueError(
                f"watch: {which} {', '.join(map(repr, lazy[:3]))}{more} of the model "
                f"({type(model).__name__}) not initialised yet: lazy modules "
                "(nn.LazyLinear, ...) take their shapes from the first forward pass - run one "
                "batch through the model (model(example_batch)) before run.watch(model)"
            )
        empty = [n for n, p in params if p.numel() == 0]
        params = [(n, p) for n, p in params if p.numel()]
        if not params:
            raise ValueError(
                f"watch: the model ({type(model).__name__}) has no parameters"
                + (f" with any elements ({', '.join(map(repr, empty))} are empty)" if empty else "")
                + "; nbviz watches trainable models - pass the module that holds the weights"
            )
        previous = _WATCHED.get(model)
        if previous is not None and not previous.closed:
            if not replace:
                raise RuntimeError(
                    f"watch: this {type(model).__name__} is already watched by {previous!r}; "
                    "call probe.close() first, or pass replace=True"
                )
            previous.close()

        self._sink = sink
        self._model_ref = weakref.ref(model)
        self.every, self.hist_every, self.bins = every, hist_every, bins
        self.signals = _normalise_signals(signals)
        self._watch_weights = "weights" in self.signals
        self._watch_acts = "activations" in self.signals
        self._watch_grads = "gradients" in self.signals
        self.name = name
        self._prefix = prefix = f"{name}." if name else ""
        self.compiled = _is_compiled(model)
        self.notes: list[str] = []
        self._module_notes: dict[str, str] = {}
        self._on_close = on_close
        self.closed = False
        self._handles: list[Any] = []
        self._summary_written = False

        # --- what is watched -------------------------------------------------
        root = model
        if self.compiled:
            self.notes.append(
                "model is torch.compile'd: hooks inside the compiled graph are not run, so "
                "activations and output gradients are not recorded; weights and parameter "
                "gradients are (read after backward)"
            )
            self.modules: list[tuple[str, nn.Module]] = []
        else:
            selection = select_modules(model, layers, max_layers)
            self.modules = [(prefix + n, m) for n, m in selection.modules]
            self.notes.extend(selection.notes)
        if empty:
            self.notes.append(f"parameters with no elements not recorded: {', '.join(empty)}")
        seen: set[int] = set()
        self.params: list[tuple[str, nn.Parameter]] = []
        for pname, p in params:
            if id(p) in seen:
                continue
            seen.add(id(p))
            self.params.append((prefix + strip_wrapper_prefix(pname), p))
        self.device = self.params[0][1].device
        if rank_shards and dist is None:
            raise ValueError(
                "watch: rank_shards=True needs torch.distributed initialised with more than "
                "one rank (launch with torchrun); leave it out in a single process"
            )
        self._dist = dist
        self._writes = dist is None or dist.writes  # whether this process's records are kept
        self._grad_scale: float | None = None
        self._shard: Any = None
        if dist is not None:
            # every rank must capture the same steps: agree on the start and the setup
            first_step = dd.handshake(
                dist,
                first_step,
                {
                    "every": every,
                    "hist_every": hist_every,
                    "bins": bins,
                    "modules": dd.structure_code(n for n, _ in self.modules),
                    "parameters": dd.structure_code((n, tuple(p.shape)) for n, p in self.params),
                    "signals": dd.structure_code(self.signals),
                },
            )
            self._grad_scale = 1.0 / dist.world_size
            self._module_names = {n for n, _ in self.modules}
            seen_b: set[int] = set()
            self._buffers = []
            for bname, b in model.named_buffers():
                if b.is_floating_point() and id(b) not in seen_b:
                    seen_b.add(id(b))
                    self._buffers.append((prefix + strip_wrapper_prefix(bname), b))
            self._divergence: dict[str, dict[str, Any]] = {}
            if rank_shards:
                from nbviz.store import Writer

                self._shard = Writer(Path(sink.run_dir) / "ranks" / str(dist.rank))

        self._setup_hooks(model)
        self._setup_measure()
        self._setup_clock(first_step, optimizer)
        self._attach(root, optimizer)
        _WATCHED[model] = self
        self._write_config()
        if dist is not None:
            self._write_distributed(model, rank_shards)

    # ------------------------------------------------------------------ public
    @property
    def model(self) -> nn.Module | None:
        return self._model_ref()

    @property
    def step(self) -> int:
        """The step number the next (or current) training step will be recorded under."""
        return self._tag if self._open else self._next_step

    def close(self) -> None:
        """Record what is pending, remove every hook, and forget the model. Idempotent."""
        if self.closed:
            return
        try:
            self._finish_step()
            self._report_nonfinite(force=True)
            self._write_summary(force=True)
        finally:
            self._detach()
            self.closed = True
            model = self._model_ref()
            if model is not None and _WATCHED.get(model) is self:
                del _WATCHED[model]
            self._init = self._prev = []  # free the weight copies
            if self._shard is not None:
                self._shard.close()
            if self._on_close is not None:
                self._on_close(self)

    def flush(self) -> None:
        """Hand everything recorded so far to the writer (ends nothing in progress)."""
        if self.closed:
            return
        if self._dist is not None:
            # ranks may flush at different times: nothing here may communicate
            self._sentinel.commit(self._counter)
            return
        if self._open and (
            self._optimizer_stepped if self._optimizer is not None else self._backward_done
        ):
            self._finish_step()  # complete: nothing more can join it
        self._sentinel.commit(self._counter)
        self._report_nonfinite(force=True)

    def __enter__(self) -> Probe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"step {self.step}"
        return (
            f"<nbviz.Probe {len(self.modules)} modules, {len(self.params)} parameters, "
            f"every={self.every}, {state}>"
        )

    _handles: list[Any]
    _sentinel: Sentinel
    _act_slots: dict[str, int]  # module name -> sentinel slot
    _sent_names: list[tuple[str, str]]  # sentinel slot -> (layer, signal)
    _keeps_finite: dict[int, str]  # slot -> kind, for modules that keep finite values finite
    _grad_plan: list[tuple[int, nn.Parameter, int | None, nn.Parameter | None]]
    _checked: tuple[Any, int, torch.Tensor] | None  # the last output checked
    _shapes: dict[str, list[int]]  # module name -> output shape at its first call
    _exec_order: dict[str, int]  # module name -> order of its first call
    _unit_dims: dict[str, int | None]

    def _setup_hooks(self, model: nn.Module) -> None:
        """The sentinel and its slots: the watched modules' outputs, then the parameters."""
        # slot tables: (layer, signal) for records, sentinel index space
        self._act_slots = {n: i for i, (n, _) in enumerate(self.modules)}
        n_mod, n_par = len(self.modules), len(self.params)
        self._sentinel = Sentinel(n_mod + n_par, self.device)
        self._sent_names = [(n, "activation") for n, _ in self.modules] + [
            (n, "gradient") for n, _ in self.params
        ]
        # checks the sentinel can take from another one (see nbviz.probes.finite)
        self._keeps_finite = {
            self._act_slots[n]: kind
            for n, m in self.modules
            if (kind := finite.keeps_finite(m)) is not None
        }
        # per parameter: its sentinel slot, and its layer's bias (slot, parameter)
        # where the bias gradient tells whether the weight gradient is finite
        via = finite.weight_from_bias(model, self.params)
        self._grad_plan = [
            (
                n_mod + j,
                p,
                None if j not in via else n_mod + via[j],
                None if j not in via else self.params[via[j]][1],
            )
            for j, (_, p) in enumerate(self.params)
        ]
        self._checked = None
        self._shapes = {}
        self._exec_order = {}
        self._unit_dims = {}

    def _attach(self, root: nn.Module, optimizer: torch.optim.Optimizer | None) -> None:
        """Hooks on the root (the step clock's), each watched module and the optimizer."""
        self._handles.append(root.register_forward_pre_hook(_Hook(self._on_root_pre)))
        self._handles.append(root.register_forward_hook(_Hook(self._on_root_post)))
        for name, module in self.modules:
            slot = self._act_slots[name]
            kind = self._keeps_finite.get(slot)
            if kind is None:
                hook = _Hook(self._on_output, name, slot)
            else:
                hook = _Hook(self._on_kept_output, name, slot, kind)
            self._handles.append(module.register_forward_hook(hook))
        if optimizer is not None:
            self._handles.append(optimizer.register_step_post_hook(_Hook(self._on_optimizer_step)))

    def _detach(self) -> None:
        """Remove every hook this probe added."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _on_output(self, name: str, slot: int, module: nn.Module, args: Any, output: Any) -> None:
        if not self._active:
            return
        if type(output) is torch.Tensor and name in self._shapes:
            # the common case: a plain tensor from a module already seen
            live = output if output.is_floating_point() else None
        else:
            live = self._first_output(name, module, output)
        if live is None or not live.numel():
            return  # an empty output (an empty batch, a size-0 split) has nothing to tell
        capture = self._capture
        if capture is None or not self._watch_acts:
            # the sentinel's value, noted as the last check (see _on_kept_output)
            value = finite.checksum(live)
            self._checked = (weakref.ref(live), live._version, value)
            self._sentinel.add(slot, value)
            if capture is None:
                return
        else:
            x = live.detach()
            ud = self._unit_dims.get(name)
            if ud is not None and (x.dim() <= ud or x.shape[ud] != self._shapes[name][ud]):
                ud = None  # the unit count changed: statistics only
            entry = capture.add_clean(
                (name, "activation"), x, ud, self._hist_for(name, "activation")
            )
            self._sentinel.add(slot, entry.witness)  # the statistics tell finiteness too
        if self._watch_grads and live.requires_grad:
            live.register_hook(partial(self._on_output_grad, name))

    def _on_kept_output(
        self, name: str, slot: int, kind: str, module: nn.Module, args: Any, output: Any
    ) -> None:
        """``_on_output`` of a module that keeps finite values finite (``kind``: see
        :func:`nbviz.probes.finite.keeps_finite`): outside captures, when its input is
        the output checked last, unchanged since (an in-place module bumps the version
        once itself), its slot takes that check. Kept short: it runs between the
        model's own ops on every step.
        """
        last = self._checked
        if last is not None and self._capture is None and self._active and args:
            x = args[0]
            if (
                x is last[0]()
                and x is not None
                and type(output) is torch.Tensor
                and name in self._shapes
                and x._version == last[1] + (output is x)
                and (kind == "any" or output.dtype in finite.WIDE)
            ):
                self._checked = (weakref.ref(output), output._version, last[2])
                self._sentinel.add(slot, last[2])
                return
        self._on_output(name, slot, module, args, output)

    def _first_output(self, name: str, module: nn.Module, output: Any) -> torch.Tensor | None:
        """The tensor to watch in ``output``; on a module's first call, notes about it."""
        path, x = find_tensor(output)
        if name not in self._shapes:
            self._exec_order.setdefault(name, len(self._exec_order))
            if x is None:
                self._shapes[name] = None  # type: ignore[assignment]
                self._module_notes[name] = f"skipped: output is {describe(output)}"
                return None
            self._shapes[name] = list(x.shape)
            ud = unit_dim(module, x.dim())
            if ud is not None and x.shape[ud] > MAX_UNITS:
                self._module_notes[name] = f"{x.shape[ud]} units: per-unit maps not recorded"
                ud = None
            self._unit_dims[name] = ud
            if path:
                self._module_notes[name] = f"recorded {path_text(path)} of {describe(output)}"
        return x

    def _on_output_grad(self, name: str, grad: torch.Tensor) -> None:
        capture = self._capture
        if capture is None or grad is None or not grad.numel():
            return
        if self._grad_scale is not None:
            grad = grad * self._grad_scale  # the gradient of the ranks' mean loss (DDP's)
        capture.add_clean((name, "gradient"), grad, None, self._hist_for(name, "gradient"))

    def _check_grads(self) -> None:
        """The sentinel's values for the parameter gradients: one sum each (half the
        cost of a batched norm on CPU), or for a layer's weight its bias's sum (see
        :mod:`nbviz.probes.finite`; not when a hook of the user's may change one of them).
        """
        sums: dict[int, torch.Tensor] = {}
        add = self._sentinel.add
        autocast = self._autocast
        for slot, p, bias_slot, bias in self._grad_plan:
            g = p.grad
            if g is None:
                continue
            if bias_slot is not None and not autocast:
                b = bias.grad
                if (
                    b is not None
                    and g.dtype in finite.WIDE
                    and b.dtype in finite.WIDE
                    and bias.requires_grad
                    and not finite.has_grad_hooks(p)
                    and not finite.has_grad_hooks(bias)
                ):
                    slot_of_value, g = bias_slot, b
                else:
                    slot_of_value = slot
            else:
                slot_of_value = slot
            value = sums.get(slot_of_value)
            if value is None:
                value = sums[slot_of_value] = finite.checksum(g)
            add(slot, value)

    _next_step: int
    _counter: int
    _counter_tags: dict[int, int]
    _open: bool
    _tag: int
    _tagged: bool
    _last_ended: int | None  # the number of the step that ended last
    _backward_done: bool
    _optimizer_stepped: bool
    _optimizer: torch.optim.Optimizer | None
    _active: bool  # inside a training forward of the root
    _autocast: bool  # some forward of this step ran under autocast
    _callback_pending: bool  # a backward callback is queued or hooked on an output
    _sync_backward: bool  # several ranks: this backward averages gradients (DDP)
    steps_seen: int

    def _setup_clock(self, first_step: int, optimizer: torch.optim.Optimizer | None) -> None:
        self._next_step = first_step
        self._counter = 0  # internal step counter used by the sentinel
        self._counter_tags = {}
        self._open = False
        self._tag = first_step
        self._tagged = False
        self._last_ended = None
        self._backward_done = False
        self._optimizer_stepped = False
        self._optimizer = optimizer
        self._active = False
        self._autocast = False
        self._autocast_on = _autocast_query(self.device.type)
        self._callback_pending = False
        self._queue_callback = self._queue_backward_callback  # bound once: a hook per step
        self._sync_backward = True
        self.steps_seen = 0

    def _on_log(self, step: int) -> None:
        """Called by ``run.log(step, ...)``: names the step in progress.

        With ``optimizer=``, a log of the step that ended last, arriving before the
        step in progress has had its own ``optimizer.step()``, is about the one that
        ended: a loop whose model runs again after its update and before the log (a
        GAN's discriminator, in the generator's pass) logs that update, not the step
        the extra pass opened.
        """
        if self.closed or not self._open or self._tagged:
            return
        if self._optimizer is not None and not self._optimizer_stepped and step == self._last_ended:
            return
        self._tag = step
        self._tagged = True
        self._next_step = step + 1

    def _on_optimizer_step(self, *_: Any) -> None:
        self._optimizer_stepped = True

    def _on_root_pre(self, root: nn.Module, args: Any) -> None:
        # the hooks below run on every step, between the model's own ops: kept short
        if not (
            torch.is_grad_enabled() and root.training and not torch.is_inference_mode_enabled()
        ):
            self._active = False
            return
        if self._open and (
            self._optimizer_stepped if self._optimizer is not None else self._backward_done
        ):
            self._finish_step()
        if not self._open:
            self._start_step()
        self._active = True
        self._checked = None
        if not self._autocast:
            self._autocast = self._autocast_on()

    def _on_root_post(self, root: nn.Module, args: Any, output: Any) -> None:
        if not self._active:
            return
        self._active = False
        self._checked = None
        if not self._callback_pending:
            tensor = output if type(output) is torch.Tensor else find_tensor(output)[1]
            if tensor is not None and tensor.requires_grad:
                tensor.register_hook(self._queue_callback)
                self._callback_pending = True
                if self._dist is not None:
                    # DDP decides at the forward whether this backward averages gradients
                    self._sync_backward = bool(getattr(root, "require_backward_grad_sync", True))

    def _queue_backward_callback(self, grad: torch.Tensor) -> None:
        _queue_engine_callback(self._after_backward)

    def _after_backward(self) -> None:
        """Runs once when a backward pass through the watched model completes."""
        self._callback_pending = False
        if self.closed:
            return
        self._backward_done = True
        capture = self._capture
        if capture is None or not self._watch_grads:
            self._check_grads()
        elif self._dist is None:
            self._measure_param_grads(capture, check=True)
        else:
            self._check_grads()
            # DDP averages the gradients in a callback queued during this backward,
            # so after this one: measure them once it has run. A backward under
            # no_sync() leaves a partial, local sum: the last one has the step's total
            if self._sync_backward:
                _queue_engine_callback(self._measure_synced)
        # committed when the step ends (one row per step, whatever the backwards):
        # nothing more to do inside the autograd engine, where every op costs more

    def _start_step(self) -> None:
        self._open = True
        self._tagged = False
        self._backward_done = False
        self._optimizer_stepped = False
        self._tag = self._next_step
        self._counter += 1
        self.steps_seen += 1
        capture = self._tag % self.every == 0
        self._capture = (
            st.StepCapture(self.bins, self._scratch, self._bin_cache) if capture else None
        )
        self._capture_hist = capture and self._tag % self.hist_every == 0
        self._pgrad_parts = {}
        self._autocast = False
        if capture and self._watch_weights:
            with torch.no_grad():
                torch._foreach_copy_(self._prev, [p.detach() for _, p in self.params])

    def _finish_step(self) -> None:
        """Close the step in progress: weights (now updated), one host copy, records out."""
        if not self._open:
            return
        self._open = False
        if not self._tagged:
            self._next_step = self._tag + 1
        self._last_ended = self._tag
        self._counter_tags[self._counter] = self._tag
        self._sentinel.commit(self._counter)
        capture, self._capture = self._capture, None
        if capture is not None:
            self._record_capture(capture)
        self._write_summary()


def _noop(*args: Any) -> None:
    """What a probe's hook becomes in a copy of the model: nothing."""


class _Hook(partial):
    """A probe's hook on a module or an optimizer, inert in a copy of it.

    ``copy.deepcopy(model)`` (an EMA or best-model snapshot) and ``torch.save(model)``
    copy the hooks with the model: the copy must not be recorded as the watched
    model, nor carry the probe and its run along (which cannot be copied). A
    ``partial``, so that calling it adds no Python frame to the hot path.
    """

    def __deepcopy__(self, memo: dict) -> Callable[..., None]:
        return _noop

    def __reduce__(self) -> tuple[Callable[[], Callable[..., None]], tuple]:
        return _inert, ()  # unpickled as _noop


def _inert() -> Callable[..., None]:
    return _noop


def _autocast_query(device_type: str) -> Callable[[], bool]:
    """A call telling whether autocast is on for ``device_type`` (never, for a device
    type autocast does not know)."""
    try:
        torch.is_autocast_enabled(device_type)
    except (TypeError, RuntimeError):
        return lambda: False
    return partial(torch.is_autocast_enabled, device_type)


#: Runs a callable once the backward pass in progress has finished.
_queue_engine_callback = torch.autograd.Variable._execution_engine.queue_callback
