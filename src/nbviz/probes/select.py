"""Which modules a probe watches, and along which dimension a module has units."""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from torch import nn

#: Modules skipped by default: their output repeats their input (a view, or the
#: input scaled by a mask), so watching them costs time and shows nothing new.
SKIPPED_BY_DEFAULT: tuple[type[nn.Module], ...] = (
    nn.Identity,
    nn.Flatten,
    nn.Unflatten,
    nn.Dropout,
    nn.Dropout1d,
    nn.Dropout2d,
    nn.Dropout3d,
    nn.AlphaDropout,
    nn.FeatureAlphaDropout,
)

#: Modules whose outputs keep channels on dimension 1 for inputs of rank 3.
_CHANNEL_FIRST_1D = (
    nn.Conv1d,
    nn.ConvTranspose1d,
    nn.BatchNorm1d,
    nn.InstanceNorm1d,
    nn.MaxPool1d,
    nn.AvgPool1d,
    nn.AdaptiveAvgPool1d,
    nn.AdaptiveMaxPool1d,
)

LayerPattern = str | type | Callable[[str, nn.Module], bool]
DEFAULT_MAX_LAYERS = 128


@dataclass(frozen=True)
class Selection:
    """Modules chosen for activation/gradient capture, and what was left out and why."""

    modules: list[tuple[str, nn.Module]]
    notes: list[str]


def strip_wrapper_prefix(name: str) -> str:
    """Drop the prefixes that wrappers add (DDP's ``module.``, torch.compile's ``_orig_mod.``)."""
    for prefix in ("module.", "_orig_mod."):
        while name.startswith(prefix):
            name = name[len(prefix) :]
    return name


def _matches(pattern: LayerPattern, name: str, module: nn.Module) -> bool:
    if isinstance(pattern, str):
        type_name = type(module).__name__
        return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(type_name, pattern)
    if isinstance(pattern, type):
        return isinstance(module, pattern)
    if callable(pattern):
        return bool(pattern(name, module))
    raise TypeError(
        f"layers: expected glob strings, module types or predicates, got {pattern!r} "
        f"of type {type(pattern).__name__}"
    )


def _has_direct_params(module: nn.Module) -> bool:
    return any(True for _ in module.parameters(recurse=False))


def named_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Every submodule with its qualified name, wrapper prefixes stripped, root excluded."""
    out = []
    for name, module in model.named_modules():
        if module is model or name == "":
            continue
        clean = strip_wrapper_prefix(name)
        if clean == "":  # the wrapped model itself (DDP's .module)
            continue
        out.append((clean, module))
    return out


def select_modules(
    model: nn.Module,
    layers: LayerPattern | Sequence[LayerPattern] | None = None,
    max_layers: int | None = DEFAULT_MAX_LAYERS,
) -> Selection:
    """Choose the modules whose outputs a probe records.

    By default: every leaf module and every module holding parameters of its own
    (``nn.MultiheadAttention``), except pass-through modules (``SKIPPED_BY_DEFAULT``).
    ``layers`` takes glob patterns matched against qualified names or type names
    (``"features.*"``, ``"Conv2d"``), module types, or ``(name, module) -> bool``
    predicates; a pattern that matches nothing is an error naming what exists.
    Beyond ``max_layers`` modules an evenly spaced subset is kept, and the note says so.
    """
    candidates = named_modules(model)
    notes: list[str] = []
    if layers is None:
        chosen = [
            (n, m)
            for n, m in candidates
            if (not any(True for _ in m.children()) or _has_direct_params(m))
            and not isinstance(m, SKIPPED_BY_DEFAULT)
        ]
        skipped = [
            n for n, m in candidates if isinstance(m, SKIPPED_BY_DEFAULT) and not list(m.children())
        ]
        if skipped:
            notes.append(
                f"skipped {len(skipped)} pass-through module(s) ({_short_list(skipped)}); "
                "pass layers=... to watch them"
            )
    else:
        patterns = [layers] if isinstance(layers, str | type) or callable(layers) else list(layers)
        if not patterns:
            raise ValueError("layers: got an empty list; pass None to watch the default modules")
        chosen_names: set[str] = set()
        for pattern in patterns:
            hits = [n for n, m in candidates if _matches(pattern, n, m)]
            if not hits:
                raise ValueError(_no_match_message(pattern, candidates))
            chosen_names.update(hits)
        chosen = [(n, m) for n, m in candidates if n in chosen_names]
    chosen = _dedupe_modules(chosen, notes)
    if max_layers is not None and len(chosen) > max_layers:
        keep = _evenly_spaced(len(chosen), max_layers)
        left_out = [n for i, (n, _) in enumerate(chosen) if i not in keep]
        chosen = [c for i, c in enumerate(chosen) if i in keep]
        notes.append(
            f"watching {len(chosen)} of {len(chosen) + len(left_out)} modules (max_layers="
            f"{max_layers}); left out {_short_list(left_out)}; pass layers=... or a larger "
            "max_layers to include them"
        )
    return Selection(chosen, notes)


def _dedupe_modules(chosen: list[tuple[str, nn.Module]], notes: list[str]) -> list:
    seen: dict[int, str] = {}
    out = []
    for name, module in chosen:
        if id(module) in seen:
            notes.append(f"{name} is the same module as {seen[id(module)]}; recorded once")
            continue
        seen[id(module)] = name
        out.append((name, module))
    return out


def _evenly_spaced(n: int, k: int) -> set[int]:
    if k <= 1:
        return {0}
    return {round(i * (n - 1) / (k - 1)) for i in range(k)}


def _short_list(names: Iterable[str], limit: int = 6) -> str:
    names = list(names)
    head = ", ".join(names[:limit])
    return head + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def _no_match_message(pattern: LayerPattern, candidates: list[tuple[str, nn.Module]]) -> str:
    names = [n for n, _ in candidates]
    types = sorted({type(m).__name__ for _, m in candidates})
    msg = f"layers: pattern {pattern!r} matches no module."
    if isinstance(pattern, str):
        close = difflib.get_close_matches(pattern, names + types, n=5, cutoff=0.5)
        if close:
            msg += f" Did you mean {', '.join(close)}?"
    msg += f" Modules: {_short_list(names, 12)}. Types: {_short_list(types, 12)}."
    return msg


def unit_dim(module: nn.Module, ndim: int) -> int | None:
    """The dimension that indexes units/channels of this module's output, or None.

    Rank 2 ``(batch, features)``: dim 1. Rank 4/5 (images, volumes): channels, dim 1.
    Rank 3: channels (dim 1) for 1-d convolution/normalisation/pooling modules,
    otherwise the last dimension (sequence models: ``(batch, time, features)``).
    """
    if ndim < 2:
        return None
    if ndim == 2 or ndim >= 4:
        return 1
    if isinstance(module, _CHANNEL_FIRST_1D):
        return 1
    return ndim - 1
