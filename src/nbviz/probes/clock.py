"""The step clock: when a training step begins and ends, and the number it is recorded under.

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
Without ``optimizer=``, two logs in a row that each name a step below the number of
the step in progress (each after several training passes) are a loop that runs several forwards and
backwards per optimizer step (gradient accumulation, or an optimizer such as SAM
that takes two): each pass is counted as a step and the weights do not change between
most of them. The probe warns once (``probe.notes`` keeps it) and says to pass
``optimizer=``.
A step is *captured* when its number is a multiple of
``every``; distributions (histograms, per-unit maps, per-head statistics), and the
weights' own statistics and distance from init, are taken every ``hist_every`` steps
(a multiple of ``every``; by default ``every``, or the first multiple of it from 10 up
when ``every`` is smaller). Whatever the period, the non-finite sentinel runs on
every step.

The clock listens to the root module's forward (a training forward may begin a
step, and ends the one before when that one is complete) or, when a loop trains the
model without calling it (``model.forward(x)``, a LightningModule's ``training_step``
calling ``self.net(x)``), to the forward of each of its direct children called outside
it, to the end of each
backward through the model (a callback queued on the autograd engine from a
hook on the output), to ``optimizer.step()`` (with ``optimizer=``) and to
``run.log``. The clock decides; the work at a step's edges (the parameter
gradients' checks after a backward, the capture of a capture step) belongs to
:mod:`nbviz.probes.hooks` and :mod:`nbviz.probes.measure`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import nn

from nbviz.probes import stats as st
from nbviz.probes.outputs import find_tensor
from nbviz.probes.padding import one_sequence, padding_mask


class StepClock:
    """The step numbering of a :class:`~nbviz.probes.probe.Probe` (the rules above).

    A part of the probe (see :mod:`nbviz.probes.probe`). ``_open``: a training
    step is in progress, numbered ``_tag`` (``_tagged`` once ``run.log`` named
    it); ``_counter`` counts steps for the sentinel, and ``_counter_tags`` maps a
    counter to its step number until the sentinel has reported on it.
    """

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
    notes: list[str]
    _root_calls: int
    _summary_written: bool
    _mask: torch.Tensor | None  # the loop's (batch, tokens) mask (Probe.set_mask)
    _forward_mask: torch.Tensor | None  # the mask of the captured forward in progress

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
        self._groups_used: list[dict[str, Any]] | None = None  # kept by a capture's update
        self._active = False
        self._autocast = False
        self._autocast_on = _autocast_query(self.device.type)
        self._callback_pending = False
        self._queue_callback = self._queue_backward_callback  # bound once: a hook per step
        self._sync_backward = True
        self.steps_seen = 0
        self._logged: int | None = None  # the step number of the last log that named a step
        self._counter_at_log = 0  # _counter then
        self._passes_noted = False
        self._mask_noted = False  # said that a forward's attention_mask is not read
        self._behind = False  # the last log named a step below the one in progress

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
        behind = self._optimizer is None and step < self._tag
        if behind and not self._passes_noted and self._logged is not None:
            # twice in a row: not a lone extra pass, nor a loop started afresh at 0
            if self._behind and step > self._logged:
                self._note_passes(step, self._counter - self._counter_at_log)
        self._behind = behind
        self._logged, self._counter_at_log = step, self._counter
        self._tag = step
        self._tagged = True
        self._next_step = step + 1

    def _note_passes(self, step: int, passes: int) -> None:
        """Warn, once, that the loop trains the model several times per logged step."""
        self._passes_noted = True
        note = (
            f"run.log({step}) came after {passes} training passes (forward and backward) of "
            "the model since the last log: several passes per optimizer step (gradient "
            "accumulation) are each counted as a step, and the weights do not change between "
            "most of them; pass the optimizer, run.watch(model, optimizer=opt), so that a "
            "step ends at optimizer.step()"
        )
        self._add_note(note)
        warnings.warn(note, stacklevel=4)

    def _note_mask_unread(self) -> None:
        """Say, once, that a forward's ``attention_mask`` is not taken as the padding."""
        if self._mask_noted:
            return
        self._mask_noted = True
        self._add_note(
            "the model is called with an attention_mask, which is not read as the padding of "
            "its outputs (it is not one Hugging Face stack, so another sequence may have as "
            "many tokens): call probe.set_mask(mask) before each forward to leave padding out "
            "of the statistics"
        )

    def _on_optimizer_step(self, *_: Any) -> None:
        self._optimizer_stepped = True
        if self._capture is not None:  # the groups this update used, before a scheduler moves them
            self._note_optimizer_groups()

    def _on_root_pre(self, root: nn.Module, args: Any, kwargs: Any = None) -> None:
        # the hooks below run on every step, between the model's own ops: kept short
        if self._heads is not None and self._heads.on:
            # left on by a forward cut short (KeyboardInterrupt): its naming hooks too
            self._heads.end(release=True)
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
        if self._capture is not None:
            # padding left out of this forward's statistics: the probe's mask, else the
            # forward's own attention_mask where its tokens are the only sequence
            mask = self._mask
            if mask is None and kwargs:
                mask = padding_mask(kwargs.get("attention_mask"))
                if mask is not None and not one_sequence(root):
                    self._note_mask_unread()
                    mask = None
            self._forward_mask = mask
            if self._heads is not None and self._capture_hist:
                self._heads.begin(root, mask)  # ended by an always-called hook (hooks.py)
        if not self._summary_written:
            self._root_calls += 1
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
        self._recomputed.clear()
        self._autocast = False
        if self._heads is not None:
            self._heads.new_step()
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
        if self._attention is not None and self._tag % self.hist_every == 0:
            self._record_attention()
        self._write_summary()


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
