"""Hooks nbviz puts on someone else's model: inert in a copy of it, and the names of
the modules running.

A hook is global state on the user's model, copied with it: ``copy.deepcopy(model)``
(an EMA or best-model snapshot) and ``torch.save(model)`` carry the hooks along. An
:class:`InertHook` becomes a no-op in a copy, so the copy is never recorded as the
watched model nor drags the probe and its run (which cannot be copied) with it.
:class:`ModuleStack` keeps the names of the modules running, innermost last, for the
attention calls and the per-head statistics (:mod:`nbviz.probes.attention`,
:mod:`nbviz.probes.heads`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from torch import nn

__all__ = ["InertHook", "ModuleStack", "inert"]


def _noop(*args: Any) -> None:
    """What a hook becomes in a copy of the model: nothing."""


def inert() -> Callable[..., None]:
    """The no-op a copied hook unpickles as."""
    return _noop


class InertHook(partial):
    """A hook on a module or an optimizer, inert in a copy of it.

    A ``partial``, so that calling it adds no Python frame to the hot path.
    """

    def __deepcopy__(self, memo: dict) -> Callable[..., None]:
        return _noop

    def __reduce__(self) -> tuple[Callable[[], Callable[..., None]], tuple]:
        return inert, ()  # unpickled as _noop


@dataclass
class ModuleStack:
    """The names of the modules running, innermost last, kept by hooks on the modules.

    Hooks are global state on someone else's model: :meth:`remove` takes off every
    hook :meth:`attach` added (the pop hooks run even when a forward raises). Each
    hook is inert in a copy of the model (``copy.deepcopy``, ``torch.save``), so a
    stack left attached between forwards names nothing of a copy's and never stops
    the model being saved whole.
    """

    names: list[str] = field(default_factory=lambda: [""])
    handles: list[Any] = field(default_factory=list)

    def attach(self, model: nn.Module, names: dict[int, str]) -> None:
        """Hooks on each module of ``model`` named in ``names`` (``id(module) -> name``)."""
        stack = self.names
        pop = InertHook(_pop_name, stack)
        for m in model.modules():
            name = names.get(id(m))
            if name is None:
                continue
            self.handles.append(m.register_forward_pre_hook(InertHook(_push_name, stack, name)))
            self.handles.append(m.register_forward_hook(pop, always_call=True))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()
        del self.names[1:]

    def innermost(self) -> str:
        return self.names[-1]


def _push_name(stack: list[str], name: str, *_: Any) -> None:
    stack.append(name)


def _pop_name(stack: list[str], *_: Any) -> None:
    if len(stack) > 1:
        stack.pop()
