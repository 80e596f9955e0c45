"""Random streams against sklearn, over task x average x top_k x ignore_index x weights.

sklearn is the independent reference; where TorchMetrics 1.6 defines things differently (top-k,
which classes a macro average skips, per-batch logits detection, per-entry ignore_index in
multilabel), the reference applies TorchMetrics' rule on top of sklearn's metrics.
"""

import copy
import itertools

import numpy as np
import pytest
import torch
from sklearn import metrics as skm

import nosync_metrics as nm

C = 5
L = 4
BATCHES = 4


def _batches(task, seed, ignore_index, weighted, logits=False):
    g = torch.Generator().manual_seed(seed)
    for b in range(BATCHES):
        n = 13 + 7 * b
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
        if weighted == "integers":  # float64 weights whose sums are exact: the CPU kernels derive cells
            weight = torch.randint(1, 6, (n,), generator=g).double()
        else:
            weight = torch.rand(n, generator=g, dtype=torch.float64) + 0.1 if weighted else None
        yield preds, target, weight


def _multiclass_pred(scores, target, top_k):
    """TorchMetrics 1.6: the target if it is among the top k (ties to the lower index), else top-1."""
    top1 = scores.argmax(1)
    if top_k == 1:
        return top1
    t = np.clip(target, 0, C - 1)
    st = scores[np.arange(len(t)), t][:, None]
    ahead = (scores > st).sum(1) + ((scores == st) & (np.arange(C)[None, :] < t[:, None])).sum(1)
    return np.where(ahead < top_k, t, top1)


def _binary_pred(x, threshold):
    """TorchMetrics on the CPU: a batch with values not inside [0, 1] is logits (sigmoid first)."""
    probs = 1 / (1 + np.exp(-x)) if (~((x >= 0) & (x <= 1))).any() else x
    return (probs > np.float32(threshold)).astype(int)


def _collect(task, batches, top_k, threshold, ignore_index):
    """Concatenated (y_true, y_pred, weight) after TorchMetrics' per-batch preprocessing."""
    ts, ps, ws = [], [], []
    for preds, target, weight in batches:
        p, t = preds.numpy(), target.numpy()
        if task == "multiclass":
            y_pred = _multiclass_pred(p, t, top_k)
        else:
            y_pred = _binary_pred(p, threshold)
        w = np.ones(len(t)) if weight is None else weight.numpy()
        ts.append(t), ps.append(y_pred), ws.append(w)
    return np.concatenate(ts), np.concatenate(ps), np.concatenate(ws)


def _sk_score(name, y_true, y_pred, w, beta, zero_division, **kw):
    if name == "precision":
        return skm.precision_score(y_true, y_pred, sample_weight=w, zero_division=zero_division, **kw)
    if name in ("recall", "accuracy"):
        return skm.recall_score(y_true, y_pred, sample_weight=w, zero_division=zero_division, **kw)
    beta = 1.0 if name == "f1" else beta
    return skm.fbeta_score(y_true, y_pred, beta=beta, sample_weight=w, zero_division=zero_division, **kw)


def reference_multiclass(name, y_true, y_pred, w, average, top_k, ignore_index, zero_division, beta):
    keep = y_true != ignore_index if ignore_index is not None else np.ones(len(y_true), bool)
    y_true, y_pred, w = y_true[keep], y_pred[keep], w[keep]
    zd = 0 if name == "accuracy" else zero_division
    if name == "accuracy" and average == "micro":
        return skm.accuracy_score(y_true, y_pred, sample_weight=w)
    if average == "macro":
        # TorchMetrics averages over classes seen as tp, fp or fn (top-k precision/recall/accuracy:
        # as tp or fn), which is sklearn's default label set (seen in y_true or y_pred).
        seen = set(y_true) if (top_k > 1 and name != "f1" and name != "fbeta") else set(y_true) | set(y_pred)
        return _sk_score(name, y_true, y_pred, w, beta, zd, labels=sorted(seen), average="macro")
    sk_average = None if average == "none" else average
    return _sk_score(name, y_true, y_pred, w, beta, zd, labels=list(range(C)), average=sk_average)


def _entry_score(name, t, p, w, beta, zero_division):
    if name == "accuracy":
        return skm.accuracy_score(t, p, sample_weight=w) if len(t) else 0.0
    return _sk_score(name, t, p, w, beta, zero_division, labels=[0, 1], pos_label=1, average="binary")


def reference_entries(name, task, y_true, y_pred, w, average, ignore_index, zero_division, beta):
    if task == "binary":
        keep = y_true != ignore_index if ignore_index is not None else np.ones(len(y_true), bool)
        return _entry_score(name, y_true[keep], y_pred[keep], w[keep], beta, zero_division)
    keep = y_true != ignore_index if ignore_index is not None else np.ones(y_true.shape, bool)
    ww = np.broadcast_to(w[:, None], y_true.shape)
    if average == "micro":
        return _entry_score(name, y_true[keep], y_pred[keep], ww[keep], beta, zero_division)
    per_label = np.array([_entry_score(name, y_true[keep[:, l], l], y_pred[keep[:, l], l], ww[keep[:, l], l], beta,
                                       zero_division) for l in range(L)])
    if average == "none":
        return per_label
    if average == "macro":
        return per_label.mean()
    support = np.array([(ww[:, l] * ((y_true[:, l] == 1) & keep[:, l])).sum() for l in range(L)])
    return (support * per_label).sum() / support.sum() if support.sum() > 0 else 0.0


def _classes(task):
    prefix = {"binary": "Binary", "multiclass": "Multiclass", "multilabel": "Multilabel"}[task]
    return {name: getattr(nm, prefix + cls) for name, cls in
            [("accuracy", "Accuracy"), ("precision", "Precision"), ("recall", "Recall"), ("f1", "F1Score"),
             ("fbeta", "FBetaScore")]}


def _make(task, name, cls, average, top_k, threshold, ignore_index, weighted, zero_division):
    kwargs = dict(ignore_index=ignore_index, weighted=bool(weighted))
    if task == "multiclass":
        kwargs.update(num_classes=C, average=average, top_k=top_k)
    elif task == "multilabel":
        kwargs.update(num_labels=L, average=average, threshold=threshold)
    else:
        kwargs.update(threshold=threshold)
    if name != "accuracy":
        kwargs["zero_division"] = zero_division
    return cls(0.5, **kwargs) if name == "fbeta" else cls(**kwargs)


MULTICLASS = list(itertools.product(["micro", "macro", "weighted", "none"], [1, 2], [None, 2, -1], [False, True]))


@pytest.mark.parametrize("average,top_k,ignore_index,weighted", MULTICLASS)
def test_multiclass_matches_sklearn(average, top_k, ignore_index, weighted):
    batches = list(_batches("multiclass", 11, ignore_index, weighted))
    y_true, y_pred, w = _collect("multiclass", batches, top_k, 0.5, ignore_index)
    for zero_division in (0, 1):
        for name, cls in _classes("multiclass").items():
            metric = _make("multiclass", name, cls, average, top_k, 0.5, ignore_index, weighted, zero_division)
            for preds, target, weight in batches:
                metric.update(preds, target, weight)
            expected = reference_multiclass(name, y_true, y_pred, w, average, top_k, ignore_index, zero_division, 0.5)
            np.testing.assert_allclose(metric.compute().numpy(), expected, atol=1e-6, err_msg=f"{name} zd={zero_division}")


@pytest.mark.parametrize("threshold,ignore_index,weighted,logits",
                         list(itertools.product([0.5, 0.3], [None, -1], [False, True], [False, True])))
def test_binary_matches_sklearn(threshold, ignore_index, weighted, logits):
    batches = list(_batches("binary", 5, ignore_index, weighted, logits))
    y_true, y_pred, w = _collect("binary", batches, 1, threshold, ignore_index)
    for zero_division in (0, 1):
        for name, cls in _classes("binary").items():
            metric = _make("binary", name, cls, None, 1, threshold, ignore_index, weighted, zero_division)
            for preds, target, weight in batches:
                metric.update(preds, target, weight)
            expected = reference_entries(name, "binary", y_true, y_pred, w, None, ignore_index, zero_division, 0.5)
            np.testing.assert_allclose(metric.compute().numpy(), expected, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("average,ignore_index,weighted,logits",
                         list(itertools.product(["micro", "macro", "weighted", "none"], [None, -1],
                                                [False, True, "integers"], [False, True])))
def test_multilabel_matches_sklearn(average, ignore_index, weighted, logits):
    batches = list(_batches("multilabel", 7, ignore_index, weighted, logits))
    y_true, y_pred, w = _collect("multilabel", batches, 1, 0.5, ignore_index)
    for zero_division in (0, 1):
        for name, cls in _classes("multilabel").items():
            metric = _make("multilabel", name, cls, average, 1, 0.5, ignore_index, weighted, zero_division)
            for preds, target, weight in batches:
                metric.update(preds, target, weight)
            expected = reference_entries(name, "multilabel", y_true, y_pred, w, average, ignore_index,
                                         zero_division, 0.5)
            np.testing.assert_allclose(metric.compute().numpy(), expected, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("normalize", [None, "true", "pred", "all"])
@pytest.mark.parametrize("weighted", [False, True])
def test_confusion_matrices_match_sklearn(normalize, weighted):
    # multiclass
    batches = list(_batches("multiclass", 3, -1, weighted))
    y_true, y_pred, w = _collect("multiclass", batches, 1, 0.5, -1)
    keep = y_true != -1
    metric = nm.MulticlassConfusionMatrix(num_classes=C, ignore_index=-1, normalize=normalize, weighted=weighted)
    for preds, target, weight in batches:
        metric.update(preds, target, weight)
    expected = skm.confusion_matrix(y_true[keep], y_pred[keep], labels=list(range(C)), sample_weight=w[keep],
                                    normalize=normalize)
    np.testing.assert_allclose(metric.compute().numpy(), expected, atol=1e-6)
    # binary
    batches = list(_batches("binary", 4, None, weighted, logits=True))
    y_true, y_pred, w = _collect("binary", batches, 1, 0.5, None)
    metric = nm.BinaryConfusionMatrix(normalize=normalize, weighted=weighted)
    for preds, target, weight in batches:
        metric.update(preds, target, weight)
    expected = skm.confusion_matrix(y_true, y_pred, labels=[0, 1], sample_weight=w, normalize=normalize)
    np.testing.assert_allclose(metric.compute().numpy(), expected, atol=1e-6)
    # multilabel: one 2 x 2 matrix per label
    batches = list(_batches("multilabel", 5, None, weighted))
    y_true, y_pred, w = _collect("multilabel", batches, 1, 0.5, None)
    metric = nm.MultilabelConfusionMatrix(num_labels=L, normalize=normalize, weighted=weighted)
    for preds, target, weight in batches:
        metric.update(preds, target, weight)
    expected = np.stack([skm.confusion_matrix(y_true[:, l], y_pred[:, l], labels=[0, 1], sample_weight=w,
                                              normalize=normalize) for l in range(L)])
    np.testing.assert_allclose(metric.compute().numpy(), expected, atol=1e-6)


def _binary_cells(batches, ignore_index, judged_by_kept):
    """tn, fp, fn, tp by hand (weighted sums where a batch has weights): a batch is logits where a
    score it judges by lies outside [0, 1]."""
    cells = np.zeros(4)
    for preds, target, weight in batches:
        p, t = preds.flatten().double().numpy(), target.flatten().numpy()
        w = np.ones(len(t)) if weight is None else weight.numpy()
        keep = t != ignore_index
        judged = p[keep] if judged_by_kept else p
        logits = (~((judged >= 0) & (judged <= 1))).any()  # on the CPU a NaN is not inside [0, 1]
        predicted = (1 / (1 + np.exp(-p)) if logits else p) > 0.5
        for pred, true, weight_of in zip(predicted[keep], t[keep], w[keep]):
            cells[2 * true + pred] += weight_of
    return cells


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("path", ["cpu", "aten"])
def test_the_binary_confusion_matrix_judges_logits_by_the_entries_it_keeps(path, weighted):
    # TorchMetrics' BinaryConfusionMatrix drops the ignored entries before it looks for logits; its
    # other binary metrics look at every score. Ignored entries padded with -1 here. In a collection
    # both readings are counted in one shared state.
    gen = torch.Generator().manual_seed(3)
    batches = []
    for n in (8, 16, 33):
        target = torch.randint(0, 2, (n,), generator=gen)
        preds = torch.rand(n, generator=gen)
        target[: n // 4] = -100
        preds[: n // 4] = -1.0
        batches.append((preds, target))
    batches.append((torch.tensor([0.6, 3.0, 0.2]), torch.tensor([1, -100, 0])))  # logits only where ignored
    batches.append((torch.tensor([0.6, 3.0, -1.0]), torch.tensor([1, 0, -100])))  # logits where kept too
    batches.append((torch.tensor([0.6, 0.7, 0.2]), torch.tensor([1, 0, -100])))  # probabilities for both
    batches.append((torch.tensor([0.6, float("nan"), 0.2]), torch.tensor([1, -100, 0])))  # a NaN only where ignored
    if path == "aten":  # scores with the negative bit (their memory negated) take the ATen path on the CPU
        batches = [(torch._neg_view(-p), t) for p, t in batches]
    # weights in quarters: their sums are exact, in any order
    batches = [(p, t, torch.randint(1, 9, t.shape, generator=gen).double() / 4 if weighted else None)
               for p, t in batches]
    options = dict(ignore_index=-100, weighted=weighted)
    matrix = nm.BinaryConfusionMatrix(**options)
    scores = nm.BinaryStatScores(**options)
    collection = nm.MetricCollection({"matrix": nm.BinaryConfusionMatrix(**options),
                                      "scores": nm.BinaryStatScores(**options),
                                      "recall": nm.BinaryRecall(**options)})
    assert collection.compute_groups == {0: ["matrix", "recall", "scores"]}
    for preds, target, weight in batches:
        extra = {"weight": weight} if weighted else {}
        matrix.update(preds, target, **extra)
        scores.update(preds, target, **extra)
        collection.update(preds, target, **extra)
    expected_matrix = _binary_cells(batches, -100, judged_by_kept=True)
    tn, fp, fn, tp = _binary_cells(batches, -100, judged_by_kept=False)
    assert (expected_matrix != [tn, fp, fn, tp]).any()  # the two readings differ in these batches
    assert matrix.compute().flatten().tolist() == expected_matrix.tolist()
    assert scores.compute().tolist() == [tp, fp, tn, fn, tp + fn]
    values = collection.compute()
    assert values["matrix"].flatten().tolist() == expected_matrix.tolist()
    assert values["scores"].tolist() == [tp, fp, tn, fn, tp + fn]
    assert values["recall"].item() == pytest.approx(tp / (tp + fn), rel=1e-6)
    # the state holds both readings, and a metric taken out of the collection keeps its own
    state = collection.state_dict()
    assert state["matrix.confmat"].flatten().tolist() == expected_matrix.tolist()
    assert [state["scores." + name].item() for name in ("tn", "fp", "fn", "tp")] == [tn, fp, fn, tp]
    alone = copy.deepcopy(collection["scores"])
    collection.reset()
    assert alone.compute().tolist() == [tp, fp, tn, fn, tp + fn]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("path", ["cpu", "aten"])
def test_binary_labels_with_ignore_index_count_the_matrix_and_the_cells_alike(path, weighted):
    # Labels have one reading: the matrix beside the cells in the shared state takes the same counts.
    gen = torch.Generator().manual_seed(5)
    options = dict(ignore_index=-1, weighted=weighted)
    collection = nm.MetricCollection({"matrix": nm.BinaryConfusionMatrix(**options),
                                      "scores": nm.BinaryStatScores(**options)})
    cells = np.zeros(4)  # tn, fp, fn, tp
    for n in (5, 9, 17):
        preds, target = torch.randint(0, 2, (n,), generator=gen), torch.randint(-1, 2, (n,), generator=gen)
        weight = torch.randint(1, 5, (n,), generator=gen).double() / 4
        for p, t, w in zip(preds.tolist(), target.tolist(), weight.tolist()):
            cells[2 * t + p] += (w if weighted else 1) if t != -1 else 0
        if path == "aten":
            preds = torch._neg_view(-preds)
        collection.update(preds, target, **({"weight": weight} if weighted else {}))
    values = collection.compute()
    tn, fp, fn, tp = cells
    assert collection.compute_groups == {0: ["matrix", "scores"]}
    assert values["matrix"].flatten().tolist() == cells.tolist()
    assert values["scores"].tolist() == [tp, fp, tn, fn, tp + fn]


@pytest.mark.parametrize("path", ["cpu", "aten"])
def test_a_nan_score_makes_the_batch_logits_on_the_cpu(path):
    # TorchMetrics asks on the CPU whether every score is inside [0, 1] (a NaN is not), elsewhere
    # whether any is outside (a NaN is not): its CPU reading, here on the CPU.
    nan = float("nan")
    neg = (lambda x: torch._neg_view(-x)) if path == "aten" else (lambda x: x)
    scores = nm.BinaryStatScores(ignore_index=-1)
    matrix = nm.BinaryConfusionMatrix(ignore_index=-1)
    scores.update(neg(torch.tensor([0.6, 0.4, nan])), torch.tensor([1, 0, -1]))
    matrix.update(neg(torch.tensor([0.6, 0.4, nan])), torch.tensor([1, 0, -1]))
    assert scores.compute().tolist() == [1, 1, 0, 0, 1]  # sigmoid(0.4) > 0.5: a false positive
    assert matrix.compute().tolist() == [[1, 0], [0, 1]]  # the kept scores alone: probabilities
    labels = nm.MultilabelStatScores(num_labels=2, average=None, ignore_index=-1)
    labels.update(neg(torch.tensor([[0.6, nan], [0.4, 0.7]])), torch.tensor([[1, -1], [0, 1]]))
    assert labels.compute().tolist() == [[1, 1, 0, 0, 1], [1, 0, 0, 0, 1]]
    # a kept NaN, not validated: left out, and still the batch's logits
    unchecked = nm.BinaryStatScores(validate_args=False)
    unchecked.update(neg(torch.tensor([0.6, 0.4, nan])), torch.tensor([1, 0, 1]))
    assert unchecked.compute().tolist() == [1, 1, 0, 0, 1]


def test_stat_scores_against_the_confusion_matrix():
    batches = list(_batches("multiclass", 9, None, False))
    y_true, y_pred, _ = _collect("multiclass", batches, 1, 0.5, None)
    cm = skm.confusion_matrix(y_true, y_pred, labels=list(range(C)))
    tp = np.diag(cm)
    fp, fn = cm.sum(0) - tp, cm.sum(1) - tp
    tn = cm.sum() - tp - fp - fn
    table = np.stack([tp, fp, tn, fn, tp + fn], axis=1)
    for average, expected in [("none", table), ("micro", table.sum(0)), ("macro", table.mean(0)),
                              ("weighted", (table * ((tp + fn) / (tp + fn).sum())[:, None]).sum(0))]:
        metric = nm.MulticlassStatScores(num_classes=C, average=average)
        for preds, target, _ in batches:
            metric.update(preds, target)
        np.testing.assert_allclose(metric.compute().numpy(), expected, rtol=1e-6)


def test_torchmetrics_doc_examples():
    target = torch.tensor([2, 1, 0, 0])
    preds = torch.tensor([2, 1, 0, 1])
    assert nm.MulticlassAccuracy(num_classes=3)(preds, target).item() == pytest.approx(0.8333, abs=1e-4)
    assert nm.MulticlassAccuracy(num_classes=3, average=None)(preds, target).tolist() == [0.5, 1.0, 1.0]
    assert nm.Accuracy(task="multiclass", num_classes=3)(preds, target).item() == pytest.approx(0.75)  # micro
    assert nm.MulticlassF1Score(num_classes=3)(preds, target).item() == pytest.approx(0.7778, abs=1e-4)
    assert nm.MulticlassFBetaScore(beta=2.0, num_classes=3)(preds, target).item() == pytest.approx(0.7963, abs=1e-4)
    binary_target = torch.tensor([0, 1, 0, 1, 0, 1])
    binary_preds = torch.tensor([0.11, 0.22, 0.84, 0.73, 0.33, 0.92])
    assert nm.BinaryAccuracy()(binary_preds, binary_target).item() == pytest.approx(0.6667, abs=1e-4)
    assert nm.BinaryStatScores()(binary_preds, binary_target).tolist() == [2, 1, 2, 1, 3]
    ml_target = torch.tensor([[0, 1, 0], [1, 0, 1]])
    ml_preds = torch.tensor([[0, 0, 1], [1, 0, 1]])
    assert nm.MultilabelPrecision(num_labels=3)(ml_preds, ml_target).item() == pytest.approx(0.5)
    assert nm.MultilabelConfusionMatrix(num_labels=3)(ml_preds, ml_target).tolist() == [
        [[1, 0], [0, 1]], [[1, 0], [1, 0]], [[0, 1], [0, 1]]]


def test_task_wrappers_pick_the_task_class_and_defaults():
    assert type(nm.Accuracy(task="binary")) is nm.BinaryAccuracy
    assert type(nm.F1Score(task="multiclass", num_classes=4)) is nm.MulticlassF1Score
    assert type(nm.ConfusionMatrix(task="multilabel", num_labels=3)) is nm.MultilabelConfusionMatrix
    assert nm.Precision(task="multiclass", num_classes=4)._arguments["average"] == "micro"  # wrapper default
    assert nm.MulticlassPrecision(num_classes=4)._arguments["average"] == "macro"            # class default
    assert nm.FBetaScore(task="binary", beta=2.0)._arguments["beta"] == 2.0
    with pytest.raises(ValueError, match="Invalid Classification task"):
        nm.Accuracy(task="regression")
    # as TorchMetrics' wrappers (its test_wrapper_class): Metric subclasses that make a task class
    for wrapper in (nm.StatScores, nm.Accuracy, nm.Precision, nm.Recall, nm.F1Score, nm.FBetaScore,
                    nm.ConfusionMatrix):
        assert issubclass(wrapper, nm.Metric)
        assert isinstance(wrapper(task="binary"), nm.Metric)
    with pytest.raises(ValueError, match="num_classes` is expected to be `int`"):
        nm.Accuracy(task="multiclass")


def test_the_f_scores_task_wrappers_take_zero_division_after_validate_args():
    """As TorchMetrics 1.6's F1Score and FBetaScore: zero_division is their last positional
    parameter (helper-56: it was keyword-only), and it reaches the task class."""
    f1 = nm.F1Score("multiclass", 0.5, 3, None, None, "global", 1, None, True, 1)
    fbeta = nm.FBetaScore("multiclass", 2.0, 0.5, 3, None, None, "global", 1, None, True, 1)
    for metric in (f1, fbeta):
        assert metric._arguments["zero_division"] == 1
        metric.update(torch.tensor([0, 0]), torch.tensor([0, 1]))  # class 2 is in neither: 0 / 0
        # per class: F(0) from precision 1/2 and recall 1; F(1) = 0; F(2) = zero_division
        beta2 = metric._arguments.get("beta", 1.0) ** 2
        f0 = (1 + beta2) * 0.5 * 1.0 / (beta2 * 0.5 + 1.0)
        assert metric.compute().tolist() == pytest.approx([f0, 0.0, 1.0])
    assert nm.F1Score("binary", zero_division=1)._arguments["zero_division"] == 1


def test_forward_returns_batch_values_and_accumulates():
    metric = nm.MulticlassAccuracy(num_classes=3, average="micro")
    assert metric(torch.tensor([0, 1]), torch.tensor([0, 1])).item() == 1.0
    assert metric.forward(torch.tensor([0, 1]), torch.tensor([1, 1])).item() == 0.5
    assert metric.compute().item() == 0.75


def test_extra_dimensions_are_flattened_like_torchmetrics():
    g = torch.Generator().manual_seed(2)
    preds, target = torch.randn(3, C, 4, 5, generator=g), torch.randint(0, C, (3, 4, 5), generator=g)
    metric = nm.MulticlassConfusionMatrix(num_classes=C)
    metric.update(preds, target)
    expected = skm.confusion_matrix(target.flatten().numpy(), preds.argmax(1).flatten().numpy(), labels=list(range(C)))
    np.testing.assert_array_equal(metric.compute().numpy(), expected)


@pytest.mark.parametrize("average", ["macro", "weighted"])
@pytest.mark.parametrize("task", ["multiclass", "multilabel"])
def test_averages_take_torchmetrics_float32_steps_to_the_bit(average, task):
    # TorchMetrics: per-class score in float32, each times its weight over the weights' sum, then the
    # sum; recomputed here with torch's float32 ops from per-class counts taken by hand
    gen = torch.Generator().manual_seed(7)
    for classes in (3, 7, 12):
        n = 97
        if task == "multiclass":
            preds, target = torch.rand(n, classes, generator=gen), torch.randint(0, classes, (n,), generator=gen)
            predicted = preds.argmax(1)
            hits = [((predicted == c) & (target == c)).sum() for c in range(classes)]
            positives = [(target == c).sum() for c in range(classes)]
            seen = [((predicted == c) | (target == c)).sum() for c in range(classes)]
            metric = nm.MulticlassRecall(num_classes=classes, average=average)
        else:
            preds, target = torch.rand(n, classes, generator=gen), torch.randint(0, 2, (n, classes), generator=gen)
            predicted = preds > 0.5
            hits = [(predicted[:, c] & (target[:, c] == 1)).sum() for c in range(classes)]
            positives = [(target[:, c] == 1).sum() for c in range(classes)]
            seen = [torch.tensor(1)] * classes  # multilabel macro weighs every label
            metric = nm.MultilabelRecall(num_labels=classes, average=average)
        tp, support = torch.stack(hits), torch.stack(positives)
        score = torch.where(support != 0, tp.float() / support.float(), torch.zeros(()))
        weights = support if average == "weighted" else (torch.stack(seen) != 0).float()
        expected = (weights * score / weights.sum().float()).sum()
        assert torch.equal(metric(preds, target), expected), classes


def test_weighted_stat_scores_take_torchmetrics_float32_steps_to_the_bit():
    # [tp, fp, tn, fn, support] per class, times support over its sum in float32, summed
    gen = torch.Generator().manual_seed(8)
    for classes in (3, 9):
        preds, target = torch.rand(211, classes, generator=gen), torch.randint(0, classes, (211,), generator=gen)
        predicted = preds.argmax(1)
        rows = []
        for c in range(classes):
            tp = ((predicted == c) & (target == c)).sum()
            fp, fn = ((predicted == c) & (target != c)).sum(), ((predicted != c) & (target == c)).sum()
            rows.append(torch.stack([tp, fp, 211 - tp - fp - fn, fn, tp + fn]))
        table = torch.stack(rows)
        support = table[:, 4]
        expected = (table * (support / support.sum()).reshape(-1, 1)).sum(0)
        got = nm.MulticlassStatScores(num_classes=classes, average="weighted")(preds, target)
        assert torch.equal(got, expected), classes


@pytest.mark.parametrize("beta", [0.3, 2.5])
def test_fbeta_takes_torchmetrics_float32_steps_to_the_bit(beta):
    # (1 + b^2) tp / ((1 + b^2) tp + b^2 fn + fp) in float32, then the macro average's steps
    gen = torch.Generator().manual_seed(9)
    for classes in range(3, 33):
        n = int(torch.randint(20, 300, (1,), generator=gen))
        preds, target = torch.rand(n, classes, generator=gen), torch.randint(0, classes, (n,), generator=gen)
        predicted = preds.argmax(1)
        tp = torch.stack([((predicted == c) & (target == c)).sum() for c in range(classes)])
        fp = torch.stack([((predicted == c) & (target != c)).sum() for c in range(classes)])
        fn = torch.stack([((predicted != c) & (target == c)).sum() for c in range(classes)])
        den = (1 + beta**2) * tp + beta**2 * fn + fp
        score = torch.where(den != 0, (1 + beta**2) * tp / den, torch.zeros(()))
        weights = ((tp + fp + fn) != 0).float()
        expected = (weights * score / weights.sum()).sum()
        got = nm.MulticlassFBetaScore(beta, num_classes=classes, average="macro")(preds, target)
        assert torch.equal(got, expected), classes


@pytest.mark.parametrize("beta", [0.3, 0.7])
def test_binary_and_micro_fbeta_take_torchmetrics_float32_steps_to_the_bit(beta):
    # TorchMetrics' _fbeta_reduce: (1 + b^2) tp / ((1 + b^2) tp + b^2 fn + fp) of int64 counts (micro:
    # their sums over the classes), each product and sum in float32 (1 + b^2 and b^2 rounded to it)
    def expected(tp, fp, fn, dtype=torch.float32):
        tp, fp, fn = tp.to(dtype), fp.to(dtype), fn.to(dtype)
        den = (1 + beta**2) * tp + beta**2 * fn + fp
        return torch.where(den != 0, (1 + beta**2) * tp / den, torch.zeros((), dtype=dtype))

    gen = torch.Generator().manual_seed(10)
    differs = 0
    for n in [1, 4096] + torch.randint(2, 600, (30,), generator=gen).tolist():
        preds, target = torch.rand(n, generator=gen), torch.randint(0, 2, (n,), generator=gen)
        hit, positive = preds > 0.5, target == 1
        tp, fp, fn = (hit & positive).sum(), (hit & ~positive).sum(), (~hit & positive).sum()
        assert torch.equal(nm.BinaryFBetaScore(beta)(preds, target), expected(tp, fp, fn)), n
        differs += not torch.equal(expected(tp, fp, fn, torch.float64).float(), expected(tp, fp, fn))
        classes = 7
        preds, target = torch.rand(n, classes, generator=gen), torch.randint(0, classes, (n,), generator=gen)
        hits = preds.argmax(1) == target
        tp, wrong = hits.sum(), (~hits).sum()  # micro: every miss is one class's fp and another's fn
        got = nm.MulticlassFBetaScore(beta, num_classes=classes, average="micro")(preds, target)
        assert torch.equal(got, expected(tp, wrong, wrong)), n
    assert differs > 0  # (float64 steps would round some of these scores apart)


def _safe_divide(num, den, dtype=torch.float32):  # TorchMetrics 1.6's of integer counts: in float32
    num, den = num.to(dtype), den.to(dtype)
    return torch.where(den != 0, num / den, torch.zeros((), dtype=dtype))


def _rounded_float64_quotient(num, den):  # the exact ratio's rounding, not TorchMetrics'
    return _safe_divide(num, den, torch.float64).float()


def _weighted_average(scores, support, total_dtype=None):
    """Each score times its support over their (int64) sum, rounded into total_dtype (the scores' if
    None), summed."""
    return (support * scores / support.sum().to(scores.dtype if total_dtype is None else total_dtype)).sum()


@pytest.mark.parametrize("make, expected", [
    (nm.BinaryAccuracy, lambda divide, tp, fp, tn, fn: divide(tp + tn, tp + tn + fp + fn)),
    (nm.BinaryPrecision, lambda divide, tp, fp, tn, fn: divide(tp, tp + fp)),
    (nm.BinaryRecall, lambda divide, tp, fp, tn, fn: divide(tp, tp + fn)),
    (lambda: nm.MulticlassPrecision(num_classes=3, average="micro"),
     lambda divide, tp, fp, tn, fn: divide(tp.sum(), tp.sum() + fp.sum())),
    (lambda: nm.MulticlassPrecision(num_classes=3, average="macro"),
     lambda divide, tp, fp, tn, fn: (divide(tp, tp + fp) / 3).sum()),
    (lambda: nm.MulticlassRecall(num_classes=3, average="weighted"),
     lambda divide, tp, fp, tn, fn: _weighted_average(divide(tp, tp + fn), support=tp + fn)),
])
def test_counts_past_2_to_the_24_round_into_float32_as_torchmetrics_rounds_them(make, expected, default_dtype):
    # a count past 2^24 rounds in float32: TorchMetrics divides the rounded counts (their sums exact,
    # in int64), whose quotient may differ from the exact ratio's rounding; its .float() takes float32
    # whatever the default dtype (in which torch divides integers)
    gen = torch.Generator().manual_seed(11)
    binary = type(make()).__name__.startswith("Binary")
    batch = (torch.tensor([0.9]), torch.tensor([1]))
    if not binary:
        batch = (torch.tensor([[0.9, 0.05, 0.05]]), torch.tensor([0]))
    differs = 0
    for _ in range(50):
        counts = [2**24 + torch.randint(0, 2**26, (1 if binary else 3,), generator=gen) for _ in range(4)]
        metric = make()
        metric.update(*batch)
        metric.load_state_dict({**metric.state_dict(), **dict(zip(("tp", "fp", "tn", "fn"), counts))})
        want = expected(_safe_divide, *counts).reshape(())
        assert torch.equal(metric.compute(), want), counts
        differs += not torch.equal(expected(_rounded_float64_quotient, *counts).reshape(()), want)
    assert differs > 0  # (float32 rounds these counts: a score of the exact ratio would differ)


@pytest.mark.parametrize("normalize", ["true", "pred", "all"])
def test_normalized_confusion_matrix_past_2_to_the_24_takes_torchmetrics_float32_steps(normalize):
    # TorchMetrics' _confusion_matrix_reduce: the int64 matrix in float32, over its float32 sums
    # (NaN, of an empty row or column, then 0)
    dims = {"true": -1, "pred": -2, "all": [-2, -1]}[normalize]
    gen = torch.Generator().manual_seed(12)
    for _ in range(20):
        matrix = 2**24 + torch.randint(0, 2**26, (4, 4), generator=gen)
        matrix[1] = 0  # an empty row
        metric = nm.MulticlassConfusionMatrix(num_classes=4, normalize=normalize)
        metric.update(torch.tensor([[0.7, 0.1, 0.1, 0.1]]), torch.tensor([0]))
        metric.load_state_dict({**metric.state_dict(), "confmat": matrix})
        expected = matrix.float() / matrix.float().sum(dims, keepdim=True)
        assert torch.equal(metric.compute(), expected.nan_to_num(0.0))


@pytest.mark.parametrize("default_dtype", [torch.float64], indirect=True, ids=["default_float64"])
def test_weighted_fbeta_under_a_float64_default_divides_by_the_support_sum_in_float32(default_dtype):
    # TorchMetrics' _adjust_weights_safe_divide: scores in float64 (the default dtype) times the int64
    # support, over the support's int64 sum, which _safe_divide rounds into float32
    gen, beta2, differs = torch.Generator().manual_seed(13), 0.7**2, 0
    for _ in range(50):
        tp, fp, tn, fn = (2**24 + torch.randint(0, 2**26, (3,), generator=gen) for _ in range(4))
        metric = nm.MulticlassFBetaScore(0.7, num_classes=3, average="weighted")
        metric.update(torch.tensor([[0.9, 0.05, 0.05]]), torch.tensor([0]))
        metric.load_state_dict({**metric.state_dict(), "tp": tp, "fp": fp, "tn": tn, "fn": fn})
        score = (1 + beta2) * tp / ((1 + beta2) * tp + beta2 * fn + fp)
        expected = _weighted_average(score, support=tp + fn, total_dtype=torch.float32)
        assert torch.equal(metric.compute(), expected)
        differs += not torch.equal(_weighted_average(score, support=tp + fn), expected)
    assert differs > 0  # (float32 rounds these sums)


@pytest.mark.parametrize("multidim_average", ["global", "samplewise"])
@pytest.mark.parametrize("task", ["multiclass", "multilabel"])
def test_weighted_stat_scores_take_torchmetrics_steps_in_the_default_dtype(task, multidim_average, default_dtype):
    # _multiclass_stat_scores_compute: the int64 table times support / support.sum(-1), a division of
    # integers, so in the default dtype, and summed over the classes there (per sample: samplewise)
    gen, differs, extra = torch.Generator().manual_seed(14), 0, (3,) if multidim_average == "samplewise" else ()
    for n in range(20, 220, 10):
        if task == "multiclass":
            metric = nm.MulticlassStatScores(num_classes=5, average="weighted", multidim_average=multidim_average)
            preds, target = (torch.randint(0, 5, (n, *extra), generator=gen) for _ in range(2))
            metric.update(preds, target)
        else:
            metric = nm.MultilabelStatScores(num_labels=5, average="weighted", multidim_average=multidim_average)
            metric.update(torch.rand(n, 5, *extra, generator=gen), torch.randint(0, 2, (n, 5, *extra), generator=gen))
        state = metric.state_dict()
        tp, fp, tn, fn = (state[k] for k in ("tp", "fp", "tn", "fn"))
        table, support = torch.stack([tp, fp, tn, fn, tp + fn], -1), tp + fn
        expected = (table * (support / support.sum(-1, keepdim=True)).unsqueeze(-1)).sum(-2)
        assert expected.dtype == default_dtype and expected.shape == ((n, 5) if extra else (5,))
        # (a sample without positives has support 0: NaN, as TorchMetrics' 0 / 0)
        torch.testing.assert_close(metric.compute(), expected, rtol=0, atol=0, equal_nan=True, msg=str(n))
        in_float32 = (table * (support.float() / support.sum(-1, keepdim=True).float()).unsqueeze(-1)).sum(-2)
        differs += not torch.allclose(in_float32.to(default_dtype), expected, rtol=0, atol=0, equal_nan=True)
    assert differs > 0 or default_dtype == torch.float32  # (float32 steps would round some apart)
