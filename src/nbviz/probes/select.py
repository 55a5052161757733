"""Which modules a probe watches, and along which dimension a module has units."""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from torch import nn
from torch.nn.utils import parametrize

from nbviz.stacks import stacks

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
    """Modules chosen for activation/gradient capture, and what was left out and why.

    ``activations_only``: the names among ``modules`` whose outputs are recorded
    but not their gradients (the blocks of a stack, watched by default for the
    stream between them: see :func:`stack_blocks`).
    """

    modules: list[tuple[str, nn.Module]]
    notes: list[str]
    activations_only: frozenset[str] = frozenset()


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
    return any(True for _ in own_parameters(module))


def _parametrizations(module: nn.Module) -> nn.ModuleDict | None:
    """The modules that compute ``module``'s parametrized tensors (``weight_norm``,
    ``spectral_norm``...: ``torch.nn.utils.parametrize``), or None."""
    held = getattr(module, "parametrizations", None)
    if parametrize.is_parametrized(module) and isinstance(held, nn.ModuleDict):
        return held
    return None


def own_parameters(module: nn.Module) -> list[nn.Parameter]:
    """The parameters ``module`` holds itself, with the originals of its parametrized
    tensors (a ``weight_norm`` layer's ``weight.original0``/``original1``): torch keeps
    those in submodules, but they are the layer's weight as far as a user is concerned."""
    own = list(module.parameters(recurse=False))
    held = _parametrizations(module)
    if held is not None:
        own += list(held.parameters())
    return own


def children(module: nn.Module) -> list[nn.Module]:
    """``module``'s submodules that are layers: not the ones computing its parametrized
    tensors (a ``ParametrizedLinear`` is a leaf, as the ``Linear`` it was)."""
    held = _parametrizations(module)
    return [c for c in module.children() if c is not held]


def _parametrization_parts(model: nn.Module) -> set[int]:
    """``id`` of every module that computes some parametrized tensor in ``model``."""
    parts: set[int] = set()
    for module in model.modules():
        held = _parametrizations(module)
        if held is not None:
            parts.update(id(m) for m in held.modules())
    return parts


def named_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Every submodule with its qualified name, wrapper prefixes stripped, root excluded.

    The modules that compute a parametrized weight (``conv.parametrizations.weight``
    and what it holds) are left out: they are part of the layer's weight, and their
    output is that weight, not something the network computes from its input.
    """
    out = []
    parts = _parametrization_parts(model)
    for name, module in model.named_modules():
        if module is model or name == "" or id(module) in parts:
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
    blocks: bool = True,
) -> Selection:
    """Choose the modules whose outputs a probe records.

    By default: every leaf module and every module holding parameters of its own
    (``nn.MultiheadAttention``), except pass-through modules (``SKIPPED_BY_DEFAULT``);
    with ``blocks``, also the blocks of each stack of repeated blocks (a
    transformer's layers: :func:`stack_blocks`), for their outputs only
    (``Selection.activations_only``).
    ``layers`` takes glob patterns matched against qualified names or type names
    (``"features.*"``, ``"Conv2d"``), module types, or ``(name, module) -> bool``
    predicates; a pattern that matches nothing is an error naming what exists.
    Beyond ``max_layers`` modules an evenly spaced subset is kept (the blocks of
    the stacks first, as far as they fit), and the note says so.
    """
    candidates = named_modules(model)
    notes: list[str] = []
    block_names: set[str] = set()
    if layers is None:
        chosen_names = {
            n
            for n, m in candidates
            if (not children(m) or _has_direct_params(m)) and not isinstance(m, SKIPPED_BY_DEFAULT)
        }
        skipped = [
            n for n, m in candidates if isinstance(m, SKIPPED_BY_DEFAULT) and not children(m)
        ]
        if skipped:
            notes.append(
                f"skipped {len(skipped)} pass-through module(s) ({_short_list(skipped)}); "
                "pass layers=... to watch them"
            )
        if blocks:
            for stack in stack_blocks(model):
                added = [n for n in stack if n not in chosen_names]
                if not added:
                    continue
                block_names.update(added)
                notes.append(
                    f"watching the outputs of the {len(stack)} repeated blocks {stack[0]} .. "
                    f"{stack[-1]}: the stream between them (a transformer's residual stream) "
                    "shows nowhere else; activations only, no output gradients"
                )
        chosen = [(n, m) for n, m in candidates if n in chosen_names or n in block_names]
    else:
        patterns = [layers] if isinstance(layers, str | type) or callable(layers) else list(layers)
        if not patterns:
            raise ValueError("layers: got an empty list; pass None to watch the default modules")
        chosen_names = set()
        for pattern in patterns:
            hits = [n for n, m in candidates if _matches(pattern, n, m)]
            if not hits:
                raise ValueError(_no_match_message(pattern, candidates))
            chosen_names.update(hits)
        chosen = [(n, m) for n, m in candidates if n in chosen_names]
    chosen = _dedupe_modules(chosen, notes)
    if max_layers is not None and len(chosen) > max_layers:
        keep = _capped(chosen, block_names, max_layers)
        left_out = [n for i, (n, _) in enumerate(chosen) if i not in keep]
        chosen = [c for i, c in enumerate(chosen) if i in keep]
        notes.append(
            f"watching {len(chosen)} of {len(chosen) + len(left_out)} modules (max_layers="
            f"{max_layers}); left out {_short_list(left_out)}; pass layers=... or a larger "
            "max_layers to include them"
        )
    kept = {n for n, _ in chosen}
    return Selection(chosen, notes, frozenset(block_names & kept))


def stack_blocks(model: nn.Module) -> list[list[str]]:
    """The blocks of each stack of repeated blocks in ``model`` that have outputs of their own.

    A stack (:func:`nbviz.stacks.stacks`): at least three modules ``<prefix>.<i>``
    of one type, children of an ``nn.ModuleList`` or ``nn.Sequential`` (a
    transformer's ``blocks.0`` .. ``blocks.11``, ``nn.TransformerEncoder``'s
    ``layers.0`` .., a ResNet stage's blocks). Listed are the blocks that hold
    other modules and compute something of their own: their output (a
    transformer's residual stream after each block) is no child's output. A
    plain ``nn.Sequential`` block is left out (its output is its last child's),
    and so are containers that are never called (``nn.ModuleList``, ``nn.ModuleDict``).
    """
    parents: dict[int, nn.Module] = {}
    for module in model.modules():
        for child in module.children():
            parents.setdefault(id(child), module)
    by_name = dict(named_modules(model))
    found = []
    for stack in stacks((n, type(m)) for n, m in by_name.items()):
        first = by_name[stack[0]]
        if not isinstance(parents.get(id(first)), nn.ModuleList | nn.Sequential):
            continue
        if not children(first) or not _computes(first):
            continue
        found.append(stack)
    return found


def _computes(module: nn.Module) -> bool:
    """Whether calling ``module`` computes more than its last child's output."""
    if isinstance(module, nn.ModuleList | nn.ModuleDict | nn.ParameterList | nn.ParameterDict):
        return False
    return type(module).forward is not nn.Sequential.forward


def _capped(chosen: list[tuple[str, nn.Module]], first: set[str], k: int) -> set[int]:
    """Indices of ``k`` of ``chosen``: those named in ``first`` as far as they fit (evenly
    spaced among them where they do not), then evenly spaced ones of the rest."""
    preferred = [i for i, (n, _) in enumerate(chosen) if n in first]
    rest = [i for i, (n, _) in enumerate(chosen) if n not in first]
    if len(preferred) >= k:
        return {preferred[j] for j in _evenly_spaced(len(preferred), k)}
    if not preferred:
        return _evenly_spaced(len(chosen), k)
    return set(preferred) | {rest[j] for j in _evenly_spaced(len(rest), k - len(preferred))}


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
