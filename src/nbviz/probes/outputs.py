"""Finding the tensor to watch inside whatever a module returns."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

Path = tuple[Any, ...]


def find_tensor(value: Any, *, float_only: bool = True, _path: Path = ()) -> tuple[Path, Any]:
    """The first (floating-point) tensor in a module's output and its path, or ``(None, None)``.

    Tuples, lists, dicts, dataclasses and named tuples are searched depth-first in
    order, so an LSTM's ``(output, (h, c))`` gives ``output`` and a dict of heads
    gives its first head.
    """
    if isinstance(value, torch.Tensor):
        if not float_only or value.is_floating_point():
            return _path, value
        return None, None
    if isinstance(value, Mapping):
        items = value.items()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
    elif isinstance(value, tuple | list):
        items = enumerate(value)
    else:
        return None, None
    for key, item in items:
        path, tensor = find_tensor(item, float_only=float_only, _path=(*_path, key))
        if tensor is not None:
            return path, tensor
    return None, None


def describe(value: Any) -> str:
    """A short type description for notes: ``Tensor[int64]``, ``tuple``, ``NoneType``."""
    if isinstance(value, torch.Tensor):
        return f"Tensor[{str(value.dtype).removeprefix('torch.')}]"
    return type(value).__name__


def path_text(path: Path) -> str:
    return "".join(f"[{k!r}]" for k in path) or "output"
