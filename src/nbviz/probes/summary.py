"""The model summary kept in a run's meta: module tree, types, parameter counts, shapes."""

from __future__ import annotations

from typing import Any

from torch import nn

from nbviz.probes.select import named_modules, own_parameters


def torch_base(module: nn.Module) -> str | None:
    """The nearest ``torch.nn`` layer class ``module`` is an instance of (``"Embedding"`` for
    a library's ``ScaledWordEmbedding(nn.Embedding)``), None when it derives from
    ``nn.Module`` alone: what the checks compare where a library renames a layer."""
    for cls in type(module).__mro__:
        if cls is nn.Module:
            return None
        if cls.__module__.startswith("torch.nn.modules."):
            return cls.__name__
    return None


def model_summary(
    model: nn.Module,
    shapes: dict[str, list[int]],
    selected: set[str],
    notes: dict[str, str],
    prefix: str = "",
) -> list[dict[str, Any]]:
    """One row per module in ``named_modules`` order (the declaration order).

    ``params`` counts the module's parameters including its children's;
    ``own_params`` only those it holds itself (with its parametrized tensors' originals:
    :func:`~nbviz.probes.select.own_parameters`); ``base`` is :func:`torch_base`. ``prefix``
    starts every name (a probe's ``name=``); ``shapes``, ``selected`` and ``notes`` use
    the prefixed names.
    """
    rows = []
    for local, module in named_modules(model):
        name = prefix + local
        own = sum(p.numel() for p in own_parameters(module))
        total = sum(p.numel() for p in module.parameters())
        trainable = sum(p.numel() for p in module.parameters() if p.requires_grad)
        rows.append(
            {
                "name": name,
                "type": type(module).__name__,
                "base": torch_base(module),
                "depth": local.count(".") + 1,
                "params": total,
                "own_params": own,
                "trainable": trainable,
                "shape": shapes.get(name),
                "watched": name in selected,
                "note": notes.get(name, ""),
            }
        )
    return rows
