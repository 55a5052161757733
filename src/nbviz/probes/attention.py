"""Attention maps of a fixed probe batch: what each head of each layer looks at.

About 520 lines because the discovery of attention calls (SDPA, MultiheadAttention,
a softmax then a product with the values by matmul or einsum) is shared by the maps
and by the per-head statistics (:mod:`.heads`); the rows it writes are apart
(:mod:`.attention_capture`).

``run.watch(model, attention=probe_batch)`` runs the model once more on
``probe_batch`` at every histogram step (``hist_every``), after that step's
update, in eval mode under ``torch.no_grad()`` and with the random number
generators' state put back afterwards, so training is untouched (bitwise). During
that one forward a :class:`~torch.overrides.TorchFunctionMode` sees every call of

* ``F.scaled_dot_product_attention`` (however the model spells the call): the map
  is recomputed from its ``q`` and ``k`` (``softmax(q k^T * scale + mask)``, with
  ``attn_mask``, ``is_causal``, ``scale`` and grouped-query heads as the call
  gives them) and the call itself runs unchanged;
* ``F.multi_head_attention_forward`` (``nn.MultiheadAttention``, and so
  ``nn.TransformerEncoder``/``Decoder`` layers, whose fast path is off while a
  mode is active): called once more with ``need_weights=True,
  average_attn_weights=False`` for the per-head map, and once as the model asked,
  its heads' output read where the call concatenates them before its output
  projection (:func:`mha_with_heads`).

* attention written out by hand (Hugging Face's ``eager`` attention, most
  hand-written transformers): a softmax over the last dimension of a tensor of
  four or more dimensions, ``(batch, heads, queries, keys)``, whose result (kept
  through a dropout or a change of dtype) is then multiplied by the values (``@``,
  ``matmul``, or an ``einsum`` summing over the keys, its result read in the layout
  its equation writes: :func:`einsum_weighted`): the softmax's result is the map,
  the product the heads' output.

Each call is named after the innermost module running it (``blocks.0.attn``,
``encoder.layers.1.self_attn``; a second call inside one module gets ``#1``).
A softmax over flattened heads (``(batch * heads, queries, keys)``, 3-d) does not
say where its heads are and is not seen. The same
discovery (:class:`AttentionCalls`, :class:`ModuleStack`) gives the per-head
output statistics of the training forward itself (:mod:`nbviz.probes.heads`).

Cost, bounded: one forward of at most :data:`MAX_SAMPLES` samples per histogram
step, plus one ``q k^T`` per attention call; stored per layer and capture
``samples x heads x queries x keys`` float16 values (4 samples, 4 heads, 64
tokens: 128 KiB) and per sample and head three float32 statistics.
"""

from __future__ import annotations

import inspect
import math
import types
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from nbviz.probes.module_hooks import ModuleStack, inert

__all__ = [
    "HEAD_STATS",
    "MAX_SAMPLES",
    "MAX_TOKENS",
    "AttentionCall",
    "AttentionCalls",
    "head_statistics",
    "mha_with_heads",
    "record_attention",
    "sdpa_weights",
]

#: Models saved by earlier versions unpickle their naming hooks through this name.
_inert = inert

#: At most this many samples of the probe batch are recorded.
MAX_SAMPLES = 8
#: Queries or keys beyond this many are refused (maps grow with their square).
MAX_TOKENS = 256
#: Per sample and head: mean normalised entropy of the queries' distributions
#: (0 = each query looks at one key, 1 = uniform over the keys it may see), mean
#: of each query's largest weight, and the RMS of the head's output (NaN where the
#: call does not show it).
HEAD_STATS = ("entropy", "max_weight", "output_rms")

_SDPA = F.scaled_dot_product_attention
_MHA = F.multi_head_attention_forward
_MHA_SIGNATURE = inspect.signature(_MHA)
#: A softmax, as a model may spell it.
_SOFTMAX = frozenset((F.softmax, torch.softmax, torch.Tensor.softmax))
#: Calls that pass attention weights on as they are (a dropout, a change of dtype).
_CARRY = frozenset(
    (
        F.dropout,
        torch.Tensor.to,
        torch.Tensor.type,
        torch.Tensor.type_as,
        torch.Tensor.float,
        torch.Tensor.half,
        torch.Tensor.bfloat16,
        torch.Tensor.contiguous,
    )
)
#: A product of attention weights by values.
_MATMUL = frozenset((torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__))
#: The same product written as an Einstein sum (``"bhqk,bhkd->bhqd"``).
_EINSUM = torch.einsum
#: Every call :class:`AttentionCalls` looks at; the rest run untouched.
SEEN_CALLS = frozenset((_SDPA, _MHA, *_SOFTMAX, *_CARRY, *_MATMUL, _EINSUM))


def einsum_weighted(
    equation: Any, a: Any, b: Any, result: Any, weights_first: bool
) -> torch.Tensor | None:
    """``result`` of an Einstein sum of attention weights (``(..., heads, queries, keys)``)
    by values, laid out as ``(..., heads, queries, head_dim)``; None when the equation
    is not such a product (keys not summed, heads or queries not kept, no single value
    dimension, an ellipsis or a sum of the weights alone)."""
    if not isinstance(equation, str) or "->" not in equation or "." in equation:
        return None
    if not isinstance(result, torch.Tensor):
        return None
    inputs, out = equation.replace(" ", "").split("->")
    parts = inputs.split(",")
    if len(parts) != 2:
        return None
    sw, sv = parts if weights_first else parts[::-1]
    weights = a if weights_first else b
    if not isinstance(weights, torch.Tensor) or len(sw) != weights.dim() or len(sw) < 4:
        return None
    h, q, k = sw[-3], sw[-2], sw[-1]
    if k in out or k not in sv or h not in out or q not in out:
        return None
    values = [c for c in out if c not in sw]
    if len(values) != 1 or len(out) != result.dim():
        return None
    batch = [c for c in out if c in sw and c not in (h, q)]
    return result.permute([out.index(c) for c in (*batch, h, q, values[0])])


def sdpa_weights(
    q: torch.Tensor,
    k: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """The attention weights ``F.scaled_dot_product_attention`` applies, in float32.

    ``softmax(q k^T * scale + mask)`` over the keys; a causal mask is aligned top
    left as the function's own; a boolean ``attn_mask`` marks the keys that take
    part. A query that may see no key gets zeros (the function gives NaN there).
    """
    return _softmax_masked(_scores(q, k, scale, enable_gqa), attn_mask, is_causal)[0]


def _scores(q: torch.Tensor, k: torch.Tensor, scale: Any, enable_gqa: bool) -> torch.Tensor:
    """``q k^T * scale`` in float32, the keys' heads repeated for grouped-query attention."""
    qf, kf = q.detach().float(), k.detach().float()
    if enable_gqa and kf.shape[-3] != qf.shape[-3]:
        kf = kf.repeat_interleave(qf.shape[-3] // kf.shape[-3], dim=-3)
    scale = 1.0 / math.sqrt(qf.shape[-1]) if scale is None else float(scale)
    return torch.matmul(qf, kf.transpose(-2, -1)) * scale


def _softmax_masked(
    scores: torch.Tensor, attn_mask: torch.Tensor | None, is_causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(scores + mask)`` and, per query, the number of keys it may see."""
    n_q, n_k = scores.shape[-2], scores.shape[-1]
    if is_causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask.detach().float()
    seen = (scores != float("-inf")).sum(-1).float()
    return torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0), seen


def head_statistics(
    weights: torch.Tensor, output: torch.Tensor | None = None, seen: torch.Tensor | None = None
) -> np.ndarray:
    """``(samples, heads, 3)`` float32: :data:`HEAD_STATS` of ``(samples, heads, q, k)`` maps.

    A query's entropy is divided by the log of the number of keys it may see
    (``seen``, per query, broadcastable to ``(samples, heads, q)``; by default the
    keys it gives any weight); queries that see a single key are left out.
    ``output``: the call's ``(samples, heads, q, dv)`` result, for its RMS per head.
    """
    w = weights.float()
    if seen is None:
        seen = (w > 0).sum(-1).float()
    seen = torch.broadcast_to(seen.float(), w.shape[:-1])
    ent = -(w * torch.log(w.clamp_min(1e-30))).sum(-1)
    usable = seen > 1
    norm = torch.where(usable, ent / torch.log(seen.clamp_min(2)), torch.zeros_like(ent))
    count = usable.sum(-1).clamp_min(1)
    entropy = norm.sum(-1) / count
    entropy = torch.where(usable.any(-1), entropy, torch.full_like(entropy, float("nan")))
    max_weight = w.amax(-1).mean(-1)
    if output is not None:
        rms = output.detach().float().square().mean(dim=(-2, -1)).sqrt()
    else:
        rms = torch.full_like(entropy, float("nan"))
    return torch.stack([entropy, max_weight, rms], dim=-1).cpu().numpy().astype(np.float32)


@dataclass
class AttentionCall:
    """One attention call of the probe pass: where it ran and what it gave."""

    layer: str
    weights: torch.Tensor  # (samples, heads, queries, keys), float32
    output: torch.Tensor | None = None  # (samples, heads, queries, dv) where shown
    kind: str = "sdpa"
    seen: torch.Tensor | None = None  # per query, the keys it may see (None: any weight > 0)


def _as_samples(t: torch.Tensor, heads_dim: int = -3) -> torch.Tensor:
    """``(..., heads, q, k)`` as ``(samples, heads, q, k)`` (an unbatched call: one sample)."""
    if t.dim() == 3:
        return t.unsqueeze(0)
    return t.reshape(-1, *t.shape[-3:])


def _masked_out(mask: Any) -> torch.Tensor | None:
    """Where an ``nn.MultiheadAttention`` mask leaves a key out (True), or None."""
    if not isinstance(mask, torch.Tensor):
        return None
    if mask.dtype == torch.bool:
        return mask
    return mask == float("-inf")


def _mha_seen(arguments: dict[str, Any], w: torch.Tensor) -> torch.Tensor:
    """Per query of ``w`` (samples, heads, q, k), the keys its masks let it see."""
    n, heads, n_q, n_k = w.shape
    out = torch.zeros(n, heads, n_q, n_k, dtype=torch.bool, device=w.device)
    pad = _masked_out(arguments.get("key_padding_mask"))
    if pad is not None and pad.numel() == n * n_k:
        out |= pad.reshape(n, 1, 1, n_k)
    mask = _masked_out(arguments.get("attn_mask"))
    if mask is not None:
        if mask.numel() == n_q * n_k:
            out |= mask.reshape(1, 1, n_q, n_k)
        elif mask.numel() == n * heads * n_q * n_k:
            out |= mask.reshape(n, heads, n_q, n_k)
    return (~out).sum(-1).float()


class AttentionCalls(TorchFunctionMode):
    """Sees the attention calls made while it is on, and runs every call as it was made.

    Each call is named after the innermost module running it (``where()``), a
    second call inside one module getting ``#1``; subclasses say what to keep of
    an ``F.scaled_dot_product_attention`` call (:meth:`on_sdpa`, after it ran)
    and run an ``F.multi_head_attention_forward`` call (:meth:`on_mha`).

    ``KEEPS_WEIGHTS``: whether :meth:`on_weighted` reads the softmax's result. Where it
    does (the attention maps), the result is held until the forward ends; where it does
    not (per-head statistics), nothing of it is held: an entry names the tensor weakly
    and goes once its weighted sum is seen, so every layer's attention weights are freed
    as the model frees them.
    """

    KEEPS_WEIGHTS = True

    def __init__(self, where: Callable[[], str]) -> None:
        super().__init__()
        self._where = where
        self._seen: dict[str, int] = {}
        # attention weights of hand-written attention, by id: (the tensor's weak
        # reference, the softmax's result it carries)
        self._weights: dict[int, tuple[weakref.ref, torch.Tensor | None]] = {}

    def _name(self) -> str:
        base = self._where()
        k = self._seen.get(base, 0)
        self._seen[base] = k + 1
        return base if k == 0 else f"{base}#{k}"

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is _SDPA:
            result = func(*args, **kwargs)
            names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale")
            given = dict(zip(names, args, strict=False))
            given.update(kwargs)
            self.on_sdpa(self._name(), given, result)
            return result
        if func is _MHA:
            return self.on_mha(self._name(), args, kwargs)
        result = func(*args, **kwargs)
        if func in _SOFTMAX:
            self._softmax(args, kwargs, result)
        elif func in _CARRY:
            carried = self._carried(args[0] if args else None)
            if carried is not None and isinstance(result, torch.Tensor):
                self._keep(result, carried)
        elif func in _MATMUL and len(args) == 2:
            weights = self._carried(args[0])
            if weights is not None and isinstance(result, torch.Tensor) and result.dim() >= 4:
                if not self.KEEPS_WEIGHTS:
                    self._weights.pop(id(args[0]), None)  # consumed: held no longer
                self.on_weighted(self._name(), weights, result)
        elif func is _EINSUM:
            self._einsum(args, kwargs, result)
        return result

    def _einsum(self, args: Any, kwargs: dict[str, Any], result: Any) -> None:
        """An Einstein sum of kept attention weights by values: weighted as a matmul is."""
        equation = args[0] if args else kwargs.get("equation")
        operands = list(args[1:])
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = list(operands[0])
        if len(operands) != 2:
            return
        for first in (True, False):
            given = operands[0] if first else operands[1]
            weights = self._carried(given)
            if weights is None:
                continue
            laid = einsum_weighted(equation, operands[0], operands[1], result, first)
            if laid is None:
                return
            if not self.KEEPS_WEIGHTS:
                self._weights.pop(id(given), None)
            self.on_weighted(self._name(), weights, laid)
            return

    def _softmax(self, args: Any, kwargs: dict[str, Any], result: Any) -> None:
        """Keep a softmax's result over the keys of ``(batch, heads, queries, keys)`` scores."""
        x = args[0] if args else kwargs.get("input")
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        if not isinstance(x, torch.Tensor) or not isinstance(result, torch.Tensor):
            return
        if x.dim() >= 4 and isinstance(dim, int) and dim in (-1, x.dim() - 1):
            self._keep(result, result)

    def _keep(self, t: torch.Tensor, weights: torch.Tensor) -> None:
        key = id(t)
        entries = self._weights

        def gone(ref: weakref.ref) -> None:  # the model freed it: forget it
            if entries.get(key, (None,))[0] is ref:
                del entries[key]

        ref = weakref.ref(t, gone)
        self._weights[key] = (ref, weights if self.KEEPS_WEIGHTS else None)

    def _carried(self, t: Any) -> torch.Tensor | None:
        """The softmax's result that ``t`` carries (``t`` itself, or before a dropout), or
        None; where the result is not kept (``KEEPS_WEIGHTS`` False), ``t`` itself."""
        got = self._weights.get(id(t))
        if got is None or got[0]() is not t:
            return None
        return got[1] if got[1] is not None else t

    def on_sdpa(self, name: str, given: dict[str, Any], result: Any) -> None:
        """An attention call named ``name`` with arguments ``given`` returned ``result``."""

    def on_weighted(self, name: str, weights: torch.Tensor, result: torch.Tensor) -> None:
        """Hand-written attention named ``name``: ``weights`` (the softmax's result,
        ``(..., heads, queries, keys)``) times the values gave ``result``
        (``(..., heads, queries, head_dim)``)."""

    def on_mha(self, name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """Run ``F.multi_head_attention_forward(*args, **kwargs)``, named ``name``."""
        return _MHA(*args, **kwargs)


def _unchecked(fn: Callable[..., Any]) -> Callable[..., Any] | None:
    """``fn``'s own code, with its first step (handing the call to an active
    ``TorchFunctionMode``) skipped: the calls it makes are still handed to one.

    None when ``fn`` is not written that way (another torch version).
    """
    code = getattr(fn, "__code__", None)
    if code is None or "has_torch_function" not in code.co_names:
        return None
    scope = dict(fn.__globals__)
    scope["has_torch_function"] = lambda *_: False
    body = types.FunctionType(code, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    body.__kwdefaults__ = fn.__kwdefaults__
    return body


_MHA_BODY: list[Callable[..., Any] | None] = []


class _SeesOutProjInput(TorchFunctionMode):
    """Keeps the input of the ``F.linear`` call with weight ``weight`` (and runs every call)."""

    def __init__(self, weight: Any) -> None:
        super().__init__()
        self._weight = weight
        self.seen: torch.Tensor | None = None

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is F.linear and self.seen is None and len(args) > 1 and args[1] is self._weight:
            self.seen = args[0]
        return func(*args, **kwargs)


def mha_with_heads(args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Any, torch.Tensor | None]:
    """``F.multi_head_attention_forward(*args, **kwargs)``, run once as given, and its
    heads' output as ``(batch, heads, tokens, head_dim)``.

    The heads are read where the call concatenates them before its output
    projection (with and without ``need_weights``): the input of its ``F.linear``
    with ``out_proj_weight``, ``(tokens * batch, heads * head_dim)``, token-major,
    head ``h`` in columns ``h * head_dim`` to ``(h + 1) * head_dim``. None where
    torch's own code cannot be followed into (the call then runs as usual). Call
    it with no mode of one's own active (inside ``__torch_function__``).
    """
    if not _MHA_BODY:
        _MHA_BODY.append(_unchecked(_MHA))
    body = _MHA_BODY[0]
    arguments = _MHA_SIGNATURE.bind(*args, **kwargs).arguments
    weight = arguments.get("out_proj_weight")
    if body is None or not isinstance(weight, torch.Tensor):
        return _MHA(*args, **kwargs), None
    watch = _SeesOutProjInput(weight)
    with watch:
        result = body(*args, **kwargs)
    cat, query, heads = watch.seen, arguments["query"], int(arguments["num_heads"])
    tokens = query.shape[0]
    batch = query.shape[1] if query.dim() == 3 else 1
    if cat is None or cat.dim() != 2 or cat.shape[0] != tokens * batch or cat.shape[1] % heads:
        return result, None
    return result, cat.view(tokens, batch, heads, -1).permute(1, 2, 0, 3)


class _AttentionMode(AttentionCalls):
    """The maps of one probe forward: each call's weights, and its heads' output."""

    def __init__(self, where: Callable[[], str], out: list[AttentionCall]) -> None:
        super().__init__(where)
        self._out = out

    def on_mha(self, name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        bound = _MHA_SIGNATURE.bind(*args, **kwargs)
        bound.arguments["need_weights"] = True
        bound.arguments["average_attn_weights"] = False
        _, weights = _MHA(*bound.args, **bound.kwargs)
        result, output = mha_with_heads(args, kwargs)
        if weights is not None:
            w = _as_samples(weights.float())
            seen = _mha_seen(bound.arguments, w)
            self._out.append(AttentionCall(name, w, output, "mha", seen))
        return result

    def on_weighted(self, name: str, weights: torch.Tensor, result: torch.Tensor) -> None:
        w = _as_samples(weights.detach().float())
        self._out.append(AttentionCall(name, w, _as_samples(result.detach()), "softmax"))

    def on_sdpa(self, name: str, given: dict[str, Any], result: Any) -> None:
        q, k = given["query"], given["key"]
        if q.dim() < 3:
            return
        scores = _scores(q, k, given.get("scale"), bool(given.get("enable_gqa", False)))
        weights, seen = _softmax_masked(
            scores, given.get("attn_mask"), bool(given.get("is_causal", False))
        )
        output = result if isinstance(result, torch.Tensor) else None
        w = _as_samples(weights)
        self._out.append(
            AttentionCall(
                name,
                w,
                None if output is None else _as_samples(output),
                seen=seen.reshape(w.shape[:-1]),
            )
        )


def call_model(model: nn.Module, inputs: Any) -> Any:
    """``model(inputs)``: a tensor as the one argument, a tuple as the arguments, a dict
    as keyword arguments."""
    if isinstance(inputs, tuple):
        return model(*inputs)
    if isinstance(inputs, dict):
        return model(**inputs)
    return model(inputs)


def record_attention(
    model: nn.Module, inputs: Any, names: dict[int, str] | None = None
) -> list[AttentionCall]:
    """The attention calls of one forward of ``model`` on ``inputs`` (see the module doc).

    The model runs in eval mode under ``torch.no_grad()``; its modules' training
    flags, its hooks and the random number generators are as before afterwards.
    ``names``: ``id(module) -> name`` (default: ``model.named_modules()``).
    """
    if names is None:
        names = {id(m): n for n, m in model.named_modules() if n}
    stack = ModuleStack()
    flags = [(m, m.training) for m in model.modules()]
    calls: list[AttentionCall] = []
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    devices = [device] if device.type == "cuda" else []
    try:
        stack.attach(model, names)
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            model.eval()
            with _AttentionMode(stack.innermost, calls):
                call_model(model, inputs)
    finally:
        for m, flag in flags:
            m.training = flag
        stack.remove()
    return calls
