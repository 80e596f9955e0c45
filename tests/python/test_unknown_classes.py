"""num_classes=None with average="micro" (TorchMetrics 1.6.2+), against a brute-force reference.

TorchMetrics counts such a metric into one class (its micro branch with num_classes 1): labels are
compared as they are, whatever their range; a right prediction is a true positive, a wrong one a
false positive and a false negative, and tn = 1 * n - (tp + fp + fn) = -wrong. Scores (N, C, ...)
of any width C are argmaxed. The reference below is numpy loops over that rule; NaN scores are
bad input here (kept out, reported by compute() when validate_args).
"""

import numpy as np
import pytest
import torch

import nosync_metrics as nm

BATCHES = 3
SCORES = {"StatScores": nm.MulticlassStatScores, "Accuracy": nm.MulticlassAccuracy,
          "Precision": nm.MulticlassPrecision, "Recall": nm.MulticlassRecall, "F1Score": nm.MulticlassF1Score,
          "FBetaScore": lambda **kw: nm.MulticlassFBetaScore(0.5, **kw)}


def _batches(kind, seed, ignore_index, weighted, nan=False):
    """Labels in [-3, 8) (any range counts), or scores (N, C) / (N, C, 3) with C changing per batch."""
    g = torch.Generator().manual_seed(seed)
    for b in range(BATCHES):
        n = 11 + 5 * b
        extra = (3,) if kind == "scores_multidim" else ()
        target = torch.randint(-3, 8, (n, *extra), generator=g)
        if kind == "labels":
            preds = torch.randint(-3, 8, (n,), generator=g)
        else:
            preds = torch.randn(n, 2 + b, *extra, generator=g)
            preds[: n // 3] = preds[: n // 3].round()  # ties go to the first maximum
            target = target.clamp(0, 2 + b) if b == 1 else target  # more right predictions in one batch
            if nan:
                preds.view(-1)[7] = float("nan")
        if ignore_index is not None:
            target[torch.rand(target.shape, generator=g) < 0.2] = ignore_index
        weight = torch.rand(n, generator=g, dtype=torch.float64) + 0.1 if weighted else None
        yield preds, target, weight


def reference_counts(batches, ignore_index):
    """tp, fp, tn, fn by TorchMetrics' rule, one sample at a time."""
    right = wrong = 0.0
    for preds, target, weight in batches:
        p_all = preds.numpy()
        t_all = target.numpy()
        for i in range(t_all.shape[0]):
            w = 1.0 if weight is None else float(weight[i])
            for j in np.ndindex(t_all.shape[1:]):
                t = int(t_all[(i, *j)])
                if ignore_index is not None and t == ignore_index:
                    continue
                if p_all.ndim == t_all.ndim:
                    p = int(p_all[(i, *j)])
                else:
                    row = [float(p_all[(i, c, *j)]) for c in range(p_all.shape[1])]
                    if any(np.isnan(v) for v in row):
                        continue  # bad input: kept out
                    p = max(range(len(row)), key=lambda c: (row[c], -c))  # the first maximum
                if p == t:
                    right += w
                else:
                    wrong += w
    return right, wrong, -wrong, wrong


def reference_value(name, counts, zero_division=0):
    tp, fp, tn, fn = counts
    if name == "StatScores":
        return [tp, fp, tn, fn, tp + fn]
    beta2 = 0.25 if name == "FBetaScore" else 1.0
    num, den = {"Accuracy": (tp, tp + fn), "Precision": (tp, tp + fp), "Recall": (tp, tp + fn),
                "F1Score": (2 * tp, 2 * tp + fn + fp),
                "FBetaScore": ((1 + beta2) * tp, (1 + beta2) * tp + beta2 * fn + fp)}[name]
    return num / den if den else (0.0 if name == "Accuracy" else float(zero_division))


def _feed(metric, batches, layout):
    for preds, target, weight in batches:
        if layout == "strided":  # every other sample of a twice-as-long batch: non-contiguous input
            preds = torch.repeat_interleave(preds, 2, dim=0)[::2]
            target = torch.repeat_interleave(target, 2, dim=0)[::2]
            assert not target.is_contiguous()
        metric.update(preds, target, *([] if weight is None else [weight]))


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [None, -1, 3])
@pytest.mark.parametrize("kind", ["labels", "scores", "scores_multidim"])
@pytest.mark.parametrize("name", list(SCORES))
def test_values_match_the_brute_force_reference(name, kind, ignore_index, weighted, layout):
    seed = sum(map(ord, f"{name}{kind}{ignore_index}{weighted}"))  # deterministic, unlike hash()
    metric = SCORES[name](num_classes=None, average="micro", ignore_index=ignore_index, weighted=weighted)
    _feed(metric, _batches(kind, seed, ignore_index, weighted), layout)
    expected = reference_value(name, reference_counts(_batches(kind, seed, ignore_index, weighted), ignore_index))
    got = metric.compute()
    np.testing.assert_allclose(got.double().numpy(), np.array(expected), rtol=1e-6, atol=1e-9)
    if name == "StatScores" and not weighted:
        assert got.dtype == torch.int64


def test_labels_of_any_range_count_as_torchmetrics_counts_them():
    metric = nm.MulticlassStatScores(average="micro")
    metric.update(torch.tensor([0, 5, -3, 7, 2, 10**12]), torch.tensor([0, 5, -3, 1, 9, 10**12]))
    assert metric.compute().tolist() == [4, 2, -2, 2, 6]
    metric.check()  # no label is out of range without num_classes


def test_nan_scores_are_counted_as_bad_input():
    batches = list(_batches("scores", 5, None, False, nan=True))
    metric = nm.MulticlassAccuracy(average="micro")
    _feed(metric, batches, "contiguous")
    with pytest.raises(ValueError, match=r"MulticlassAccuracy: 3 NaN predictions in 3 updates, first at update 0"):
        metric.compute()
    quiet = nm.MulticlassAccuracy(average="micro", validate_args=False)
    _feed(quiet, batches, "contiguous")
    assert quiet.compute().item() == pytest.approx(reference_value("Accuracy", reference_counts(batches, None)))


@pytest.mark.parametrize("cls", [nm.MulticlassStatScores, nm.MulticlassAccuracy, nm.MulticlassPrecision,
                                 nm.MulticlassRecall])
def test_num_classes_defaults_to_none_as_in_torchmetrics(cls):
    assert cls(average="micro").num_classes is None
    assert repr(cls(average="micro")) == f"{cls.__name__}(num_classes=None, average='micro')"
    with pytest.raises(ValueError, match=rf"{cls.__name__}: num_classes can only be None \(unknown\) for "
                                         r"average='micro', got average='macro'"):
        cls()


@pytest.mark.parametrize("average", ["macro", "weighted", "none", None])
@pytest.mark.parametrize("cls", [nm.MulticlassF1Score, nm.MulticlassAccuracy])
def test_other_averages_refuse_none(cls, average):
    with pytest.raises(ValueError, match=rf"{cls.__name__}: num_classes can only be None"):
        cls(None, average=average)


def test_errors_name_the_metric_and_the_argument():
    with pytest.raises(ValueError, match=r"MulticlassAccuracy: top_k = 2 needs num_classes, got None"):
        nm.MulticlassAccuracy(None, top_k=2, average="micro")
    with pytest.raises(ValueError, match=r"MulticlassConfusionMatrix: num_classes is required, got None"):
        nm.MulticlassConfusionMatrix(None)
    with pytest.raises(ValueError, match=r"MulticlassRecall: num_classes must be at least 2, got -1"):
        nm.MulticlassRecall(-1, average="micro")  # only None means unknown
    with pytest.raises(ValueError, match=r"MultilabelRecall: num_labels must be an int, got None"):
        nm.MultilabelRecall(None)
    for wrapper in (nm.Accuracy, nm.Precision, nm.F1Score):  # TorchMetrics' task wrappers want an int
        with pytest.raises(ValueError, match="num_classes"):
            wrapper(task="multiclass", num_classes=None, average="micro")
    metric = nm.MulticlassAccuracy(average="micro")
    with pytest.raises(ValueError, match=r"expected preds \(N, C, ...\) with C >= 1"):
        metric.update(torch.zeros(2, 0), torch.tensor([0, 1]))


def test_state_dict_round_trips_and_refuses_a_known_class_count():
    metric = nm.MulticlassF1Score(None, average="micro", weighted=True)
    for preds, target, weight in _batches("scores", 3, None, True):
        metric.update(preds, target, weight)
    loaded = nm.MulticlassF1Score(None, average="micro", weighted=True)
    loaded.load_state_dict(metric.state_dict())
    assert torch.equal(loaded.compute(), metric.compute())
    counts = nm.MulticlassStatScores(average="micro")
    counts.update(torch.tensor([1, 2, 3]), torch.tensor([1, 0, 0]))  # tn = -2 loads back
    again = nm.MulticlassStatScores(average="micro")
    again.load_state_dict(counts.state_dict())
    assert again.compute().tolist() == [1, 2, -2, 2, 3]
    with pytest.raises(ValueError):
        nm.MulticlassStatScores(3, average="micro").load_state_dict(counts.state_dict())


def test_collections_share_only_between_the_same_options():
    collection = nm.MetricCollection({
        "acc": nm.MulticlassAccuracy(average="micro"), "f1": nm.MulticlassF1Score(None, average="micro"),
        "acc3": nm.MulticlassAccuracy(3, average="micro"), "prec3": nm.MulticlassPrecision(3, average="micro")})
    assert sorted(sorted(g) for g in collection.compute_groups.values()) == [["acc", "f1"], ["acc3", "prec3"]]
    collection.update(torch.tensor([0, 2, 1, 2]), torch.tensor([0, 1, 1, 0]))
    values = collection.compute()
    assert values["acc"].item() == values["acc3"].item() == pytest.approx(0.5)
    assert values["f1"].item() == values["prec3"].item() == pytest.approx(0.5)


def test_forward_and_merge():
    a, b = nm.MulticlassRecall(average="micro"), nm.MulticlassRecall(average="micro")
    assert a(torch.tensor([4, 4]), torch.tensor([4, 0])).item() == pytest.approx(0.5)
    b.update(torch.tensor([9]), torch.tensor([9]))
    a.merge_state(b)
    assert a.compute().item() == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="num_classes"):
        a.merge_state(nm.MulticlassRecall(3, average="micro"))
