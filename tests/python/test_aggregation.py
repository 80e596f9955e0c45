"""Aggregators against numpy over random streams: tensors of every float dtype and shape,
broadcast weights, Python floats and ints, NaN values and weights, every nan_strategy."""

import math
import warnings

import numpy as np
import pytest
import torch

import nosync_metrics as nm

NAN = float("nan")
CLASSES = {"mean": nm.MeanMetric, "sum": nm.SumMetric, "min": nm.MinMetric, "max": nm.MaxMetric}


def stream(seed, with_nans):
    """(value, weight) pairs: tensors, 0-dim losses, Python floats and ints, broadcast weights."""
    g = torch.Generator().manual_seed(seed)
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
    for i in range(24):
        kind = i % 6
        if kind == 0:
            x = torch.randn(17, generator=g).to(dtypes[i % 4])
            w = torch.rand(17, generator=g).to(dtypes[(i + 1) % 4])
        elif kind == 1:
            x, w = torch.rand((), generator=g, dtype=torch.float64), 0.5
        elif kind == 2:
            x, w = float(torch.randn(1, generator=g)), 2.0
        elif kind == 3:
            x, w = torch.randn(3, 4, generator=g), torch.rand(4, generator=g)
        elif kind == 4:
            x, w = 3, 1  # Python ints
        else:
            x, w = torch.randn(4, 5, generator=g).t(), 1.0
        if with_nans and i in (5, 9):
            x = torch.full((3,), NAN)
            w = 1.0
        if with_nans and i == 12:
            w = torch.full((17,), NAN, dtype=torch.float64)  # NaN weights count as NaN positions
        yield x, w


def flat(x, w):
    xv = np.asarray(torch.as_tensor(x, dtype=torch.float64).numpy(), dtype=np.float64)
    wv = np.broadcast_to(np.asarray(torch.as_tensor(w, dtype=torch.float64).numpy()), xv.shape)
    return xv.ravel(), wv.ravel()


def expected(kind, pairs, strategy):
    xs, ws = zip(*(flat(x, w) for x, w in pairs))
    x, w = np.concatenate(xs), np.concatenate(ws)
    bad = np.isnan(x) | np.isnan(w)
    if strategy in ("warn", "ignore", "error"):
        x, w = x[~bad], w[~bad]
    elif isinstance(strategy, float):
        x, w = np.where(bad, strategy, x), np.where(bad, 1.0, w)
    if kind == "mean":
        return (w * x).sum() / w.sum()
    if kind == "sum":
        return (w * x).sum()
    return x.min() if kind == "min" else x.max()


def feed(metric, kind, pairs):
    for x, w in pairs:
        metric.update(x, w) if kind in ("mean", "sum") else metric.update(x)


@pytest.mark.parametrize("kind", list(CLASSES))
@pytest.mark.parametrize("strategy", ["warn", "ignore", "disable", 0.25])
def test_streams_match_numpy(kind, strategy):
    pairs = list(stream(3, with_nans=True))
    if kind in ("min", "max"):
        pairs = [(x, 1.0) for x, _ in pairs]  # no weights: the NaN-weight batch is clean here
    metric = CLASSES[kind](nan_strategy=strategy).set_dtype(torch.float64)  # the accumulators' precision
    feed(metric, kind, pairs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = metric.compute().item()
    want = expected(kind, pairs, strategy)
    if math.isnan(want):
        assert math.isnan(value)
    else:
        assert value == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert bool(caught) == (strategy == "warn")


@pytest.mark.parametrize("kind", list(CLASSES))
def test_error_strategy_raises_at_compute_with_counts(kind):
    metric = CLASSES[kind](nan_strategy="error")
    metric.update(torch.tensor([1.0, 2.0]))
    metric.update(torch.tensor([NAN, 3.0, NAN]))
    name = {"mean": "Mean", "sum": "Sum", "min": "Min", "max": "Max"}[kind]
    with pytest.raises(RuntimeError, match=f"{name}: 2 NaN values in 1 update, first at update 1"):
        metric.compute()
    report = metric.bad_input()
    kinds = {"NaN values": 2, "infinite weights": 0} if kind in ("mean", "sum") else {"NaN values": 2}
    assert report["counts"] == kinds and report["updates"] == 1 and report["first_update"] == 1


@pytest.mark.parametrize("strided", [False, True], ids=["cpu_kernels", "aten_path"])
def test_float64_accumulators_whatever_the_dtype(strided):
    m = nm.MeanMetric()
    m.update(torch.tensor([1.0, 2.0]))
    assert m.state_dict()["total"].dtype == torch.float64
    assert m.compute().dtype == torch.get_default_dtype()  # values in the metric's dtype, as TorchMetrics'
    # a float32 metric rounds its value, not its sums: 2^24 + 1 and 1 - 2^-30 are lost in float32
    values = torch.tensor([[16777216.0, 1.0, 1.0 - 2.0**-30, 0.0]], dtype=torch.float64)
    m32 = nm.MeanMetric(dtype=torch.float32)
    for _ in range(3):
        m32.update(torch.stack([values[0], values[0]], 1)[:, 0] if strided else values[0])
    assert m32.state_dict()["total"].dtype == torch.float64 and m32.compute().dtype == torch.float32
    assert m32.compute().item() == np.float32((16777218.0 - 2.0**-30) / 4)


def test_compute_before_update_warns_and_is_nan():
    with pytest.warns(UserWarning, match="called before any update"):
        assert math.isnan(nm.MeanMetric().compute().item())


def test_python_floats_need_no_tensor():
    m = nm.MeanMetric()
    with nm.count_syncs() as syncs:
        m.update(2.0)
        m.update(4.0, 3.0)
    assert syncs.total == 0
    assert m.compute().item() == pytest.approx(14 / 4)


def test_replace_never_touches_the_input():
    x = torch.tensor([1.0, NAN])
    w = torch.tensor([NAN, 2.0])
    m = nm.MeanMetric(nan_strategy=0.0)
    m.update(x, w)
    assert math.isnan(x[1].item()) and math.isnan(w[0].item())
    assert m.compute().item() == pytest.approx((0 * 1 + 0 * 1) / 2)


def test_disable_keeps_the_weights():  # TorchMetrics 1.6 gives 2.0 here
    m = nm.MeanMetric(nan_strategy="disable")
    m.update(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([3.0, 1.0, 0.0]))
    assert m.compute().item() == pytest.approx(1.25)


def test_forward_state_dict_merge_clone():
    a, b = nm.MeanMetric(), nm.MeanMetric()
    assert a(torch.tensor([1.0, 3.0])).item() == 2.0
    b.update(torch.tensor([5.0]))
    whole = nm.MeanMetric()
    whole.load_state_dict(a.state_dict())
    whole.merge_state(b)
    assert whole.compute().item() == pytest.approx(3.0)
    dict_merged = nm.MeanMetric()
    dict_merged.merge_state([a.state_dict(), b])
    assert dict_merged.compute().item() == pytest.approx(3.0)
    copy = whole.clone()
    copy.update(100.0)
    assert whole.compute().item() == pytest.approx(3.0)
    assert type(copy) is nm.MeanMetric
    assert whole.to("cpu") is whole and whole.device == torch.device("cpu")
    assert whole.update_count == 2


def test_hundred_million_samples_stay_exact():
    """float64 with compensation: relative error well under 1e-12 after 1e8 float32 samples."""
    m = nm.MeanMetric().set_dtype(torch.float64)
    g = torch.Generator().manual_seed(0)
    exact = 0.0
    total = 0
    for _ in range(100):
        batch = torch.rand(1_000_000, generator=g) + 0.5
        m.update(batch)
        exact += float(np.sum(batch.numpy().astype(np.longdouble)))
        total += batch.numel()
    assert abs(m.compute().item() - exact / total) / (exact / total) <= 1e-12


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", ["normal", "offset", "wide"])
def test_within_batch_sum_is_at_least_as_exact_as_torch_sum(kind, seed):
    rng = np.random.default_rng(seed)
    n = 1 << 18
    x = {"normal": rng.normal(size=n), "offset": rng.uniform(size=n) + 1e8,
         "wide": rng.normal(size=n) * 10.0 ** rng.integers(-8, 9, n)}[kind]
    exact = math.fsum(x)
    total = nm.SumMetric().set_dtype(torch.float64)
    total.update(torch.tensor(x))
    ours = abs(total.compute().item() - exact)
    theirs = abs(torch.tensor(x).sum().item() - exact)
    assert ours <= theirs + 2 * np.finfo(np.float64).eps * abs(exact)
    plain = abs(float(np.cumsum(x)[-1]) - exact)  # what a running sum loses, for scale
    assert ours <= plain


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", ["normal", "offset", "wide", "cancelling"])
@pytest.mark.parametrize("weights", ["ones", "random"])
def test_within_batch_weighted_sum_is_at_least_as_exact_as_torch_sum(kind, weights, seed):
    # float32 values and weights: their products are exact in float64, so fsum of them is the truth
    rng = np.random.default_rng(seed)
    n = 1 << 16
    x = {"normal": rng.normal(size=n), "offset": rng.uniform(size=n) + 1e4,
         "wide": rng.normal(size=n) * 10.0 ** rng.integers(-8, 9, n),
         "cancelling": np.concatenate([[1e16, -1e16], np.ones(n - 2)])}[kind].astype(np.float32)
    w = (np.ones(n) if weights == "ones" else rng.uniform(size=n)).astype(np.float32)
    products = x.astype(np.float64) * w.astype(np.float64)
    exact = math.fsum(products)
    total = nm.SumMetric().set_dtype(torch.float64)
    total.update(torch.tensor(x), torch.tensor(w))  # contiguous: the CPU kernel
    ours = abs(total.compute().item() - exact)
    theirs = abs(torch.tensor(products).sum().item() - exact)
    assert ours <= theirs + 2 * np.finfo(np.float64).eps * abs(exact)


@pytest.mark.parametrize("cls, expected", [(nm.SumMetric, 1.0), (nm.MeanMetric, 1 / 3)])
@pytest.mark.parametrize("strategy", ["warn", "error", "ignore", "disable", 7.0])
def test_a_stream_split_and_merged_is_the_one_stream(cls, expected, strategy):
    """1e16, 1, -1e16 in three metrics: merging them keeps what adding their totals rounds off (1e16 + 1
    is 1e16 in float64), as one metric's updates keep it; with a tally in the state or without."""
    parts = [cls(nan_strategy=strategy) for _ in range(3)]
    for part, v in zip(parts, [1e16, 1.0, -1e16]):
        part.update(torch.tensor([v], dtype=torch.float64))
    one = cls(nan_strategy=strategy).set_dtype(torch.float64)
    for v in [1e16, 1.0, -1e16]:
        one.update(torch.tensor([v], dtype=torch.float64))
    listed = cls(nan_strategy=strategy).set_dtype(torch.float64)
    listed.merge_state(parts)
    one_by_one = cls(nan_strategy=strategy).set_dtype(torch.float64)
    for part in parts:
        one_by_one.merge_state(part.state_dict() if part is parts[0] else part)
    assert one.compute().item() == listed.compute().item() == one_by_one.compute().item() == expected


@pytest.mark.parametrize("cls, expected", [(nm.SumMetric, 2.0), (nm.MeanMetric, 0.5)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("weighted", [False, True])
def test_a_batch_keeps_what_its_own_sum_rounded_off(cls, expected, dtype, weighted):
    """[1e16, 1] then [-1e16, 1]: each batch's sum rounds its 1 off; the state keeps it, so two batches
    give what one batch of all four gives."""
    m = cls().set_dtype(torch.float64)
    for batch in ([1e16, 1.0], [-1e16, 1.0]):
        x = torch.tensor(batch, dtype=dtype)
        m.update(x, torch.ones(2, dtype=dtype)) if weighted else m.update(x)
    assert m.compute().item() == expected


def _views(base):
    """Non-contiguous views of `base` ([64, 48]), by what makes them so."""
    return {"transposed": base.t(), "sliced": base[::3, 1::2], "expanded": base[:1].expand(64, 48),
            "negative bit": torch.complex(base, -base).conj().imag}


@pytest.mark.parametrize("kind, weight", [("min", "none"), ("max", "none")] + [
    (kind, weight) for kind in ("mean", "sum") for weight in ("none", "broadcast", "0-dim", "expanded")])
@pytest.mark.parametrize("view", ["transposed", "sliced", "expanded", "negative bit"])
def test_a_non_contiguous_input_counts_as_its_contiguous_copy(kind, weight, view):
    """A strided, expanded or negative-bit CPU value, and a weight broadcast to it, give the state and
    the value of their contiguous copies to the bit (both read by the CPU kernels), within 1e-15 of
    math.fsum."""
    g = torch.Generator().manual_seed(3)
    base = torch.randn(64, 48, generator=g, dtype=torch.float64)
    base *= 10.0 ** torch.randint(-8, 9, (64, 48), generator=g)
    base[0, 5] = NAN  # dropped under "ignore"
    x = _views(base)[view]
    assert not x.is_contiguous() or x.is_neg()
    w = {"none": None, "broadcast": torch.rand(x.shape[-1], generator=g, dtype=torch.float64),
         "0-dim": torch.tensor(0.25, dtype=torch.float64),
         "expanded": torch.rand(1, 1, generator=g, dtype=torch.float64).expand(x.shape)}[weight]
    strided, contiguous = (CLASSES[kind](nan_strategy="ignore").set_dtype(torch.float64) for _ in range(2))
    strided.update(x) if w is None else strided.update(x, w)
    x_copy = x.resolve_neg().contiguous()
    contiguous.update(x_copy) if w is None else contiguous.update(x_copy, w.expand_as(x).contiguous())
    strided.persistent(True)
    contiguous.persistent(True)
    for key, state in strided.state_dict().items():
        assert torch.equal(state, contiguous.state_dict()[key]), key
    assert strided.compute().item() == contiguous.compute().item()
    kept = x_copy[~x_copy.isnan()]
    weights = torch.ones_like(kept) if w is None else w.expand_as(x).contiguous()[~x_copy.isnan()]
    exact = {"sum": math.fsum((kept * weights).tolist()),
             "mean": math.fsum((kept * weights).tolist()) / math.fsum(weights.tolist()),
             "min": kept.min().item(), "max": kept.max().item()}[kind]
    assert strided.compute().item() == pytest.approx(exact, rel=1e-15, abs=0)


@pytest.mark.parametrize("kind", ["mean", "sum"])
@pytest.mark.parametrize("strategy", ["warn", "error", "ignore", "disable", 7.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_weighted_inf_and_nan_mixes_agree_on_both_paths(kind, strategy, dtype):
    """Every (value, weight) pair of a grid with infinities and NaNs, contiguous (the CPU kernels) and
    strided (the ATen ops of the device path): the same value bit for bit and the same counts."""
    grid = [1.5, -2.0, 0.0, math.inf, -math.inf, NAN]
    x = torch.tensor([v for v in grid for _ in grid], dtype=dtype)
    w = torch.tensor([u for _ in grid for u in grid], dtype=dtype)
    results = []
    for strided in (False, True):
        metric = CLASSES[kind](nan_strategy=strategy, dtype=dtype)  # the value's dtype
        for i in range(len(grid)):  # one row of the grid per update, after a clean one
            xs, ws = x[i * len(grid):(i + 1) * len(grid)], w[i * len(grid):(i + 1) * len(grid)]
            if strided:
                xs, ws = torch.stack([xs, xs], 1)[:, 0], torch.stack([ws, ws], 1)[:, 0]
                assert not xs.is_contiguous()
            metric.update(torch.tensor([1.0, 2.0], dtype=dtype), torch.tensor([0.5, 0.25], dtype=dtype))
            metric.update(xs, ws)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = metric.bad_input()
            value = metric.compute().item() if strategy != "error" or report["updates"] == 0 else None
        results.append((value, report))
    (cpu_value, cpu_report), (aten_value, aten_report) = results
    assert aten_report == cpu_report
    if cpu_value is not None and math.isnan(cpu_value):
        assert math.isnan(aten_value)
    else:
        assert aten_value == cpu_value


def test_a_python_float_takes_a_0_dim_weight_tensor_as_in_torchmetrics():
    m = nm.MeanMetric()
    m.update(1.5, weight=torch.tensor(2.0))
    m.update(3.0, torch.tensor(1.0))
    assert m.compute().item() == pytest.approx(2.0)
    with pytest.raises(ValueError, match=r"Mean.update: weight of shape \[2\] is not broadcastable to value of shape"):
        m.update(1.0, torch.ones(2))
    assert m.compute().item() == pytest.approx(2.0)


@pytest.mark.parametrize("cls", [nm.MinMetric, nm.MaxMetric])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_nan_replacement_makes_the_extremum_nan_on_every_path(cls, dtype):
    # replacing NaN by NaN keeps it, so the extremum is NaN (TorchMetrics' value), whatever the layout
    values = torch.tensor([[1.0, float("nan")], [3.0, 4.0]], dtype=dtype)
    for given in (values, values.t(), float("nan")):  # contiguous (CPU kernels), strided (ATen ops), host
        metric = cls(nan_strategy=float("nan"))
        metric.update(given)
        assert torch.isnan(metric.compute()), given
    metric = cls(nan_strategy=float("nan"))
    metric.update(torch.tensor([1.0, 2.0], dtype=dtype))
    assert metric.compute().item() == (1.0 if cls is nm.MinMetric else 2.0)
