"""Which module holds a parameter, and what to call the parameter within it.

A parameter's qualified name is its module's name and its own: ``"block.0.weight"``
is ``weight`` of ``block.0``. A parametrized weight (``torch.nn.utils.parametrize``:
``weight_norm``, ``spectral_norm``, ``orthogonal``) is computed from originals that
torch keeps inside the layer, ``"conv.parametrizations.weight.original0"``: they
belong to ``conv``, which the user knows as the layer, not to the plumbing between.
"""

from __future__ import annotations

import re

#: ``<module>.parametrizations.<tensor>.original[<k>]``: the originals of a parametrized tensor.
_ORIGINAL = re.compile(r"(?:^|\.)parametrizations\.([^.]+)\.(original\d*)$")


def module_of(param: str) -> str:
    """The module that holds ``param``: ``"block.0.weight"`` -> ``"block.0"``, a
    parametrized weight's ``"conv.parametrizations.weight.original0"`` -> ``"conv"``;
    ``""`` for a parameter of the root module."""
    found = _ORIGINAL.search(param)
    if found:
        return param[: found.start()]
    return param.rpartition(".")[0]


def short_name(param: str) -> str:
    """``param`` within its module: ``"weight"``, or ``"weight.original0"`` for a
    parametrized weight's first original."""
    found = _ORIGINAL.search(param)
    if found:
        return f"{found.group(1)}.{found.group(2)}"
    return param.rpartition(".")[2]
