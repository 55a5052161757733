"""``Run.watch``: one watched model per name, and the probes a new one takes over from.

Several models in one run need a ``name=`` each, so that their layers are told
apart (``name.layer``). Another model under a name already watched is an
error, unless ``replace=True``: then it takes over from the probes of that
name (a model rebuilt when a notebook cell runs again).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from nbviz.arguments import check_step, check_text

if TYPE_CHECKING:  # torch is imported where a model is watched
    from torch import nn

    from nbviz.probes.probe import Probe

__all__ = ["check_watch_options", "probes_replaced"]

# options of Probe that the Run sets itself
_SET_BY_RUN = frozenset({"dist", "on_close"})


def check_watch_options(probe_class: type, model: Any, options: dict[str, Any]) -> None:
    """Refuse, naming them, options ``Probe`` does not take, a first step out of range,
    and a model whose module or parameter names cannot be stored as text."""
    params = inspect.signature(probe_class.__init__).parameters
    known = sorted(p for p in params if p not in ("self", "sink", "model", *_SET_BY_RUN))
    unknown = sorted(str(k) for k in options if k not in known)
    if unknown:
        raise TypeError(
            f"watch: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
            f"watch takes {', '.join(known)}"
        )
    if "first_step" in options:
        check_step(options["first_step"], "watch", "first_step")
    if options.get("name") is not None:
        check_text(options["name"], "watch", "name")
    if not hasattr(model, "named_modules"):
        return  # the probe says what a model must be
    for named in (model.named_modules(), model.named_parameters()):
        for qualified, item in named:
            if not qualified.isascii():
                check_text(qualified, "watch", "a module name of the model", empty=True)
            kind = type(item).__name__
            if not kind.isascii():
                check_text(kind, "watch", f"the type name of {qualified!r}")


def probes_replaced(
    probes: Iterable[Probe], model: nn.Module, name: Any, replace: bool
) -> list[Probe]:
    """The probes watching another model under ``name``, which a probe of ``model`` replaces.

    Without ``replace`` any such probe is a ValueError saying how to tell the
    models apart. A probe of ``model`` itself is left to the new probe (it
    replaces or refuses it), as is one whose model is gone.
    """
    replaced = []
    for other in list(probes):
        other_model = other._model_ref()
        if other.name != name or other_model is None or other_model is model:
            continue  # the same model: the probe replaces or refuses itself
        if replace:
            replaced.append(other)  # a model rebuilt (a notebook cell run again)
            continue
        label = "no name" if name is None else f"name={name!r}"
        raise ValueError(
            f"watch: this run already watches a {type(other_model).__name__} under "
            f"{label}; give each model its own name so that their layers are told "
            "apart, e.g. run.watch(generator, name='G') and "
            "run.watch(discriminator, name='D'), or pass replace=True to stop "
            "watching the other one (a model rebuilt in a notebook)"
        )
    return replaced
