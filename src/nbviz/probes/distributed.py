"""Probes across the ranks of a ``torch.distributed`` process group (DDP on one or many machines).

Everything goes through ``torch.distributed`` collectives on the default group;
nothing here opens a transport of its own. The single-process path never comes
here: a probe or run sees a :class:`RankContext` only when the default group is
initialised with more than one rank.

What the ranks combine, and how
-------------------------------
Per-sample tensors (module outputs and the gradients of module outputs) differ
from rank to rank: their additive accumulators (element count, sum, sum of
squares, nonzero count, non-finite count, per-unit sums, histogram counts) are
summed and their extremes reduced, so the stored statistics are those of the
global batch. Parameters and their gradients are the same on every rank once
DDP has averaged the gradients, so they are read on rank 0 and not combined;
instead a checksum of every parameter and floating-point buffer (its sum and
sum of squares, already computed for the weight statistics) is compared
across ranks, and a tensor whose checksum differs from rank 0's is recorded as
a ``rank_divergence`` event.

One capture step costs one collective: an ``all_gather`` of a flat float64
buffer of a few kilobytes (extremes, the sentinel's first bad step, the
checksums and the additive accumulators), which every rank then reduces alike,
in rank order (a gathered buffer also says exactly which ranks differ from
rank 0). A histogram's first capture adds a second ``all_gather``: its counts
are binned once the ranks agree on one range, so that they add up.

Output gradients are divided by the world size: DDP's averaged parameter
gradients are those of the mean of the ranks' losses, and this is the gradient
of that objective with respect to each rank's activations (with a mean-reduced
loss, that of a single process over the global batch).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from nbviz import records as rec
from nbviz.probes import stats as st
from nbviz.probes.evaluate import Evaluation
from nbviz.probes.histogram import HistState

#: Stands for a NaN checksum in the MAX buffer (NaN has no order; every rank maps it alike).
_NAN_MARK = 1.5e308


@dataclass(frozen=True)
class RankContext:
    """This process's place in the default process group."""

    rank: int
    world_size: int
    backend: str
    device: torch.device  # where collective buffers must live (CUDA for NCCL)

    @property
    def writes(self) -> bool:
        """Whether this rank writes the run (rank 0 does, the others do not)."""
        return self.rank == 0

    def describe(self) -> dict[str, Any]:
        return {"world_size": self.world_size, "backend": self.backend}


def current(required: bool = False) -> RankContext | None:
    """The context of an initialised default group with more than one rank, else None.

    ``required``: raise (saying what to do) instead of returning None.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        if required:
            raise RuntimeError(
                "distributed=True: torch.distributed is not initialised with more than one "
                "rank; call torch.distributed.init_process_group(...) first (torchrun sets "
                "the environment), or pass distributed=None"
            )
        return None
    backend = str(dist.get_backend())
    if "nccl" in backend and torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    return RankContext(dist.get_rank(), dist.get_world_size(), backend, device)


def resolve(distributed: bool | None) -> RankContext | None:
    """What ``Run(distributed=...)`` means here: None (auto), True (required) or False (off)."""
    if distributed is False:
        return None
    if distributed not in (None, True):
        raise TypeError(f"Run: distributed must be None, True or False, got {distributed!r}")
    return current(required=distributed is True)


class NullSink:
    """The sink of a rank that does not write: records are dropped, nothing touches disk."""

    closed = False
    uncommitted = False
    pending = 0

    def __init__(self, run_dir: Path | str) -> None:
        self.run_dir = Path(run_dir)

    def insert(self, table: str, rows: Iterable[Any]) -> None:
        pass

    def set_meta(self, key: str, value: Any) -> None:
        pass

    def execute(self, sql: str, params: Any = ()) -> None:
        pass

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def __repr__(self) -> str:
        return f"NullSink({str(self.run_dir)!r})"


# ----------------------------------------------------------------------- collectives
def _all_reduce(ctx: RankContext, values: np.ndarray, op: Any) -> np.ndarray:
    t = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64)).to(ctx.device)
    dist.all_reduce(t, op=op)
    return t.cpu().numpy()


def handshake(ctx: RankContext, first_step: int, config: dict[str, float]) -> int:
    """Check that every rank watches alike; returns rank 0's first step (one collective).

    The ranks must agree on when they capture, or their collectives would not
    match: a mismatch raises on every rank, naming the setting.
    """
    names = sorted(config)
    mine = np.array([config[n] for n in names], dtype=np.float64)
    start = float(first_step) if ctx.rank == 0 else -math.inf
    reduced = _all_reduce(ctx, np.concatenate([[start], mine, -mine]), dist.ReduceOp.MAX)
    hi, lo = reduced[1 : 1 + len(names)], -reduced[1 + len(names) :]
    differ = [n for n, a, b in zip(names, hi, lo, strict=True) if a != b]
    if differ:
        raise RuntimeError(
            f"watch: the ranks watch their models differently ({', '.join(differ)} differ "
            f"across the {ctx.world_size} ranks); call run.watch(model, ...) with the same "
            "options on every rank, on the same model"
        )
    return int(reduced[0])


def structure_code(items: Iterable[Any]) -> float:
    """A checksum of a structure description, exact in float64 (for the handshake)."""
    return float(zlib.crc32(repr(list(items)).encode()))


def encode_first_bad(ctx: RankContext, first_bad: np.ndarray) -> np.ndarray:
    """``-(counter * world + rank)`` per slot, ``-inf`` where never: a MAX gives the first rank."""
    fb = np.asarray(first_bad, dtype=np.float64)
    return np.where(fb >= 0, -(fb * ctx.world_size + ctx.rank), -math.inf)


def decode_first_bad(ctx: RankContext, reduced: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counters (-1 where never) and the rank that saw each first, from a MAX of encodings."""
    enc = -np.asarray(reduced, dtype=np.float64)
    never = ~np.isfinite(enc)
    enc = np.where(never, 0.0, enc)
    counter = np.floor(enc / ctx.world_size)
    rank = enc - counter * ctx.world_size
    return np.where(never, -1, counter).astype(np.int64), rank.astype(np.int64)


def reduce_first_bad(ctx: RankContext, first_bad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sentinel's first bad step per slot over every rank, and the rank (one collective)."""
    return decode_first_bad(
        ctx, _all_reduce(ctx, encode_first_bad(ctx, first_bad), dist.ReduceOp.MAX)
    )


@dataclass
class Divergence:
    """A checked tensor whose checksum differs from rank 0's on some ranks."""

    index: int
    ranks: list[int]
    count: int
    abs_diff: float  # sum over those ranks of |checksum - rank 0's| (sum and sum of squares)
    rank0: tuple[float, float]


def _all_gather(ctx: RankContext, values: np.ndarray) -> np.ndarray:
    """Every rank's ``values`` (same length on every rank), stacked ``(world, n)``."""
    t = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64)).to(ctx.device)
    out = [torch.empty_like(t) for _ in range(ctx.world_size)]
    dist.all_gather(out, t)
    return torch.stack(out).cpu().numpy()


def combine_ranks(
    ctx: RankContext,
    results: dict[Hashable, st.SlotResult],
    aggregated: Callable[[Hashable], bool],
    first_bad: np.ndarray,
    checksums: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, list[Divergence], bool]:
    """Turn one capture's per-rank results into the global batch's, in place.

    One collective: every rank's accumulators, extremes, sentinel and checksums
    travel in one flat float64 buffer (``all_gather``: a few kilobytes), and
    every rank reduces them alike, in rank order. A histogram's first capture
    adds a second, for its counts once the ranks agree on a range.

    ``results``: this rank's :func:`stats.combine` output; the slots for which
    ``aggregated(slot)`` holds are replaced by the totals over every rank.
    ``first_bad``: the sentinel's first bad counter per slot (-1: never).
    ``checksums``: ``(2, K)`` sums and sums of squares of the checked tensors.
    Returns the global first bad counters, the rank of each, the tensors that
    diverge from rank 0, and whether the ranks' layouts matched (when not, the
    slots keep this rank's numbers).
    """
    keys = sorted((k for k in results if aggregated(k)), key=repr)
    pending = [k for k in keys if results[k].hist is not None and _hist(results, k).pending]
    layout = []
    sums: list[np.ndarray] = []
    extremes = []
    for k in keys:
        res = results[k]
        s = res.stats
        n_units = len(res.unit_nonzero) if res.unit_nonzero is not None else -1
        n_hist = len(res.hist) if res.hist is not None else -1
        layout.append((k, n_units, n_hist, k in pending, res.unit_peak is not None))
        extremes += [s[4], -s[3]]
        if res.unit_peak is not None:
            extremes += res.unit_peak.tolist()
        sums.append(np.array([s[0], s[1], s[2], s[5], s[6], res.unit_count]))
        if res.unit_nonzero is not None:
            sums += [res.unit_nonzero, res.unit_sum]
        if res.hist is not None and k not in pending:
            sums.append(res.hist)
    pend = []
    for k in pending:
        mn, mx = _hist(results, k).pending_extremes()
        pend += [mx, -mn]
    n_bad = len(first_bad)
    k_checked = checksums.shape[1]
    cs = np.nan_to_num(np.asarray(checksums, dtype=np.float64).reshape(-1), nan=_NAN_MARK)
    sum_part = np.concatenate(sums) if sums else np.zeros(0)
    body = [extremes, pend, encode_first_bad(ctx, first_bad), cs, sum_part]
    sig = structure_code(layout)
    size = float(sum(len(b) for b in body))
    allr = _all_gather(ctx, np.concatenate([[sig, size], *body]))
    if len(set(allr[:, 1].tolist())) > 1:
        # the ranks captured different things (not the same model or steps): keep this
        # rank's numbers
        for k in pending:
            _hist(results, k).pending.clear()
        bad_counter, bad_rank = decode_first_bad(ctx, np.full(n_bad, -math.inf))
        return bad_counter, bad_rank, [], False
    same = len(set(allr[:, 0].tolist())) == 1
    off = 2
    ext = allr[:, off : off + len(extremes)].max(axis=0)
    off += len(extremes)
    pend_g = allr[:, off : off + len(pend)].max(axis=0)
    off += len(pend)
    bad_counter, bad_rank = decode_first_bad(ctx, allr[:, off : off + n_bad].max(axis=0))
    off += n_bad
    every_cs = allr[:, off : off + cs.size].reshape(ctx.world_size, 2, k_checked)
    off += cs.size
    total = allr[:, off:].sum(axis=0)
    # ---- the first capture of a histogram: bin with the agreed range, then add up
    if pending and same:
        counts = [
            _hist(results, k).agree(-pend_g[2 * i + 1], pend_g[2 * i])
            for i, k in enumerate(pending)
        ]
        summed = _all_gather(ctx, np.concatenate(counts)).sum(axis=0)
        c_off = 0
        for k, c in zip(pending, counts, strict=True):
            results[k].hist = summed[c_off : c_off + len(c)]
            c_off += len(c)
    if same:
        off = e_off = 0
        for k in keys:
            res = results[k]
            s = res.stats
            s[0], s[1], s[2], s[5], s[6] = total[off : off + 5]
            res.unit_count = float(total[off + 5])
            off += 6
            s[4], s[3] = ext[e_off], -ext[e_off + 1]
            e_off += 2
            if res.unit_peak is not None:
                u = len(res.unit_peak)
                res.unit_peak = ext[e_off : e_off + u].copy()
                e_off += u
            if res.unit_nonzero is not None:
                u = len(res.unit_nonzero)
                res.unit_nonzero = total[off : off + u].copy()
                res.unit_sum = total[off + u : off + 2 * u].copy()
                off += 2 * u
            hist = res.hist_state
            if res.hist is not None and k not in pending:
                h = len(res.hist)
                res.hist = total[off : off + h].copy()
                off += h
            if hist is not None and hist.lo is not None:
                res.hist_range = (float(hist.lo), float(hist.hi))  # type: ignore[arg-type]
    # ---- checksums: which ranks hold something else than rank 0
    rank0 = every_cs[0]
    differs = (every_cs != rank0[None]).any(axis=1)  # (world, K)
    diverged = []
    for j in np.flatnonzero(differs.any(axis=0)):
        ranks = [int(r) for r in np.flatnonzero(differs[:, j])]
        ref, others = rank0[:, j], every_cs[ranks, :, j]
        ok = (others != _NAN_MARK) & (ref != _NAN_MARK)[None]
        gap = float(np.where(ok, np.abs(others - ref[None]), 0.0).sum())
        diverged.append(
            Divergence(
                index=int(j),
                ranks=ranks,
                count=len(ranks),
                abs_diff=gap,
                rank0=(float(ref[0]), float(ref[1])),
            )
        )
    return bad_counter, bad_rank, diverged, same


def _hist(results: dict[Hashable, st.SlotResult], key: Hashable) -> HistState:
    hist = results[key].hist_state
    assert hist is not None, f"no histogram state for {key!r}"
    return hist


# ------------------------------------------------------------------------ evaluation
def _sampler_ids(loader: Any, n: int) -> np.ndarray:
    """Dataset indices of the samples a loader yields, in order, from its sampler."""
    sampler = getattr(loader, "sampler", None)
    if sampler is not None and hasattr(sampler, "__iter__"):
        idx = np.fromiter((int(i) for i in sampler), dtype=np.int64)
        if len(idx) >= n:
            return idx[:n]
    raise ValueError(
        "evaluate: on several ranks every sample needs an id; yield (inputs, labels, ids) "
        "from the loader, or give the DataLoader a DistributedSampler (its dataset indices "
        f"become the ids); this loader ({type(loader).__name__}) has neither"
    )


def gather_evaluation(
    ctx: RankContext,
    ev: Evaluation,
    loader: Any,
    split: str,
    need_inputs: Callable[[], bool],
) -> tuple[Evaluation | None, dict[str, float]]:
    """Every rank's evaluation gathered onto rank 0, each sample once (sorted by id).

    Returns the gathered evaluation on rank 0 (None elsewhere) and the metrics
    of the whole evaluation on every rank. Samples that a DistributedSampler
    repeats to even out the ranks are kept once. ``need_inputs`` is asked on
    rank 0 only: whether the inputs are wanted (for ``log_samples``).
    """
    ids = ev.ids if ev.ids is not None else _sampler_ids(loader, len(ev.labels))
    n = len(ev.labels)
    classes = ev.logits.shape[1]
    emb_d = ev.embeddings.shape[1] if ev.embeddings is not None else -1
    unit_d = ev.units.shape[1] if ev.units is not None else -1
    inputs = ev.inputs
    want = bool(need_inputs()) if ctx.rank == 0 else False
    in_n = len(inputs) if inputs is not None else 0
    in_f = int(np.prod(inputs.shape[1:])) if inputs is not None else -1
    head = torch.tensor([n, classes, emb_d, unit_d, int(want), in_n, in_f], dtype=torch.int64)
    heads = [torch.zeros_like(head).to(ctx.device) for _ in range(ctx.world_size)]
    dist.all_gather(heads, head.to(ctx.device))
    h = np.stack([t.cpu().numpy() for t in heads])
    for col, what in ((1, "classes"), (2, "embedding width"), (3, "unit count")):
        if len(set(h[:, col].tolist())) > 1:
            raise ValueError(
                f"evaluate: the ranks disagree on the {what} ({h[:, col].tolist()} by rank); "
                "evaluate the same model on every rank"
            )
    want = bool(h[0, 4]) and h[0, 6] > 0 and len(set(h[:, 6].tolist()) - {-1}) == 1
    cols = [ids.astype(np.float64)[:, None], ev.labels.astype(np.float64)[:, None]]
    cols += [np.asarray(ev.losses, dtype=np.float64)[:, None], ev.logits.astype(np.float64)]
    if ev.embeddings is not None:
        cols.append(ev.embeddings.astype(np.float64))
    if ev.units is not None:
        cols.append(ev.units.astype(np.float64))
    rows = _gather_rows(ctx, np.concatenate(cols, axis=1), int(h[:, 0].max()), h[:, 0])
    got_inputs = None
    if want:
        flat = (
            inputs.reshape(len(inputs), -1).astype(np.float64)
            if inputs is not None
            else np.zeros((0, int(h[0, 6])))
        )
        got_inputs = _gather_rows(ctx, flat, int(h[:, 5].max()), h[:, 5])
    metrics_t = torch.zeros(2, dtype=torch.float64, device=ctx.device)
    result = None
    if ctx.rank == 0:
        assert rows is not None
        all_rows = np.concatenate(rows)
        all_ids = all_rows[:, 0].astype(np.int64)
        uniq, first = np.unique(all_ids, return_index=True)  # sorted ids, first occurrence
        pick = all_rows[first]
        gathered_inputs = None
        if got_inputs is not None and inputs is not None:
            # each rank's first samples, kept once; their rows go first so that the
            # inputs line up with the first ids (as in a single process)
            in_ids = np.concatenate([r[: int(h[i, 5]), 0] for i, r in enumerate(rows)])
            in_uniq, keep = np.unique(in_ids.astype(np.int64), return_index=True)
            has = np.isin(uniq, in_uniq)
            order = np.concatenate([np.flatnonzero(has), np.flatnonzero(~has)])
            pick, uniq = pick[order], uniq[order]
            flat = np.concatenate(got_inputs)[keep]
            gathered_inputs = flat.reshape(-1, *inputs.shape[1:]).astype(inputs.dtype)
        c0 = 3 + classes
        emb = pick[:, c0 : c0 + emb_d].astype(np.float32) if emb_d >= 0 else None
        c1 = c0 + max(emb_d, 0)
        units = pick[:, c1 : c1 + unit_d].astype(np.float32) if unit_d >= 0 else None
        labels = pick[:, 1].astype(np.int64)
        logits = pick[:, 3:c0].astype(np.float32)
        losses = pick[:, 2]
        result = Evaluation(
            ids=uniq,
            logits=logits,
            labels=labels,
            losses=losses,
            embeddings=emb,
            embed_name=ev.embed_name,
            units=units,
            units_name=ev.units_name,
            inputs=gathered_inputs,
            inputs_whole=ev.inputs_whole,
        )
        # NaN/inf logits predict no class (as in a single process's evaluate)
        pred = rec.predictions_from(np.asarray(logits), None, "evaluate")[0]
        has_class = pred != rec.NONFINITE_PRED
        accuracy = float(np.mean(pred == labels)) if has_class.any() else math.nan
        with np.errstate(invalid="ignore"):  # +inf and -inf losses: a NaN mean, as it is
            mean_loss = float(np.mean(losses))
        metrics_t = torch.tensor([mean_loss, accuracy], dtype=torch.float64, device=ctx.device)
    dist.broadcast(metrics_t, src=0)
    loss, acc = metrics_t.cpu().tolist()
    return result, {f"{split}_loss": loss, f"{split}_accuracy": acc}


def _gather_rows(
    ctx: RankContext, rows: np.ndarray, max_n: int, counts: np.ndarray
) -> list[np.ndarray] | None:
    """Each rank's ``(n_r, cols)`` float64 rows on rank 0 (padded for the collective)."""
    cols = rows.shape[1]
    padded = torch.zeros((max_n, cols), dtype=torch.float64)
    padded[: len(rows)] = torch.from_numpy(np.ascontiguousarray(rows))
    padded = padded.to(ctx.device)
    if ctx.rank == 0:
        bufs = [torch.empty_like(padded) for _ in range(ctx.world_size)]
        dist.gather(padded, bufs, dst=0)
        return [b.cpu().numpy()[: int(counts[r])] for r, b in enumerate(bufs)]
    dist.gather(padded, None, dst=0)
    return None
