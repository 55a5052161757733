"""Probe: forward/backward hooks that record a model's training without changing it.

Hooks are global state on someone else's model. A probe remembers every handle it
adds and removes them all in ``close()`` (idempotent; also on leaving a ``with``
block), keeps no reference to the autograd graph, and computes only on detached
tensors, so outputs and gradients are bitwise what they would be without it.

A :class:`Probe` is one object made of four parts, one module each:

* :mod:`nbviz.probes.clock`: when a training step begins and ends, and its
  number (the step rules are documented there);
* :mod:`nbviz.probes.hooks`: the hooks on the watched modules and the optimizer,
  the every-step non-finite sentinel, and attaching and removing them;
* :mod:`nbviz.probes.measure`: what a capture step measures (parameter
  gradients, weights, updates, histograms) and its one copy to the host;
* :mod:`nbviz.probes.records`: the rows, events and meta handed to the run store.

They are parts of one object rather than objects of their own because their
hooks share per-step state (inside a training forward, the step's capture, the
output checked last) that a hook on the model reads on every call: kept on
the probe itself, each read is one attribute lookup. This module builds the
probe: it checks the options, selects what is watched, and holds the public
methods.

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

import contextlib
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nbviz.probes import distributed as dd
from nbviz.probes.attention_capture import attention_capture
from nbviz.probes.clock import StepClock
from nbviz.probes.heads import compiled_children, head_stats
from nbviz.probes.hooks import ModuleHooks
from nbviz.probes.measure import StepMeasure
from nbviz.probes.records import Records, Sink
from nbviz.probes.select import (
    DEFAULT_MAX_LAYERS,
    LayerPattern,
    select_modules,
    strip_wrapper_prefix,
)

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
#: Distributions (histograms, per-unit maps, per-head statistics, attention maps) are
#: taken at most this often by default: at ``every=1`` taking them at each step costs
#: the reference MLP and GPT-style model a third to a half of a step more than every
#: 10th step does (benchmarks/probe_overhead.py), and a distribution changes little
#: from one step to the next. ``hist_every=1`` asks for them at every step. The weights'
#: own statistics and distance from init share this period: a step moves them by about
#: the update, which every capture records (at every=1 on the reference MLP, measuring
#: the weights at each step cost a tenth of a step more). So do the layer zero fractions
#: of activations and gradients (the views read them at those steps): counting the
#: gradients' alone at every capture cost the reference MLP and GPT-style model 5% of a
#: step at every=1.
MIN_HIST_EVERY = 10


def default_hist_every(every: int) -> int:
    """The distributions' period for ``every`` when none is given: the smallest multiple of
    ``every`` that is at least :data:`MIN_HIST_EVERY` (``every`` itself from 10 up)."""
    return every * -(-MIN_HIST_EVERY // every)


_COMPILED_MODULE = (
    "inside a torch.compile'd model, where hooks do not run: weights and parameter gradients only"
)

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


class Probe(StepClock, ModuleHooks, StepMeasure, Records):
    """Records activations, gradients and weights of ``model`` into a run.

    Create it with ``run.watch(model, ...)``; :mod:`nbviz.probes.clock` says how steps
    are counted. Parameters: ``every`` capture period (each tensor's statistics;
    default 50); ``hist_every`` period of the distributions (histograms, per-unit maps,
    per-head statistics and attention maps), of the weights' own statistics and
    distance from init (each capture takes each parameter's update) and of the zero
    fractions of activations and gradients (NaN between: not measured); a multiple of
    ``every``; default
    ``every``, or below 10 the smallest multiple of it that is at least 10:
    :func:`default_hist_every`); ``bins``
    histogram bins, fixed per layer at its first capture; ``layers`` glob patterns / types /
    predicates selecting modules (default: all leaf modules but pass-throughs, modules
    with parameters of their own, and the outputs of the blocks of a stack of repeated
    blocks, such as a transformer's layers: see :func:`nbviz.probes.select.select_modules`);
    ``signals`` any of ``"activations"``, ``"gradients"``, ``"weights"``;
    ``optimizer`` marks step boundaries at ``optimizer.step()``; ``name`` prefixes
    every layer and parameter name (``name="D"``: ``D.0``, ``D.0.weight``), which
    tells apart two models watched in one run (a GAN's generator and discriminator);
    ``rank_shards`` (several ranks only) also writes each rank's own statistics
    to ``<run>/ranks/<rank>/``; ``attention`` a fixed probe batch whose attention
    maps are recorded every ``hist_every`` steps, ``tokens`` the text of its
    positions (see :mod:`nbviz.probes.attention_capture`). Each attention head's
    output is measured with the activations (:mod:`nbviz.probes.heads`; ``heads=False``
    leaves it out, and the dispatch of each torch call of a captured forward it costs).
    ``probe.set_mask(mask)``, or a forward's own ``attention_mask``, leaves padding out
    of the statistics (see :meth:`Probe.set_mask`).
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
        attention: Any = None,
        tokens: Any = None,
        heads: bool = True,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"watch: expected a torch.nn.Module, got {type(model).__name__}")
        for option, value in (("every", every), ("bins", bins)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"watch: {option} must be a positive integer, got {value!r}")
        if not isinstance(heads, bool):
            raise ValueError(f"watch: heads must be True or False, got {heads!r}")
        hist_every = default_hist_every(every) if hist_every is None else hist_every
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
            warnings.warn(f"watch: the {self.notes[-1]}", stacklevel=3)
            for mname, _ in model._orig_mod.named_modules():
                if mname:  # each module's row in the summary says why it has no activations
                    self._module_notes[prefix + mname] = _COMPILED_MODULE
            self.modules: list[tuple[str, nn.Module]] = []
            self._outputs_only: frozenset[str] = frozenset()
        else:
            # a stack's blocks are watched for their outputs: only with activations
            selection = select_modules(model, layers, max_layers, blocks=self._watch_acts)
            self.modules = [(prefix + n, m) for n, m in selection.modules]
            self._outputs_only = frozenset(prefix + n for n in selection.activations_only)
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

        if attention is not None and dist is not None:
            raise ValueError(
                "watch: attention= records in a single process; leave it out under "
                "torch.distributed (or record it on one rank's own copy of the model)"
            )
        self._attention = attention_capture(
            model._orig_mod if self.compiled else model, attention, tokens, prefix
        )
        # per-head statistics of attention outputs come with the activations
        self._heads = head_stats(
            model,
            prefix,
            [n for n, _ in self.modules],
            enabled=heads and self._watch_acts and not self.compiled and dist is None,
            hist_every=hist_every,
        )
        compiled = compiled_children(model) if self._heads is not None else []
        if compiled:
            self.notes.append(
                f"per-head statistics off while {', '.join(compiled[:3])} "
                "torch.compile'd on its own (the mode that sees attention calls would break "
                "its graph)"
            )
        self._mask: torch.Tensor | None = None
        self._forward_mask: torch.Tensor | None = None
        self._setup_hooks(model)
        self._setup_measure()
        self._setup_clock(first_step, optimizer)
        self._attach(root, optimizer)
        _WATCHED[model] = self
        if self._attention is not None:
            self.notes.extend(self._attention.notes)
        self._write_config()
        if dist is not None:
            self._write_distributed(model, rank_shards)
        if self._attention is not None:
            self._set_meta("attention", self._attention.meta())

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

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Record nothing inside the block: the hooks come off and go back on after it.

        For extra passes that run like a training step but are not one (the
        curvature test's forward and backward in train mode); the step in
        progress, if any, carries on after the block as if nothing happened.
        """
        model = self._model_ref()
        if self.closed or model is None:
            yield
            return
        self._detach()
        try:
            yield
        finally:
            if not self.closed:
                self._attach(model, self._optimizer)

    def set_mask(self, mask: torch.Tensor | Any | None) -> None:
        """Leave padding out of the statistics from the next captured step on.

        ``mask``: ``(batch, tokens)``, True (or 1) where a position is a real token.
        Every watched output and output gradient whose first two dimensions are
        ``(batch, tokens)`` is summarised over the positions kept only (moments,
        per-unit maps and dead units, histograms); others are as before. It holds
        until set again (a loop with padding sets it before each forward);
        ``None`` removes it. The non-finite sentinel still checks every element.
        Without it, the ``attention_mask`` keyword of that shape a Hugging Face model
        of one stack is called with (1 or True for a real token) is read the same way;
        not an encoder-decoder's (its encoder's), nor a model's of several configs or
        of no Hugging Face config, where another sequence may have as many tokens.
        """
        if mask is None:
            self._mask = self._forward_mask = None
            return
        if not isinstance(mask, torch.Tensor):
            try:
                mask = torch.as_tensor(mask)
            except (TypeError, ValueError, RuntimeError):
                raise TypeError(
                    f"set_mask: mask must be a (batch, tokens) tensor of booleans, got "
                    f"{type(mask).__name__}"
                ) from None
        if mask.dim() != 2:
            raise ValueError(
                f"set_mask: mask must be (batch, tokens), got shape {tuple(mask.shape)}"
            )
        if mask.dtype != torch.bool:
            if mask.is_floating_point() or mask.is_complex() or ((mask != 0) & (mask != 1)).any():
                raise ValueError(
                    f"set_mask: mask must hold booleans (or 0/1), got {mask.dtype} values"
                )
            mask = mask != 0
        self._mask = self._forward_mask = mask.detach().to(self.device)

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
