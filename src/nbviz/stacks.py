"""Stacks of repeated blocks, told from module names: ``<prefix>.0``, ``<prefix>.1``, ...

A transformer's layers (``blocks.0`` .. ``blocks.11``, ``encoder.layers.0`` ..),
a ResNet stage's blocks (``layer1.0`` .. ``layer1.2``): modules of one type
numbered under one prefix. The output of each is what flows between them (a
transformer's residual stream), so the probe watches them by default
(:mod:`nbviz.probes.select`, which also asks that their parent be an
``nn.ModuleList`` or ``nn.Sequential``) and the ``residual_growth`` check reads
them (:mod:`nbviz.analysis.checks.residual`, from a run's stored names and
types). Both take the stacks from here: plain names, no torch.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable

__all__ = ["MIN_BLOCKS", "block_index", "stacks"]

#: Fewer repeated blocks than this are not a stack (an encoder and a decoder are two).
MIN_BLOCKS = 3

_INDEXED = re.compile(r"^(.*)\.(\d+)$")


def block_index(name: str) -> tuple[str, int] | None:
    """``("blocks", 3)`` for ``"blocks.3"``; None for a name that does not end in ``.<i>``."""
    m = _INDEXED.match(name)
    return None if m is None else (m.group(1), int(m.group(2)))


def stacks(modules: Iterable[tuple[str, Hashable]]) -> list[list[str]]:
    """The stacks among ``(name, kind)`` pairs, each one's names in index order.

    A stack: at least :data:`MIN_BLOCKS` names ``<prefix>.<i>`` sharing the
    prefix and the kind (a module type, or its name as a run stores it). Stacks
    come in the order their first member was given.
    """
    groups: dict[tuple[str, Hashable], list[tuple[int, str]]] = {}
    for name, kind in modules:
        found = block_index(name)
        if found is not None:
            groups.setdefault((found[0], kind), []).append((found[1], name))
    return [
        [name for _, name in sorted(members)]
        for members in groups.values()
        if len(members) >= MIN_BLOCKS
    ]
