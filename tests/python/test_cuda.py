"""CUDA: every metric's update() is sync-free on CUDA tensors (torch.cuda.set_sync_debug_mode("error")
around each update, and no sync-class ATen op counted), its value equals the same metric's on the CPU
(and sklearn's or numpy's where that is easy), bad input is counted on the device and reported like
on the CPU, and collection and aggregator updates captured in a CUDA graph replay like eager updates,
update counter and "first at update k" included.

Every test is named *_cuda and is skipped without a GPU (CI has none). Run them where one is:
bash scripts/test-cuda.sh (the extension built against a CUDA PyTorch).
"""

import contextlib
import inspect
import re
import warnings

import numpy as np
import pytest
import torch

import cuda_launches  # bench/, on the path from conftest.py
import launch_bench
import nosync_metrics as nm
from test_aggregation import expected as aggregator_expected  # an aggregator stream's float64 value

DEVICE = "cuda"
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (CI has none)")

C = 10  # classes
L = 5  # labels
N = 48  # samples in the first batch
BATCHES = 4
NAN = float("nan")


# ------------------------------------------------------------------------------------------ helpers


@contextlib.contextmanager
def sync_debug_error():
    """Any synchronizing CUDA call raises inside; the previous mode is restored after."""
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(previous)


def sync_free(update, batches):
    """Calls update(*batch) per batch (its tensors already on the GPU: a copy from the host is a
    sync of its own) with CUDA's sync debug mode at "error", and checks that count_syncs saw no
    sync-class ATen op either."""
    for batch in batches:
        with nm.count_syncs() as syncs, sync_debug_error():
            update(*batch)
        assert syncs.total == 0, syncs.by_op


def on_device(batch):
    return tuple(x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in batch)


def first_line(error):
    return str(error).splitlines()[0]


def assert_same_state(a, b, rtol=1e-6, atol=1e-9):
    """Two state dicts hold the same tensors (float ones up to rounding), "_version"/"_metric" aside.
    Once a total is NaN or infinite (nan_strategy="disable"), what its compensation holds is left
    out of every value, and each path leaves there what its arithmetic gives: that entry is not
    compared."""
    keys = sorted(k for k in a if not k.startswith("_"))
    assert keys == sorted(k for k in b if not k.startswith("_"))
    for key in keys:
        x, y = a[key].cpu(), b[key].cpu()
        assert x.dtype == y.dtype and x.shape == y.shape, key
        if key.endswith("compensation"):
            kept = finite_totals_entries(key, a, b)
            x, y = x[kept], y[kept]
        if x.is_floating_point():
            torch.testing.assert_close(x, y, rtol=rtol, atol=atol, equal_nan=True, msg=key)
        else:
            assert torch.equal(x, y), (key, x, y)


def finite_totals_entries(key, a, b):
    """Which entries of compensation `key` to compare: all but those of totals that are not finite
    in state dict a or b. A float64 state's compensation covers its packed counts: the update count,
    then the totals, then the tally (src/aggregation/aggregation.cpp); a float32 one, the totals."""
    prefix = key[: -len("compensation")]
    total_a, total_b = a[prefix + "total"].cpu(), b[prefix + "total"].cpu()
    start = 0 if a[key].numel() == total_a.numel() else a[prefix + "update_count"].numel()
    kept = torch.ones(a[key].numel(), dtype=torch.bool)
    kept[start:start + total_a.numel()] = total_a.isfinite() & total_b.isfinite()
    return kept


def assert_same_value(gpu_value, cpu_value):
    assert gpu_value.device.type == "cuda"
    torch.testing.assert_close(gpu_value.cpu(), cpu_value, rtol=1e-6, atol=1e-6, equal_nan=True)


def batches(task, seed, *, count=BATCHES, same_size=False, ignore_index=None, weighted=False, logits=False,
            bad=()):
    """CPU batches (preds, target[, weight]); in the batches listed in `bad`, three targets are out of
    range and one prediction is NaN."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for b in range(count):
        n = N if same_size else N + 8 * b
        if task == "multiclass":
            preds = torch.randn(n, C, generator=g)
            target = torch.randint(0, C, (n,), generator=g)
        elif task == "binary":
            preds = torch.randn(n, generator=g) * 3 if logits else torch.rand(n, generator=g)
            target = torch.randint(0, 2, (n,), generator=g)
        else:
            preds = torch.randn(n, L, generator=g) * 3 if logits else torch.rand(n, L, generator=g)
            target = torch.randint(0, 2, (n, L), generator=g)
        if ignore_index is not None:
            target[torch.rand(target.shape, generator=g) < 0.2] = ignore_index
        if b in bad:
            target.view(-1)[:3] = C + 2 if task == "multiclass" else 2
            preds.view(-1)[-1] = NAN
        batch = (preds, target)
        if weighted:
            batch += (torch.rand(n, generator=g, dtype=torch.float64) + 0.1,)
        out.append(batch)
    return out


# ------------------------------------------------------------------- the harness catches a sync at all


def test_sync_debug_mode_error_catches_a_read_back_and_is_restored_cuda():
    x = torch.randn(8, device=DEVICE)
    previous = torch.cuda.get_sync_debug_mode()
    with pytest.raises(RuntimeError, match="synchronizing"):
        with sync_debug_error():
            x.sum().item()
    assert torch.cuda.get_sync_debug_mode() == previous


# ---------------------------------------------------------------------------- classification metrics

FAMILIES = ["Accuracy", "Precision", "Recall", "F1Score", "FBetaScore", "StatScores", "ConfusionMatrix"]
PREFIX = {"binary": "Binary", "multiclass": "Multiclass", "multilabel": "Multilabel"}
# Option sets per task; keys a class does not take are dropped (duplicates then too). "_logits" and
# "_ignored" choose the data, not the metric.
OPTION_SETS = {
    "multiclass": [
        {}, {"average": "micro"}, {"average": None}, {"average": "weighted"}, {"top_k": 2},
        {"top_k": 2, "average": "micro"}, {"top_k": 2, "average": None}, {"ignore_index": 3},
        {"ignore_index": -1, "average": "micro"}, {"weighted": True}, {"weighted": True, "average": None},
        {"weighted": True, "ignore_index": 3, "average": "weighted"}, {"zero_division": 1, "average": None},
        {"normalize": "true"}, {"normalize": "all", "weighted": True},
    ],
    "binary": [
        {}, {"threshold": 0.3}, {"_logits": True}, {"ignore_index": -1}, {"weighted": True},
        {"weighted": True, "_logits": True, "ignore_index": -1}, {"normalize": "pred"},
    ],
    "multilabel": [
        {}, {"average": "micro"}, {"average": None}, {"average": "weighted"}, {"threshold": 0.3, "_logits": True},
        {"ignore_index": -1}, {"weighted": True, "average": "micro"}, {"weighted": True, "normalize": "true"},
    ],
}


def _metric_kwargs(cls, task, options):
    accepted = inspect.signature(cls.__init__).parameters
    kwargs = {k: v for k, v in options.items() if k in accepted}
    if task == "multiclass":
        kwargs["num_classes"] = C
    elif task == "multilabel":
        kwargs["num_labels"] = L
    if "beta" in accepted:
        kwargs["beta"] = 0.5
    return kwargs


def _cases():
    cases, ids, seen = [], [], set()
    for task, option_sets in OPTION_SETS.items():
        for family in FAMILIES:
            cls = getattr(nm, PREFIX[task] + family)
            for options in option_sets:
                kwargs = _metric_kwargs(cls, task, options)
                data = {k: v for k, v in options.items() if k.startswith("_")}
                key = (cls.__name__, repr(sorted(kwargs.items())), repr(sorted(data.items())))
                if key in seen:
                    continue
                seen.add(key)
                cases.append((cls, task, kwargs, bool(data.get("_logits"))))
                shown = {k: v for k, v in kwargs.items() if k not in ("num_classes", "num_labels", "beta")}
                ids.append(f"{cls.__name__}-" + ",".join(f"{k}={v}" for k, v in {**shown, **data}.items()))
    return cases, ids


CASES, CASE_IDS = _cases()


@pytest.mark.parametrize("cls, task, kwargs, logits", CASES, ids=CASE_IDS)
def test_classification_updates_are_sync_free_and_equal_the_cpu_cuda(cls, task, kwargs, logits):
    data = batches(task, seed=len(kwargs) * 7 + 1, ignore_index=kwargs.get("ignore_index"),
                   weighted=kwargs.get("weighted", False), logits=logits)
    cpu, gpu = cls(**kwargs), cls(**kwargs, device=DEVICE)
    assert gpu.device.type == "cuda"
    for batch in data:
        cpu.update(*batch)
    sync_free(gpu.update, [on_device(b) for b in data])
    assert gpu.update_count == cpu.update_count == len(data)
    assert_same_value(gpu.compute(), cpu.compute())
    assert_same_state(gpu.state_dict(), cpu.state_dict())


@pytest.mark.parametrize("task, make", [
    ("multiclass", lambda **k: nm.MulticlassF1Score(num_classes=C, multidim_average="samplewise", top_k=2, **k)),
    ("binary", lambda **k: nm.BinaryStatScores(multidim_average="samplewise", **k)),
    ("multilabel", lambda **k: nm.MultilabelRecall(num_labels=L, multidim_average="samplewise", average=None, **k)),
])
def test_samplewise_updates_are_sync_free_and_equal_the_cpu_cuda(task, make):
    # (N, ..., 3): each sample spans three positions
    data = [tuple(x.unsqueeze(-1).expand(*x.shape, 3).contiguous() for x in batch)
            for batch in batches(task, seed=77, bad=(1,))]
    cpu, gpu = make(), make(device=DEVICE)
    for batch in data:
        cpu.update(*batch)
    sync_free(gpu.update, [on_device(b) for b in data])
    assert_same_state(gpu.state_dict(), cpu.state_dict())
    with pytest.raises(ValueError) as gpu_error:
        gpu.compute()
    with pytest.raises(ValueError) as cpu_error:
        cpu.compute()
    assert first_line(gpu_error.value) == first_line(cpu_error.value)


def test_classification_values_match_sklearn_cuda():
    from sklearn import metrics as skm

    data = batches("multiclass", seed=3, ignore_index=-1)
    target = torch.cat([t for _, t in data]).numpy()
    pred = torch.cat([p.argmax(1) for p, _ in data]).numpy()
    keep = target != -1
    t, p = target[keep], pred[keep]
    metrics = {
        "cm": (nm.MulticlassConfusionMatrix(num_classes=C, ignore_index=-1, device=DEVICE),
               skm.confusion_matrix(t, p, labels=list(range(C)))),
        "acc": (nm.MulticlassAccuracy(num_classes=C, average="micro", ignore_index=-1, device=DEVICE),
                skm.accuracy_score(t, p)),
        "recall": (nm.MulticlassRecall(num_classes=C, average=None, ignore_index=-1, device=DEVICE),
                   skm.recall_score(t, p, labels=list(range(C)), average=None, zero_division=0)),
        "f1": (nm.MulticlassF1Score(num_classes=C, average="macro", ignore_index=-1, device=DEVICE),
               skm.f1_score(t, p, average="macro", zero_division=0)),
    }
    for name, (metric, expected) in metrics.items():
        sync_free(metric.update, [on_device(b) for b in data])
        np.testing.assert_allclose(metric.compute().cpu().numpy(), expected, atol=1e-6, err_msg=name)

    data = batches("binary", seed=4, logits=True, weighted=True)
    target = torch.cat([t for _, t, _ in data]).numpy()
    pred = (torch.cat([p for p, _, _ in data]) > 0).long().numpy()  # logits: sigmoid(x) > 0.5 is x > 0
    weight = torch.cat([w for _, _, w in data]).numpy()
    f1 = nm.BinaryF1Score(weighted=True, device=DEVICE)
    sync_free(f1.update, [on_device(b) for b in data])
    np.testing.assert_allclose(f1.compute().item(), skm.f1_score(target, pred, sample_weight=weight), rtol=1e-6)

    data = batches("multilabel", seed=5)
    target = torch.cat([t for _, t in data]).numpy()
    pred = (torch.cat([p for p, _ in data]) > 0.5).long().numpy()
    precision = nm.MultilabelPrecision(num_labels=L, average="micro", device=DEVICE)
    sync_free(precision.update, [on_device(b) for b in data])
    np.testing.assert_allclose(precision.compute().item(), skm.precision_score(target, pred, average="micro"),
                               rtol=1e-6)


BAD_CASES = [(getattr(nm, PREFIX[task] + family), task) for task in OPTION_SETS
             for family in ["Accuracy", "F1Score", "StatScores", "ConfusionMatrix"]]


@pytest.mark.parametrize("validate_args", [True, False])
@pytest.mark.parametrize("cls, task", BAD_CASES, ids=[c.__name__ for c, _ in BAD_CASES])
def test_bad_input_is_counted_on_the_gpu_and_reported_like_the_cpu_cuda(cls, task, validate_args):
    data = batches(task, seed=9, bad=(1, 3))
    kwargs = _metric_kwargs(cls, task, {"validate_args": validate_args})
    cpu, gpu = cls(**kwargs), cls(**kwargs, device=DEVICE)
    for batch in data:
        cpu.update(*batch)
    sync_free(gpu.update, [on_device(b) for b in data])
    assert gpu.bad_input() == cpu.bad_input()
    assert_same_state(gpu.state_dict(), cpu.state_dict())
    if validate_args:
        assert gpu.bad_input()["first_update"] == 1 and gpu.bad_input()["updates"] == 2
        with pytest.raises(ValueError) as on_cpu:
            cpu.compute()
        assert "in 2 updates, first at update 1 (kept out of the state)" in str(on_cpu.value)
        with pytest.raises(ValueError, match=re.escape(first_line(on_cpu.value))):
            gpu.compute()
    else:
        assert_same_value(gpu.compute(), cpu.compute())


def test_out_of_range_targets_never_reach_the_confusion_matrix_cuda():
    from sklearn import metrics as skm

    data = batches("multiclass", seed=10, bad=(0, 2))
    metric = nm.MulticlassConfusionMatrix(num_classes=C, validate_args=False, device=DEVICE)
    sync_free(metric.update, [on_device(b) for b in data])
    target = torch.cat([t for _, t in data])
    preds = torch.cat([p for p, _ in data])
    keep = ((target >= 0) & (target < C) & ~preds.isnan().any(1)).numpy()
    expected = skm.confusion_matrix(target.numpy()[keep], preds.argmax(1).numpy()[keep], labels=list(range(C)))
    np.testing.assert_array_equal(metric.compute().cpu().numpy(), expected)



@pytest.mark.parametrize("weight_dtype", [None, torch.float32, torch.float64])  # float64: checked apart
@pytest.mark.parametrize("classes", [20, 100, 300, 5000])  # CUDA's sort: bitonic, warp merge, radix, segmented
def test_top_k_drops_rows_with_a_nan_of_either_sign_like_the_cpu_cuda(classes, weight_dtype):
    """CUDA's radix sorts order NaN by its bits: a NaN with the sign bit set sorts below -inf, last
    in a descending sort. A row holding one must still be dropped and counted as a bad prediction,
    once where it holds a NaN of each sign (weighted, the device path checks each end of the sort)."""
    g = torch.Generator().manual_seed(11)
    scores = torch.randn(64, classes, generator=g)
    scores[::5, classes // 3] = NAN
    scores[2::7, classes - 2] = -NAN
    assert torch.signbit(scores[2, classes - 2])
    target = torch.randint(0, classes, (64,), generator=g)
    weighted = weight_dtype is not None
    inputs = (scores, target, torch.rand(64, generator=g, dtype=weight_dtype)) if weighted else (scores, target)
    cpu = nm.MulticlassStatScores(num_classes=classes, top_k=3, average=None, weighted=weighted)
    gpu = nm.MulticlassStatScores(num_classes=classes, top_k=3, average=None, weighted=weighted, device=DEVICE)
    cpu.update(*inputs)
    sync_free(gpu.update, [on_device(inputs)])
    assert gpu.bad_input() == cpu.bad_input()
    nan_rows = len(range(0, 64, 5)) + len(range(2, 64, 7)) - 1  # row 30 has both
    assert cpu.bad_input()["counts"]["NaN or out-of-range predictions"] == nan_rows
    assert_same_state(gpu.state_dict(), cpu.state_dict())


@pytest.mark.parametrize("make, task", [
    (lambda d: nm.MulticlassAccuracy(num_classes=C, device=d), "multiclass"),
    (lambda d: nm.MulticlassF1Score(num_classes=C, average=None, top_k=2, device=d), "multiclass"),
    (lambda d: nm.BinaryConfusionMatrix(normalize="true", device=d), "binary"),
    (lambda d: nm.MultilabelFBetaScore(2.0, num_labels=L, average="weighted", device=d), "multilabel"),
], ids=["MulticlassAccuracy", "MulticlassF1Score-top2", "BinaryConfusionMatrix-normalized", "MultilabelFBetaScore"])
def test_forward_is_sync_free_and_returns_the_cpu_batch_values_cuda(make, task):
    data = batches(task, seed=12)
    cpu, gpu = make("cpu"), make(DEVICE)
    batch_values = []
    sync_free(lambda *b: batch_values.append(gpu.forward(*b)), [on_device(b) for b in data])
    for batch, value in zip(data, batch_values):
        assert_same_value(value, cpu.forward(*batch))
    assert_same_value(gpu.compute(), cpu.compute())


def test_task_wrappers_and_to_cuda_cuda():
    data = batches("multiclass", seed=13)
    metric = nm.Accuracy(task="multiclass", num_classes=C)  # CPU first, then moved
    reference = nm.MulticlassAccuracy(num_classes=C, average="micro")
    metric.update(*data[0])
    metric.to(DEVICE)
    assert metric.device.type == "cuda"
    sync_free(metric.update, [on_device(b) for b in data[1:]])
    for batch in data:
        reference.update(*batch)
    assert_same_value(metric.compute(), reference.compute())
    assert metric.update_count == len(data)


# ------------------------------------------------------------------------------------- aggregators

STRATEGIES = ["error", "warn", "ignore", "disable", 0.5]
AGGREGATORS = {"mean": nm.MeanMetric, "sum": nm.SumMetric, "min": nm.MinMetric, "max": nm.MaxMetric}


def aggregator_stream(weighted):
    """(value, weight) pairs: tensors of every float dtype with NaN values, 0-dim losses, Python
    floats and ints, broadcast weights, a NaN weight."""
    g = torch.Generator().manual_seed(21)
    x0 = torch.randn(100, generator=g)
    x0[7] = NAN
    x3 = torch.randn(4, 8, generator=g).half()
    x3[1, 2] = NAN
    w5 = torch.rand(10, generator=g, dtype=torch.float64)
    w5[3] = NAN
    stream = [
        (x0, torch.rand(100, generator=g)),
        (torch.rand((), generator=g, dtype=torch.float64), 0.5),
        (2.0, 2.0),
        (x3, torch.rand(8, generator=g, dtype=torch.float64)),
        (torch.randn(16, generator=g).bfloat16(), 1.0),
        (torch.randn(10, generator=g, dtype=torch.float64), w5),
        (3, 1),
    ]
    return stream if weighted else [(x, 1.0) for x, _ in stream]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("kind", AGGREGATORS)
def test_aggregator_updates_are_sync_free_in_every_nan_strategy_cuda(kind, strategy):
    cls = AGGREGATORS[kind]
    weighted = kind in ("mean", "sum")
    stream = aggregator_stream(weighted)
    updates = [(x, w) if weighted else (x,) for x, w in stream]
    # values in float64: the accumulators' precision
    cpu, gpu = (cls(nan_strategy=strategy, device=d).set_dtype(torch.float64) for d in ("cpu", DEVICE))
    for args in updates:
        cpu.update(*args)
    sync_free(gpu.update, [on_device(args) for args in updates])
    assert gpu.update_count == len(updates)
    assert gpu.bad_input() == cpu.bad_input()
    assert_same_state(gpu.state_dict(), cpu.state_dict(), rtol=1e-9, atol=1e-9)
    if strategy == "error":
        with pytest.raises(RuntimeError) as on_cpu:
            cpu.compute()
        assert "first at update 0" in str(on_cpu.value)
        with pytest.raises(RuntimeError, match=re.escape(first_line(on_cpu.value))):
            gpu.compute()
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = gpu.compute()
        expected = cpu.compute()
    if strategy == "warn":
        assert any("first at update 0" in str(w.message) for w in caught)
    assert_same_value(value, expected)
    if strategy != "disable":
        np.testing.assert_allclose(value.item(), aggregator_expected(kind, stream, strategy), rtol=1e-12)
    elif kind in ("mean", "sum"):
        assert np.isnan(value.item())


def test_float32_metrics_on_the_gpu_cuda():
    x = torch.randn(1000, generator=torch.Generator().manual_seed(22))
    cpu, gpu = nm.MeanMetric(dtype=torch.float32), nm.MeanMetric(dtype=torch.float32, device=DEVICE)
    cpu.update(x)
    sync_free(gpu.update, [(x.to(DEVICE),), (x.to(DEVICE), 0.0)])
    assert gpu.compute().dtype == torch.float32
    assert_same_value(gpu.compute(), cpu.compute())


def test_count_syncs_with_cuda_sync_debug_counts_none_in_update_and_the_read_backs_of_cpp_calls_cuda():
    x = torch.randn(100, device=DEVICE)
    metric = nm.MeanMetric(device=DEVICE)
    previous = torch.cuda.get_sync_debug_mode()
    with nm.count_syncs(cuda_sync_debug=True) as syncs:
        metric.update(x)
        metric.update(x, 0.5)
    assert (syncs.total, syncs.cuda_syncs) == (0, 0)
    assert torch.cuda.get_sync_debug_mode() == previous
    with nm.count_syncs(cuda_sync_debug=True) as syncs:
        assert metric.update_count == 2  # a read-back from the device, in C++
    assert syncs.cuda_syncs >= 1
    assert torch.cuda.get_sync_debug_mode() == previous


# Findings: count_syncs(cuda_sync_debug=True) counts the sync debug mode's warnings through a C++
# warning handler, so it misses the syncs that run under another handler: torch's own Python bindings
# (torch::PyWarningHandler, for the length of each call) and our compute() (with_python_warnings).
@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "count_syncs(cuda_sync_debug=True).cuda_syncs is 0 around float(x.sum()) from Python (torch 2.11: "
    "'assert 0 >= 1', count_syncs(total=1, by_op={'aten::item': 1})): torch's Python binding of item() "
    "installs its own torch::PyWarningHandler for the call, so the 'called a synchronizing CUDA operation' "
    "warning becomes a Python UserWarning and never reaches the counter's WarningCapture"))
def test_count_syncs_with_cuda_sync_debug_counts_a_python_read_back_cuda():
    x = torch.randn(100, device=DEVICE)
    with nm.count_syncs(cuda_sync_debug=True) as syncs:
        float(x.sum())
    assert syncs.total >= 1  # aten::item, counted by the op observer
    assert syncs.cuda_syncs >= 1, "the sync debug mode's report of item() from Python"


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "count_syncs(cuda_sync_debug=True).cuda_syncs is 0 around metric.compute(): the binding runs compute() "
    "inside with_python_warnings (bindings/common.h), whose WarningCapture takes every warning, the sync debug "
    "mode's included, and re-emits it as a UserWarning"))
def test_count_syncs_with_cuda_sync_debug_counts_the_read_backs_of_compute_cuda():
    metric = nm.MeanMetric(device=DEVICE)
    metric.update(torch.randn(100, device=DEVICE))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with nm.count_syncs(cuda_sync_debug=True) as syncs:
            metric.compute()  # reads the update count and the bad-input tally back
    assert syncs.cuda_syncs >= 1, "the sync debug mode's report of compute()'s read-back"


# ---------------------------------------------------------------------------------------- collections


def _mixed(device):
    return nm.MetricCollection({
        "loss": nm.MeanMetric(device=device),
        "worst": nm.MaxMetric(device=device),
        "acc": nm.MulticlassAccuracy(num_classes=C, device=device),
        "top2": nm.MulticlassAccuracy(num_classes=C, top_k=2, average="micro", device=device),
        "f1": nm.MulticlassF1Score(num_classes=C, average=None, device=device),
        "cm": nm.MulticlassConfusionMatrix(num_classes=C, device=device),
    })


def test_a_mixed_collection_updated_by_keyword_is_sync_free_and_equals_the_cpu_cuda():
    g = torch.Generator().manual_seed(31)
    cpu, gpu = _mixed("cpu").set_dtype(torch.float64), _mixed(DEVICE).set_dtype(torch.float64)
    losses, steps = [], []
    for preds, target in batches("multiclass", seed=32):
        loss = torch.rand(len(target), generator=g)
        losses.append(loss)
        cpu.update(value=loss, preds=preds, target=target)
        steps.append(on_device((loss, preds, target)))
    sync_free(lambda loss, preds, target: gpu.update(value=loss, preds=preds, target=target), steps)
    expected = cpu.compute()
    values = gpu.compute()
    assert values.keys() == expected.keys()
    for key, value in values.items():
        assert_same_value(value, expected[key])
    every = torch.cat(losses).double()
    assert values["loss"].item() == pytest.approx(every.mean().item(), rel=1e-12)
    assert values["worst"].item() == every.max().item()
    assert_same_state(gpu.state_dict(), cpu.state_dict())


# ----------------------------------------------------------------------------------------- CUDA graphs

REPLAYS = 6
WARMUP = 3
BAD_REPLAY = 2  # a target out of range in this replay
NAN_REPLAY = 4  # a NaN loss in this replay


def _graph_collection(task, device):
    if task.startswith("multiclass"):
        w = {"weighted": task.endswith("weighted")}
        metrics = {"acc": nm.MulticlassAccuracy(num_classes=C, device=device, **w),
                   "f1": nm.MulticlassF1Score(num_classes=C, average=None, device=device, **w),
                   "top2": nm.MulticlassRecall(num_classes=C, top_k=2, device=device, **w),
                   "cm": nm.MulticlassConfusionMatrix(num_classes=C, device=device, **w)}
    elif task == "binary":
        metrics = {"acc": nm.BinaryAccuracy(device=device), "f1": nm.BinaryF1Score(device=device),
                   "stats": nm.BinaryStatScores(device=device), "cm": nm.BinaryConfusionMatrix(device=device)}
    else:
        metrics = {"acc": nm.MultilabelAccuracy(num_labels=L, device=device),
                   "precision": nm.MultilabelPrecision(num_labels=L, average="micro", device=device),
                   "cm": nm.MultilabelConfusionMatrix(num_labels=L, device=device)}
    return nm.MetricCollection(metrics)


@pytest.mark.parametrize("warmup", ["reset", "counted"])
@pytest.mark.parametrize("task", ["multiclass", "multiclass-weighted", "binary", "multilabel"])
def test_a_collection_and_a_mean_captured_in_a_cuda_graph_replay_like_eager_updates_cuda(task, warmup):
    base = task.split("-")[0]
    data = batches(base, seed=41, count=REPLAYS, same_size=True, weighted=task.endswith("weighted"))
    data[BAD_REPLAY][1].view(-1)[0] = C + 5 if base == "multiclass" else 2
    losses = torch.rand(REPLAYS, generator=torch.Generator().manual_seed(42))
    losses[NAN_REPLAY] = NAN

    graphed, eager = _graph_collection(task, DEVICE), _graph_collection(task, DEVICE)
    graphed_loss, eager_loss = nm.MeanMetric(device=DEVICE), nm.MeanMetric(device=DEVICE)
    static = [torch.zeros_like(x, device=DEVICE) for x in data[0]]  # zeros: valid labels, weight 0
    static_loss = torch.zeros((), device=DEVICE)

    # Warm-up on a side stream, as PyTorch's CUDA-graph documentation does.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP):
            graphed.update(*static)
            graphed_loss.update(static_loss)
    torch.cuda.current_stream().wait_stream(side)
    if warmup == "reset":
        graphed.reset()
        graphed_loss.reset()
        offset = 0
    else:  # the warm-up updates count: the eager twin gets them too
        for _ in range(WARMUP):
            eager.update(*static)
            eager_loss.update(static_loss)
        offset = WARMUP

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphed.update(*static)
        graphed_loss.update(static_loss)

    for batch, loss in zip(data, losses):
        for dst, src in zip(static, batch):
            dst.copy_(src)
        static_loss.copy_(loss)
        graph.replay()
        eager.update(*on_device(batch))
        eager_loss.update(loss.to(DEVICE))
    torch.cuda.synchronize()

    for name in graphed.keys():
        assert graphed[name].update_count == REPLAYS + offset, name
        assert graphed[name].bad_input() == eager[name].bad_input(), name
    assert graphed_loss.update_count == REPLAYS + offset
    first = next(iter(graphed.keys()))
    assert graphed[first].bad_input()["first_update"] == BAD_REPLAY + offset
    assert graphed[first].bad_input()["updates"] == 1
    assert graphed_loss.bad_input() == eager_loss.bad_input()
    assert graphed_loss.bad_input()["first_update"] == NAN_REPLAY + offset
    assert_same_state(graphed.state_dict(), eager.state_dict(), rtol=1e-12, atol=1e-12)
    assert_same_state(graphed_loss.state_dict(), eager_loss.state_dict(), rtol=1e-12, atol=1e-12)

    with pytest.raises(ValueError, match=rf"in 1 update, first at update {BAD_REPLAY + offset} "):
        graphed.compute()
    with pytest.warns(UserWarning, match=rf"1 NaN value.* first at update {NAN_REPLAY + offset} "):
        value = graphed_loss.compute()
    # The warm-up's zero losses weigh 1 each where they count.
    expected_mean = losses[~losses.isnan()].double().sum() / (REPLAYS - 1 + offset)
    assert value.item() == pytest.approx(expected_mean.item(), rel=1e-6)


def test_a_collection_updated_by_keyword_in_a_cuda_graph_replays_like_eager_updates_cuda():
    graphed, eager = _mixed(DEVICE), _mixed(DEVICE)
    data = batches("multiclass", seed=51, count=REPLAYS, same_size=True)
    losses = [torch.rand(N, generator=torch.Generator().manual_seed(52 + i)) for i in range(REPLAYS)]
    preds, target = (torch.zeros_like(x, device=DEVICE) for x in data[0])
    loss = torch.zeros(N, device=DEVICE)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP):
            graphed.update(value=loss, preds=preds, target=target)
    torch.cuda.current_stream().wait_stream(side)
    graphed.reset()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphed.update(value=loss, preds=preds, target=target)
    for (p, t), l in zip(data, losses):
        preds.copy_(p)
        target.copy_(t)
        loss.copy_(l)
        graph.replay()
        eager.update(value=l.to(DEVICE), preds=p.to(DEVICE), target=t.to(DEVICE))
    torch.cuda.synchronize()
    assert graphed["acc"].update_count == REPLAYS
    assert graphed["loss"].update_count == REPLAYS
    assert_same_state(graphed.state_dict(), eager.state_dict(), rtol=1e-12, atol=1e-12)
    expected = eager.compute()
    for key, value in graphed.compute().items():
        torch.testing.assert_close(value, expected[key], rtol=1e-12, atol=1e-12)


# -------------------------------------------------------------- every launch_bench configuration

UPDATE_CONFIGS = [c for c in launch_bench.configurations() + launch_bench.sweep_configurations() if c.call == "update"]


def counts_bad_input(config):
    """Whether the configuration's metrics count a NaN value or a target out of range."""
    if cuda_launches.is_aggregator(config.name):
        return " warn" in config.name or " error" in config.name
    return "num_classes=None" not in config.name


@pytest.mark.parametrize("config", [c for c in UPDATE_CONFIGS if not c.grows], ids=lambda c: c.name)
def test_every_device_path_configuration_replays_from_a_cuda_graph_cuda(config):
    batches = cuda_launches.replay_batches(config, seed=0)
    graphed, eager = cuda_launches.replayed_from_a_graph(config, batches)
    assert cuda_launches.replay_difference(graphed, eager) is None
    on_cpu = config.make()
    for batch in batches:
        on_cpu.update(*(x.cpu() for x in batch))
    reports = cuda_launches.bad_input_reports(graphed)
    assert reports == cuda_launches.bad_input_reports(on_cpu)
    reports = reports.values() if "updates" not in reports else [reports]
    if counts_bad_input(config):
        assert all(r["updates"] == 1 and r["first_update"] == cuda_launches.BAD_REPLAY for r in reports), reports
    else:
        assert all(r.get("updates", 0) == 0 for r in reports), reports


@pytest.mark.parametrize("config", UPDATE_CONFIGS, ids=lambda c: c.name)
def test_every_device_path_configuration_updates_without_a_sync_or_a_copy_cuda(config):
    metric = config.make().to(DEVICE)
    inputs = cuda_launches.real_inputs(config, seed=1)
    metric.update(*inputs)
    sync_free(metric.update, [inputs, inputs])
    assert cuda_launches.cuda_activity(metric.update, inputs)["host_copies"] == []


def test_out_of_memory_is_torchs_out_of_memory_error_and_counts_nothing_cuda():
    metric = nm.MeanMetric(device="cuda")
    metric.update(torch.ones(4, device="cuda"))
    before = {k: v.clone() for k, v in metric.state_dict().items()}
    free, _ = torch.cuda.mem_get_info()
    huge = torch.ones(1, device="cuda").expand(int(free))  # no memory itself; the update's buffers cannot fit
    with pytest.raises(torch.cuda.OutOfMemoryError, match="MeanMetric|Mean"):
        metric.update(huge, huge)
    assert all(torch.equal(v, before[k]) for k, v in metric.state_dict().items())
    assert metric.compute().item() == 1.0
