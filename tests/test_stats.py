"""On-device statistics: small tensors measured together, the batched histogram binning and
its sample."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nbviz.probes import histogram as hg
from nbviz.probes import stats as st
from nbviz.probes import tensor_stats as ts

BINS = 16


def reference_counts(sample: torch.Tensor, lo: float, hi: float) -> np.ndarray:
    """``[underflow, bins..., overflow]`` of a sample, binned alone in float64; NaN left out."""
    x = sample.double().numpy()
    x = x[~np.isnan(x)]
    width = (hi - lo) / BINS
    idx = np.floor(np.clip((x - (lo - width)) / width, 0, BINS + 1)).astype(np.int64)
    return np.bincount(idx, minlength=BINS + 2).astype(np.float64)


def known_range(lo: float, hi: float) -> hg.HistState:
    state = hg.HistState(BINS, 0.5)
    state.set_range(lo, hi)
    return state


def test_batched_histograms_equal_binning_each_sample_alone():
    torch.manual_seed(0)
    tensors = {
        "small": torch.randn(100) * 3,
        "exact sample size": torch.randn(hg.HIST_SAMPLE),
        "weight": torch.randn(512, 784),
        "conv activation": torch.relu(torch.randn(8, 16, 13, 13)),
        "strided view": torch.randn(40_000)[::3],
    }
    capture = st.StepCapture(BINS, ts.Scratch(), hg.BinCache())
    states = {}
    for i, (name, x) in enumerate(tensors.items()):
        states[name] = known_range(-1.5, 2.0)  # values fall on both sides of the range
        if i % 2:
            capture.add_raw(name, x, states[name])
        else:
            capture.add_clean(name, x, None, states[name])
    flat, _ = capture.to_host()
    results = st.combine(capture.entries, flat)
    for name, x in tensors.items():
        sample, _ = hg.hist_sample(x.reshape(-1))
        expected = reference_counts(sample, -1.5, 2.0)
        got = results[name].hist
        assert got.sum() == sample.numel(), name
        # float32 against float64 arithmetic may put a value on a bin edge either side
        assert np.abs(got - expected).sum() <= 2, (name, got, expected)
        assert results[name].hist_range == (-1.5, 2.0)


def test_batched_binning_reuses_its_constants_while_the_layout_repeats():
    cache = hg.BinCache()
    states = [known_range(0.0, 1.0), known_range(-1.0, 1.0)]
    like = torch.zeros(1)
    first = cache.layout(states, [10, 20], like)
    assert cache.layout(states, [10, 20], like) is first
    assert cache.layout(states, [10, 21], like) is not first


def test_nan_in_a_batched_sample_weighs_nothing():
    x = torch.randn(1000)
    x[::10] = float("nan")
    capture = st.StepCapture(BINS, ts.Scratch(), hg.BinCache())
    capture.add_clean("x", x, None, known_range(-1.0, 1.0))
    flat, _ = capture.to_host()
    res = st.combine(capture.entries, flat)["x"]
    assert res.hist.sum() == 900
    assert res.stats[ts.STAT_FIELDS.index("nonfinite")] == 100


def test_histogram_sample_spreads_over_the_whole_tensor():
    rows, cols = 512, 784
    by_row = torch.arange(rows, dtype=torch.float32)[:, None].expand(rows, cols).contiguous()
    by_col = torch.arange(cols, dtype=torch.float32)[None, :].expand(rows, cols).contiguous()
    sample_rows, copied = hg.hist_sample(by_row.reshape(-1))
    sample_cols, _ = hg.hist_sample(by_col.reshape(-1))
    assert copied and sample_rows.numel() == hg.HIST_SAMPLE
    seen_rows = np.unique(sample_rows.numpy())
    assert len(seen_rows) >= 100
    assert len(np.unique(seen_rows // (rows // 8))) == 8  # every eighth of the rows is sampled
    # the runs start at many different columns, not a few aliased ones
    assert len(np.unique(sample_cols.numpy())) > cols // 2


def test_rows_summarized_together_equal_each_row_alone():
    rng = np.random.default_rng(0)
    rows = [
        [100, 5.0, 40.0, -2.0, 3.0, 90, 0],  # plain
        [100, 5.0, 40.0, -2.0, 3.0, 90, 4],  # some non-finite
        [10, 0.0, 0.0, 0.0, 0.0, 0, 0],  # all zeros
        [10, 0.0, 0.0, 0.0, 0.0, 0, 10],  # nothing finite
        [0, 0.0, 0.0, 0.0, 0.0, 0, 0],  # empty
        [7, 7e30, 7e60, 1e30, 1e30, 7, 0],  # variance lost to rounding: clamped at 0
    ]
    for _ in range(20):
        n = int(rng.integers(1, 10_000))
        x = rng.normal(size=n) * rng.uniform(1e-3, 1e3)
        rows.append([n, x.sum(), (x * x).sum(), x.min(), x.max(), n - 3, 0])
    stats = np.array(rows, dtype=np.float64)
    together = st.summarize_all(stats)
    assert len(together) == len(rows)
    for row, got in zip(stats, together, strict=True):
        alone = st.summarize(row)
        expected = tuple(
            alone[k]
            for k in ("count", "mean", "std", "min", "max", "zero_frac", "nonfinite", "norm")
        )
        assert [type(v) for v in got] == [type(v) for v in expected]
        np.testing.assert_allclose(got, expected, rtol=1e-15, atol=0)
    assert st.summarize_all(np.zeros((0, ts.N_STATS))) == []


def test_unit_counts_and_peaks_of_signed_outputs_from_their_magnitudes():
    scratch = ts.Scratch()
    for shape in ((2, 3, 8), (8, 64, 160)):  # below and above the scratch buffer's size
        x = torch.randn(shape)
        x[0, 0, :3] = 0.0
        x[1, 1, 2:5] = -0.0
        x[:, :, 7] = 0.0  # a dead unit
        capture = st.StepCapture(BINS, scratch)
        entry, scalars, vectors = capture.measure_clean("l", x, 2, None, peaks=True)
        nonzero, sums, peaks = (v.numpy() for v in vectors)
        np.testing.assert_array_equal(nonzero, (x != 0).sum(dim=(0, 1)).float().numpy())
        np.testing.assert_allclose(sums, x.sum(dim=(0, 1)).numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(peaks, x.abs().amax(dim=(0, 1)).numpy())
        assert entry.peaks and entry.units == shape[2]


def small_tensors() -> dict[str, torch.Tensor]:
    """Biases and norm scales as a model has them: some zeros, one strided, one all positive."""
    torch.manual_seed(1)
    out = {f"bias {i}": torch.randn(64 + 50 * i) * 0.1 for i in range(9)}
    out["bias 0"][::4] = 0.0
    out["norm scale"] = 1.0 + torch.rand(128) * 1e-3  # the moments cancel in float32
    out["strided"] = torch.randn(600)[::2]
    return out


def expected_summary(x: torch.Tensor) -> dict[str, float]:
    v = x.double().reshape(-1).numpy()
    return {
        "count": v.size,
        "mean": v.mean(),
        "std": v.std(),
        "min": v.min(),
        "max": v.max(),
        "zero_frac": float((v == 0).mean()),
        "nonfinite": 0,
        "norm": float(np.sqrt((v * v).sum())),
    }


def test_small_tensors_measured_together_match_numpy():
    tensors = small_tensors()
    assert all(ts.batchable(x) for x in tensors.values())
    assert len(tensors) >= ts.BATCH_MIN
    capture = st.StepCapture(BINS, ts.Scratch(), hg.BinCache())
    items = [((name, "gradient"), x, known_range(-0.3, 0.3)) for name, x in tensors.items()]
    measured = capture.measure_clean_many(items)
    assert all(m[0].known is not None for m in measured)  # all of them in the batch
    for m in measured:
        capture.add_measured(m)
    capture.add_raw_many([((name, "weight"), x, None) for name, x in tensors.items()])
    flat, _ = capture.to_host()
    results = st.combine(capture.entries, flat)
    for name, x in tensors.items():
        expected = expected_summary(x)
        for signal in ("gradient", "weight"):
            got = st.summarize(results[(name, signal)].stats)
            for key, value in expected.items():
                assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), (name, key)
        sample, _ = hg.hist_sample(x.reshape(-1))
        counts = results[(name, "gradient")].hist
        assert np.abs(counts - reference_counts(sample, -0.3, 0.3)).sum() <= 2, name


def test_a_non_finite_small_tensor_sends_the_batch_the_clean_way():
    tensors = small_tensors()
    tensors["bias 3"][5] = float("nan")
    tensors["bias 4"][7] = float("inf")
    capture = st.StepCapture(BINS, ts.Scratch(), hg.BinCache())
    measured = capture.measure_clean_many([((n, "gradient"), x, None) for n, x in tensors.items()])
    assert all(m[0].known is None for m in measured)
    for m in measured:
        capture.add_measured(m)
    capture.add_raw_many([((name, "weight"), x, None) for name, x in tensors.items()])
    flat, _ = capture.to_host()
    results = st.combine(capture.entries, flat)
    for signal in ("gradient", "weight"):
        assert st.summarize(results[("bias 3", signal)].stats)["nonfinite"] == 1
        assert st.summarize(results[("bias 4", signal)].stats)["nonfinite"] == 1
        clean = tensors["bias 2"]
        got = st.summarize(results[("bias 2", signal)].stats)
        assert got["mean"] == pytest.approx(float(clean.double().mean()), rel=1e-5)
        assert got["nonfinite"] == 0


@pytest.mark.parametrize("n", [1000, ts.SCRATCH_MIN, 3 * ts.SCRATCH_MIN + 5])
def test_tensors_without_units_count_their_nonzero_values_exactly(n):
    """Below and above the scratch buffer's size (where the signs go into the buffer),
    -0.0 counted as zero, measured clean (gradients) and raw (weights)."""
    torch.manual_seed(2)
    x = torch.randn(n)
    x[::3] = 0.0
    x[1::7] = -0.0
    capture = st.StepCapture(BINS, ts.Scratch())
    capture.add_clean(("l", "gradient"), x.view(-1, 5) if n % 5 == 0 else x)
    capture.add_raw(("l", "weight"), x.clone())
    flat, _ = capture.to_host()
    results = st.combine(capture.entries, flat)
    expected = expected_summary(x)
    for signal in ("gradient", "weight"):
        got = st.summarize(results[("l", signal)].stats)
        assert got["zero_frac"] == expected["zero_frac"]
        for key in ("count", "mean", "std", "min", "max", "norm"):
            assert got[key] == pytest.approx(expected[key], rel=1e-5, abs=1e-6), (signal, key)


def test_tensors_measured_without_zeros_have_no_zero_fraction_and_every_other_statistic():
    """``zeros=False`` (a gradient between distribution steps): the zero fraction reads
    NaN, "not measured", never 1.0 or 0.0; the rest is as with zeros; small tensors
    measured together, large ones, and non-finite ones alike."""
    torch.manual_seed(4)
    tensors = {f"small {i}": torch.randn(40) for i in range(ts.BATCH_MIN)}
    tensors["large"] = torch.randn(3 * ts.SCRATCH_MIN)
    tensors["large"][::4] = 0.0
    tensors["nan"] = torch.randn(500)
    tensors["nan"][7] = float("nan")
    for zeros in (True, False):
        capture = st.StepCapture(BINS, ts.Scratch())
        items = [(name, x, None) for name, x in tensors.items()]
        for measured in capture.measure_clean_many(items, zeros=zeros):
            capture.add_measured(measured)
        capture.add_clean("large again", tensors["large"], zeros=zeros)
        flat, _ = capture.to_host()
        results = st.combine(capture.entries, flat)
        for name, x in [*tensors.items(), ("large again", tensors["large"])]:
            got = st.summarize(results[name].stats)
            expected = expected_summary(x[torch.isfinite(x)])
            if zeros:
                assert got["zero_frac"] == pytest.approx(float((x == 0).double().mean()))
            else:
                assert np.isnan(got["zero_frac"]), name
            assert got["nonfinite"] == int((~torch.isfinite(x)).sum()), name
            for key in ("mean", "std", "min", "max", "norm"):
                assert got[key] == pytest.approx(expected[key], rel=1e-5, abs=1e-6), (name, key)


@pytest.mark.parametrize("kind", ["signed", "nonnegative", "all negative", "nan", "inf"])
def test_unit_peaks_and_extremes_from_each_units_largest_and_smallest_value(kind):
    """Each unit's peak is max |x|, the tensor's min and max those of all its values;
    a non-finite value sends it the clean way (and is counted)."""
    torch.manual_seed(3)
    x = torch.randn(4, 6, 10)
    if kind == "nonnegative":
        x = x.relu()
    elif kind == "all negative":
        x = -x.abs() - 0.5
    x[:, :, 3] = -0.0  # a dead unit
    if kind == "nan":
        x[1, 2, 5] = float("nan")
    elif kind == "inf":
        x[2, 1, 6] = float("-inf")
    capture = st.StepCapture(BINS, ts.Scratch())
    capture.add_clean(("l", "activation"), x, 2, None, peaks=True)
    flat, _ = capture.to_host()
    res = st.combine(capture.entries, flat)[("l", "activation")]
    finite = torch.isfinite(x)
    clean = torch.where(finite, x, torch.zeros(()))
    got = st.summarize(res.stats)
    assert got["min"] == clean[finite].min().item() and got["max"] == clean[finite].max().item()
    assert got["nonfinite"] == int((~finite).sum())
    np.testing.assert_array_equal(res.unit_peak, clean.abs().amax(dim=(0, 1)).numpy())
    np.testing.assert_array_equal(res.unit_nonzero, (clean != 0).sum(dim=(0, 1)).numpy())


def binned_per_element(capture: st.StepCapture) -> torch.Tensor:
    """The step's batched counts as one pass with per-element constants computes them."""
    samples = torch.cat(capture._samples)
    sizes = [t.numel() for t in capture._samples]
    start, scale, first = hg.bin_constants(capture._sample_hists, sizes, samples)
    idx = samples.sub_(start).mul_(scale).clamp_(0, BINS + 1)
    weights = (idx == idx).to(samples.dtype)
    idx = torch.nan_to_num_(idx, nan=0.0)
    total = len(sizes) * (BINS + 2)
    return torch.bincount(idx.long().add_(first), weights, minlength=total)


@pytest.mark.parametrize("scratch", [True, False])
def test_full_samples_binned_as_rows_count_what_per_element_constants_count(scratch):
    """Full samples (as rows) and smaller ones, interleaved, with NaN and infinities, in
    float32 and float64: the counts are those of one per-element pass, to the bin."""
    torch.manual_seed(4)
    tensors = [
        torch.randn(20_000) * 2,  # sampled: a full row
        torch.randn(300),
        torch.randn(hg.HIST_SAMPLE).double(),  # a full row in float64
        torch.randn(50_000),
        torch.randn(7),
    ]
    tensors[1][::17] = float("nan")
    tensors[3][5] = float("inf")
    tensors[4][2] = float("-inf")
    capture = st.StepCapture(BINS, ts.Scratch() if scratch else None, hg.BinCache())
    for i, x in enumerate(tensors):
        capture.add_clean(("l", str(i)), x, None, known_range(-1.0 - i, 1.5 + i))
    assert sum(t.numel() == hg.HIST_SAMPLE for t in capture._samples) == 3
    expected = binned_per_element(capture)
    got = capture._binned()
    assert torch.equal(got.to(expected.dtype), expected)
    kept = sum(int((t == t).sum()) for t in capture._samples)  # NaN weighs nothing
    assert got.sum() == kept


def test_scratch_views_are_kept_by_size_and_follow_a_larger_buffer():
    scratch = ts.Scratch()
    small, large = torch.zeros(10), torch.zeros(1000)
    first = scratch.like(small)
    assert scratch.like(small) is first and first.numel() == 10
    big = scratch.like(large)  # the buffer grows: views of the old one are not handed out
    again = scratch.like(small)
    assert again is not first and again.data_ptr() == big.data_ptr()
    for n in range(1, 200):  # sizes that vary: the views kept stay few
        assert scratch.like(torch.zeros(n)).numel() == n
    assert len(scratch._views) <= 64


@pytest.mark.parametrize("full_row", [False, True])
def test_a_float64_samples_counts_do_not_depend_on_a_float32_one_binned_beside_it(full_row):
    """Values on the bins' edges, in float64 beside a float32 sample: the bin constants are
    taken in the dtype the samples are binned in, so each edge value falls in its own bin."""
    lo, hi = -0.3691406251234567, 0.7123456789012345
    width = (hi - lo) / BINS
    edges = torch.tensor([lo + k * width for k in range(BINS + 1)], dtype=torch.float64)
    x64 = torch.cat([edges, edges + width / 3])
    if full_row:
        x64 = x64.repeat(hg.HIST_SAMPLE // x64.numel() + 1)[: hg.HIST_SAMPLE]

    def counts(*tensors: torch.Tensor) -> np.ndarray:
        capture = st.StepCapture(BINS, ts.Scratch(), hg.BinCache())
        for i, x in enumerate(tensors):
            capture.add_clean(("l", str(i)), x, None, known_range(lo, hi))
        flat, _ = capture.to_host()
        return st.combine(capture.entries, flat)[("l", str(len(tensors) - 1))].hist

    alone = counts(x64)
    assert np.array_equal(counts(torch.randn(100), x64), alone)
    assert np.array_equal(counts(torch.randn(hg.HIST_SAMPLE), x64), alone)
