"""The probe's hooks on the model: what each does on every call, and their wiring.

Every watched module gets a forward hook. On every training step it gives the
non-finite sentinel one cheap reduction of the module's output (a sum, kept on
the device: see :mod:`nbviz.probes.sentinel`), or, for a module that cannot
make finite values non-finite and whose input is the output checked just
before, takes that check (:mod:`nbviz.probes.finite`), as does a module
returning that very tensor (a container's last layer's). On a capture step it
measures the output instead (its statistics tell finiteness too) and hooks the
output's gradient (not of a stack's blocks, watched for their outputs only: see
:func:`nbviz.probes.select.select_modules`). After each backward, the parameter
gradients get one sum each (:meth:`ModuleHooks._check_grads`).

Hooks are global state on someone else's model: every handle is kept in
``_handles`` and :meth:`ModuleHooks._detach` removes them all. Each hook is a
:class:`_Hook`, which a copy of the model (``copy.deepcopy``, ``torch.save``)
gets as a no-op. The hooks run between the model's own ops on every step: they
are kept short, and each is a ``partial`` of a bound method, so that calling it
adds no Python frame.
"""

from __future__ import annotations

import warnings
import weakref
from functools import partial
from typing import Any

import torch
from torch import nn

from nbviz.probes import finite
from nbviz.probes.heads import HeadStats
from nbviz.probes.module_hooks import InertHook as _Hook
from nbviz.probes.module_hooks import inert
from nbviz.probes.outputs import describe, find_tensor, path_text
from nbviz.probes.padding import masked
from nbviz.probes.select import unit_dim
from nbviz.probes.sentinel import Sentinel
from nbviz.probes.stats import StepCapture

#: Units beyond this count are not recorded one by one (e.g. a vocabulary's logits).
MAX_UNITS = 8192


class ModuleHooks:
    """The module and optimizer hooks of a :class:`~nbviz.probes.probe.Probe`.

    A part of the probe (see :mod:`nbviz.probes.probe`): the hooks read the
    clock's ``_active`` (inside a training forward) and ``_capture`` (the step's
    capture, or None) directly, one attribute away, as they run on every call.
    """

    _handles: list[Any]
    _sentinel: Sentinel
    _act_slots: dict[str, int]  # module name -> sentinel slot
    _sent_names: list[tuple[str, str]]  # sentinel slot -> (layer, signal)
    _keeps_finite: dict[int, str]  # slot -> kind, for modules that keep finite values finite
    _grad_plan: list[tuple[int, nn.Parameter, int | None, nn.Parameter | None]]
    _checked: tuple[Any, int, torch.Tensor] | None  # the last output checked
    _shapes: dict[str, list[int]]  # module name -> output shape at its first call
    _exec_order: dict[str, int]  # module name -> order of its first call
    _calls: dict[str, int]  # module name -> its calls during the first step
    _root_calls: int  # the model's training forwards during the first step
    _summary_written: bool
    _unit_dims: dict[str, int | None]
    _forward_mask: torch.Tensor | None  # (batch, tokens): True where a position counts
    _outputs_only: frozenset[str]  # modules whose output gradient is not recorded
    _heads: HeadStats | None  # per-head statistics of attention outputs (capture steps)
    # modules of the captured forward that ran under no_grad (a reentrant checkpoint's
    # segments), with the forward's mask: their output gradient comes from the recompute
    _recomputed: dict[str, torch.Tensor | None]

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
        self._entry: nn.Module | None = None  # the child standing in for the model's forward
        self._stray_noted = False  # said that a module ran outside any training forward seen
        self._recomputed = {}
        self._shapes = {}
        self._exec_order = {}
        self._unit_dims = {}
        self._calls = {}
        self._root_calls = 0

    def _attach(self, root: nn.Module, optimizer: torch.optim.Optimizer | None) -> None:
        """Hooks on the root (the step clock's), each watched module and the optimizer."""
        pre = _Hook(self._on_root_pre)  # with the keyword arguments: a padding mask among them
        self._handles.append(root.register_forward_pre_hook(pre, with_kwargs=True))
        self._handles.append(root.register_forward_hook(_Hook(self._on_root_post)))
        for name, module in self.modules:
            slot = self._act_slots[name]
            kind = self._keeps_finite.get(slot)
            if kind is None:
                hook = _Hook(self._on_output, name, slot)
            else:
                hook = _Hook(self._on_kept_output, name, slot, kind)
            self._handles.append(module.register_forward_hook(hook))
        if self.modules:
            # a loop that calls a part of the model rather than the model (a
            # LightningModule's training_step calling self.net(x), model.forward(x)):
            # the root's direct children begin and end its training forwards then
            entry_pre, entry_post = _Hook(self._on_entry_pre), _Hook(self._on_entry_post)
            for child in root.children():
                self._handles.append(child.register_forward_pre_hook(entry_pre, with_kwargs=True))
                self._handles.append(child.register_forward_hook(entry_post))
        if optimizer is not None:
            self._handles.append(optimizer.register_step_post_hook(_Hook(self._on_optimizer_step)))
        if self._heads is not None:
            # ends what the root's pre-hook began on a capture step, also when forward raises
            end = _Hook(self._end_heads)
            self._handles.append(root.register_forward_hook(end, always_call=True))

    def _detach(self) -> None:
        """Remove every hook this probe added."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self._heads is not None:
            self._heads.end(release=True)

    def _end_heads(self, module: nn.Module, args: Any, output: Any) -> None:
        self._heads.end()

    def _on_entry_pre(self, child: nn.Module, args: Any, kwargs: Any) -> None:
        """A direct child of the model called outside the model's own call: it stands in
        for the model's forward (see :meth:`_on_root_pre`), unless that is running, or
        this is a recomputation inside backward (a checkpoint's)."""
        if child is self._entry:  # its last forward never ended (interrupted): a fresh one
            self._entry, self._active = None, False
        if self._active or self._entry is not None or torch._C._current_graph_task_id() >= 0:
            return
        self._on_root_pre(child, args, kwargs)
        if self._active:
            self._entry = child

    def _on_entry_post(self, child: nn.Module, args: Any, output: Any) -> None:
        if child is not self._entry:
            return
        self._entry = None
        if self._heads is not None and self._heads.on:
            self._heads.end()
        self._on_root_post(child, args, output)

    def _on_output(self, name: str, slot: int, module: nn.Module, args: Any, output: Any) -> None:
        if not self._active:
            if self._recomputed:
                self._on_recomputed(name, output)
            elif not self._stray_noted and torch.is_grad_enabled() and module.training:
                self._note_stray(name)
            return
        if not self._summary_written:  # the first step: how often it runs per forward
            self._calls[name] = self._calls.get(name, 0) + 1
        if type(output) is torch.Tensor and name in self._shapes:
            # the common case: a plain tensor from a module already seen
            live = output if output.is_floating_point() else None
        else:
            live = self._first_output(name, module, output)
        if live is None or not live.numel():
            return  # an empty output (an empty batch, a size-0 split) has nothing to tell
        capture = self._capture
        if capture is None or not self._watch_acts:
            last = self._checked
            if last is not None and live is last[0]() and live._version == last[1]:
                # the very tensor checked just before (a container's last layer's)
                self._sentinel.add(slot, last[2])
            else:
                # the sentinel's value, noted as the last check (see _on_kept_output)
                value = finite.checksum(live)
                self._checked = (weakref.ref(live), live._version, value)
                self._sentinel.add(slot, value)
            if capture is None:
                return
        elif self._heads is not None and self._heads.on:
            with self._heads.aside():  # the probe's own ops, not handed to the heads' mode
                self._measure_output(name, slot, live, capture)
                self._hook_output_grad(name, live)
            return
        else:
            self._measure_output(name, slot, live, capture)
        self._hook_output_grad(name, live)

    def _measure_output(
        self, name: str, slot: int, live: torch.Tensor, capture: StepCapture
    ) -> None:
        """A capture step's statistics of a watched output (they give the sentinel its
        value too)."""
        x = live.detach()
        # per-unit maps are distributions, like histograms: taken every hist_every steps
        ud = self._unit_dims.get(name) if self._capture_hist else None
        if ud is not None and (x.dim() <= ud or x.shape[ud] != self._shapes[name][ud]):
            ud = None  # the unit count changed: statistics only
        # (batch, tokens, features): each feature's peak too (massive activations)
        peaks = ud == 2 and x.dim() == 3
        mask = self._forward_mask
        if mask is not None and x.dim() >= 3 and x.shape[:2] == mask.shape:
            x, ud = masked(x, mask, ud)
        # the zero fraction with the distributions (the layer table and the detail
        # read it at those steps), as the per-unit one: a pass saved between them
        hist = self._hist_for(name, "activation")
        entry = capture.add_clean((name, "activation"), x, ud, hist, peaks, self._capture_hist)
        # the statistics tell finiteness too (of the positions kept: with a
        # mask, the sentinel takes the whole output's sum)
        self._sentinel.add(slot, entry.witness if x.shape == live.shape else finite.checksum(live))

    def _hook_output_grad(self, name: str, live: torch.Tensor) -> None:
        if not self._watch_grads or name in self._outputs_only:
            return
        if live.requires_grad:
            # the mask of the forward that made it: a later forward may come first
            live.register_hook(partial(self._on_output_grad, name, self._forward_mask))
        elif not torch.is_grad_enabled():
            # run under no_grad inside a training forward: torch.utils.checkpoint
            # (use_reentrant=True, Hugging Face's gradient checkpointing) runs it again
            # during backward, with grad, and its gradient flows through that output
            self._recomputed[name] = self._forward_mask

    def _note_stray(self, name: str) -> None:
        """Say, once, that a watched module ran in a training forward the clock did not see
        (a part of the model called on its own, deeper than the model's children)."""
        if torch._C._current_graph_task_id() >= 0 or torch.is_inference_mode_enabled():
            return  # a recomputation inside backward (a checkpoint's), or inference
        self._stray_noted = True
        note = (
            f"'{name}' ran with gradients on and in train mode outside a call of the watched "
            "model (or of one of its direct children): a part of the model called on its own "
            "(model.encoder.layers[0](x)) is not seen as a training step, so nothing of that "
            "forward is recorded; call the model, or watch the module the loop calls"
        )
        self._add_note(note)
        warnings.warn(f"nbviz: {note}", stacklevel=2)

    def _on_recomputed(self, name: str, output: Any) -> None:
        """A watched module run again during the backward of a capture step (a reentrant
        checkpoint's recomputation): its output gradient is taken from this output."""
        if name not in self._recomputed or self._capture is None:
            return
        if not torch.is_grad_enabled() or torch._C._current_graph_task_id() < 0:
            return  # not a recomputation inside backward
        live = output if type(output) is torch.Tensor else find_tensor(output)[1]
        if live is not None and live.requires_grad and live.is_floating_point():
            live.register_hook(partial(self._on_output_grad, name, self._recomputed[name]))

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

    def _on_output_grad(self, name: str, mask: torch.Tensor | None, grad: torch.Tensor) -> None:
        capture = self._capture
        if capture is None or grad is None or not grad.numel():
            return
        if self._grad_scale is not None:
            grad = grad * self._grad_scale  # the gradient of the ranks' mean loss (DDP's)
        if mask is not None and grad.dim() >= 3 and grad.shape[:2] == mask.shape:
            grad = masked(grad, mask, None)[0]
        # zero fractions of gradients come with the distributions too (no view reads
        # them at all): a pass over each output gradient saved at every other capture
        hist = self._hist_for(name, "gradient")
        capture.add_clean((name, "gradient"), grad, None, hist, zeros=self._capture_hist)

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


#: Models saved by earlier versions unpickle their hooks through this name.
_inert = inert
