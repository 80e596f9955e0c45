"""Hostile use from Python: objects made without a constructor, bad state dicts, bad lists to
merge, infinite weights, several threads. Each call raises a clear error and leaves the state as it
was, or counts exactly what a brute-force loop counts."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

import nosync_metrics as nm


def _same_state(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _accuracy():
    m = nm.MulticlassAccuracy(num_classes=3)
    m.update(torch.tensor([0, 1, 2, 2]), torch.tensor([0, 1, 1, 2]))
    return m


UNCONSTRUCTED = [nm.MeanMetric, nm.SumMetric, nm.MinMetric, nm.MaxMetric, nm.MulticlassAccuracy,
                 nm.BinaryF1Score, nm.MultilabelPrecision, nm.MulticlassConfusionMatrix]


@pytest.mark.parametrize("cls", UNCONSTRUCTED, ids=lambda c: c.__name__)
def test_object_made_by_new_alone_raises_type_error(cls):
    bare = cls.__new__(cls)
    message = f"{cls.__name__} object was made without its constructor"
    # the methods of the C++ base, and those written in Python (which read attributes the constructor sets)
    for call in (lambda: bare.update(torch.tensor([0.5])), bare.reset, bare.state_dict,
                 lambda: bare.load_state_dict({}), lambda: bare.merge_state([]), bare.compute,
                 lambda: bare(torch.tensor([0.5])), bare.clone, lambda: repr(bare),
                 lambda: bare.set_dtype(torch.float64), lambda: bare.to("cpu")):
        with pytest.raises(TypeError, match=message):
            call()
    with pytest.raises(TypeError, match=message):
        cls.merge_state(nm.MeanMetric(), bare) if cls is nm.MeanMetric else nm.MetricCollection([bare])


@pytest.mark.parametrize("base", [nm.MeanMetric, nm.MetricCollection])
def test_hasattr_and_getattr_with_a_default_work_before_the_base_constructor_ran(base):
    # a cooperative mixin asks before it calls its base's __init__
    # (a metric's C++ properties too)
    class Mixed(base):
        def __init__(self, *args):
            self.seen = (hasattr(self, "hooks"), getattr(self, "hooks", []), getattr(self, "device", None),
                         hasattr(self, "update_count"))
            super().__init__(*args)

    made = Mixed() if base is nm.MeanMetric else Mixed([nm.MeanMetric()])
    assert made.seen == (False, [], None, False)


def test_collection_made_by_new_alone_raises_type_error():
    bare = nm.MetricCollection.__new__(nm.MetricCollection)
    for call in (lambda: bare.update(torch.tensor([0.5])), bare.compute, lambda: bare(torch.tensor([0.5])),
                 bare.reset, bare.state_dict, lambda: bare.load_state_dict({}), bare.clone, lambda: repr(bare),
                 lambda: bare.add_metrics(nm.MeanMetric()), lambda: bare["acc"]):
        with pytest.raises(TypeError, match="MetricCollection object was made without its constructor"):
            call()


@pytest.mark.parametrize("key", ["update_count", "tp", "bad_input_counts", "first_bad_update"])
@pytest.mark.parametrize("bad", [-1, 2**62 + 1], ids=["negative", "huge"])  # 2**62: first_bad_update's none
def test_load_state_dict_refuses_bad_counts_and_changes_nothing(key, bad):
    m = _accuracy()
    before = m.state_dict()
    state = m.state_dict()
    state[key] = torch.full_like(state[key], bad)
    with pytest.raises(ValueError, match=f"MulticlassAccuracy.load_state_dict: '{key}' holds {bad}"):
        m.load_state_dict(state)
    assert _same_state(m.state_dict(), before)


@pytest.mark.parametrize("key", ["update_count", "tp", "_version", "_metric"])
def test_load_state_dict_refuses_meta_tensors_and_changes_nothing(key):
    m = _accuracy()
    before = m.state_dict()
    state = m.state_dict()
    state[key] = torch.empty_like(state[key], device="meta")
    with pytest.raises(ValueError, match=f"MulticlassAccuracy.load_state_dict: '{key}'"):
        m.load_state_dict(state)
    assert _same_state(m.state_dict(), before)


def test_merge_state_of_a_list_is_all_or_nothing():
    m = _accuracy()
    before = m.state_dict()
    with pytest.raises(ValueError, match="MulticlassAccuracy.merge: the other metric has other options"):
        m.merge_state([m.clone(), nm.MulticlassAccuracy(num_classes=3, top_k=2)])
    assert _same_state(m.state_dict(), before)
    m.merge_state([m.clone(), m])  # itself included: three times the counts, as in TorchMetrics
    assert torch.equal(m.state_dict()["tp"], 3 * before["tp"])
    assert m.update_count == 3


def test_merge_refuses_a_meta_state():
    m = _accuracy()
    with pytest.raises(ValueError, match="is on the meta device"):
        m.merge_state(nm.MulticlassAccuracy(num_classes=3, device="meta"))


def test_infinite_weights_are_counted_and_kept_out():
    mean = nm.MeanMetric(nan_strategy="warn").set_dtype(torch.float64)
    x, w = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, np.inf, 2.0, -np.inf])
    mean.update(torch.tensor(x), torch.tensor(w))
    keep = np.isfinite(w)
    with pytest.warns(UserWarning, match="Mean: 2 infinite weights in 1 update, first at update 0"):
        assert mean.compute().item() == pytest.approx((x[keep] * w[keep]).sum() / w[keep].sum(), rel=1e-15)
    assert mean.bad_input()["counts"] == {"NaN values": 0, "infinite weights": 2}

    acc = nm.BinaryAccuracy(weighted=True)
    acc.update(torch.tensor([0.9, 0.1, 0.8]), torch.tensor([1, 0, 0]), weight=torch.tensor([np.inf, 1.0, 1.0]))
    with pytest.raises(ValueError, match="BinaryAccuracy: 1 NaN, negative or infinite weight in 1 update"):
        acc.compute()


def test_huge_weights_give_finite_scores_or_a_clear_overflow_error():
    acc = nm.BinaryAccuracy(weighted=True)
    acc.update(torch.tensor([0.9, 0.1]), torch.tensor([1, 0]), weight=torch.tensor([1e308, 1e308], dtype=torch.float64))
    assert acc.compute().item() == 1.0
    acc.update(torch.tensor([0.9]), torch.tensor([1]), weight=torch.tensor([1e308], dtype=torch.float64))
    with pytest.raises(ValueError, match="BinaryAccuracy: the weighted counts overflowed float64"):
        acc.compute()


def test_small_weight_next_to_a_huge_one_reaches_true_negatives():
    preds, target = np.array([0, 1]), np.array([0, 1])
    weight = np.array([1e16, 1.0])
    m = nm.MulticlassStatScores(num_classes=3, average=None, weighted=True).set_dtype(torch.float64)
    m.update(torch.tensor(preds), torch.tensor(target), weight=torch.tensor(weight, dtype=torch.float64))
    tn = [sum(float(w) for p, t, w in zip(preds, target, weight) if p != c and t != c) for c in range(3)]
    assert m.compute()[:, 2].tolist() == tn


def test_too_many_classes_is_a_clear_error():
    with pytest.raises(ValueError, match="MulticlassConfusionMatrix: num_classes = 1000000 needs 8000000000000 bytes"):
        nm.MulticlassConfusionMatrix(num_classes=10**6)


def test_updates_from_several_threads_all_count():
    total = nm.SumMetric()
    acc = nm.MulticlassAccuracy(num_classes=3, average=None)
    ones = torch.ones(3)
    preds, target = torch.tensor([0, 1, 2]), torch.tensor([0, 1, 1])

    def work():
        for _ in range(5000):
            total.update(ones)
            acc.update(preds, target)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert total.compute().item() == 4 * 5000 * 3
    assert total.update_count == 20000
    assert acc.compute().tolist() == [1.0, 0.5, 0.0]
    assert acc.state_dict()["tp"].tolist() == [20000, 20000, 0]


def test_soak_short_keeps_memory_flat_and_values_exact(repo_dir):
    """In its own process, so that under AddressSanitizer (the sanitized stage) freed memory can be
    reused at once (quarantine_size_mb=0): otherwise ASan's quarantine, which holds freed blocks
    back, reads as growth. bench/soak.py exits 1 if memory grew by more than 4 MiB or a value differs."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "quarantine_size_mb=0"]))
    run = subprocess.run([sys.executable, str(repo_dir / "bench" / "soak.py"), "30000"], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "values equal the numpy reference" in run.stdout


def test_inputs_that_require_grad_never_join_the_state_to_their_graph():
    w = torch.randn(64, 32, requires_grad=True)
    mean, acc = nm.MeanMetric(), nm.MulticlassAccuracy(num_classes=16)
    for _ in range(3):
        mean.update((w * 2)[:, ::2])  # non-contiguous: the ATen path
        acc.update((w * 2)[:, ::2], torch.zeros(64, dtype=torch.long))
    state = mean.state_dict()
    state["total"] = state["total"].clone().requires_grad_()
    mean.load_state_dict(state)
    for metric in (mean, acc):
        assert not any(t.requires_grad for t in metric.state_dict().values())


def test_a_subnormal_weighted_count_beside_larger_ones_is_not_lost():
    """Found by the fuzzer: counts were scaled to below 2 before the ratios, which turned 5e-324
    beside 3.0 into 0 (class 3's precision became zero_division). Brute force: class c's F1 is
    2 tp / (2 tp + fp + fn), 0 where that is 0/0 only under zero_division=0."""
    preds, target, weight = [3, 1], [1, 1], [5e-324, 3.0]
    m = nm.MulticlassF1Score(6, average="none", weighted=True, zero_division=1)
    m.update(torch.tensor(preds), torch.tensor(target), torch.tensor(weight, dtype=torch.float64))
    expected = []
    for c in range(6):
        tp = sum(w for p, t, w in zip(preds, target, weight) if p == c and t == c)
        fp = sum(w for p, t, w in zip(preds, target, weight) if p == c and t != c)
        fn = sum(w for p, t, w in zip(preds, target, weight) if p != c and t == c)
        expected.append(1.0 if 2 * tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn))
    assert m.compute().tolist() == expected
    assert expected[3] == 0.0 and expected[1] == 1.0
    precision = nm.MulticlassPrecision(6, average="none", weighted=True, zero_division=1)
    precision.update(torch.tensor(preds), torch.tensor(target), torch.tensor(weight, dtype=torch.float64))
    assert precision.compute()[3].item() == 0.0


@pytest.mark.parametrize("average", ["binary", "micro", "macro"])
def test_a_weighted_f_beta_with_a_large_beta_stays_finite_near_the_float64_maximum(average):
    """F-beta sums (1 + beta^2) tp + beta^2 fn + fp: the counts are scaled for that sum too."""
    beta, weight = 10.0, 1e306
    if average == "binary":
        m = nm.BinaryFBetaScore(beta=beta, weighted=True)
        m.update(torch.tensor([1, 1, 0]), torch.tensor([1, 0, 1]), torch.tensor([weight] * 3, dtype=torch.float64))
    else:
        m = nm.MulticlassFBetaScore(beta=beta, num_classes=2, average=average, weighted=True)
        m.update(torch.tensor([1, 1, 0]), torch.tensor([1, 0, 1]), torch.tensor([weight] * 3, dtype=torch.float64))
    b2 = beta * beta
    f = lambda tp, fp, fn: (1 + b2) * tp / ((1 + b2) * tp + b2 * fn + fp)  # counts in units of the weight
    # class 1: tp 1, fp 1, fn 1; class 0: tp 0, fp 1, fn 1
    expected = {"binary": f(1, 1, 1), "micro": f(1, 2, 2), "macro": (f(1, 1, 1) + f(0, 1, 1)) / 2}[average]
    assert m.compute().item() == pytest.approx(expected, rel=1e-6)
