"""multidim_average="samplewise": a value per sample over its extra dimensions, as TorchMetrics 1.6
computes it, checked against a brute-force reference written here from TorchMetrics' definitions
(per-sample counts by loops over positions, then its reductions)."""

import copy
import itertools
import subprocess
import sys

import numpy as np
import pytest
import torch

import nosync_metrics as nm
from round_trips import pickled

C = 4
L = 3
NAMES = ["accuracy", "precision", "recall", "f1", "fbeta", "stat_scores"]
CLASSES = {"accuracy": "Accuracy", "precision": "Precision", "recall": "Recall", "f1": "F1Score",
           "fbeta": "FBetaScore", "stat_scores": "StatScores"}
PREFIX = {"binary": "Binary", "multiclass": "Multiclass", "multilabel": "Multilabel"}
BETA = 0.5


def make(task, name, average="macro", top_k=1, ignore_index=None, zero_division=0, **extra):
    kwargs = dict(multidim_average="samplewise", ignore_index=ignore_index, **extra)
    if task == "multiclass":
        kwargs.update(num_classes=C, average=average, top_k=top_k)
    elif task == "multilabel":
        kwargs.update(num_labels=L, average=average)
    if name not in ("accuracy", "stat_scores"):
        kwargs["zero_division"] = zero_division
    cls = getattr(nm, PREFIX[task] + CLASSES[name])
    return cls(BETA, **kwargs) if name == "fbeta" else cls(**kwargs)


# ------------------------------------------------------------------ the reference

def sdiv(num, den, zero_division):
    num, den = np.asarray(num, float), np.asarray(den, float)
    return np.where(den == 0, zero_division, num / np.where(den == 0, 1, den))


def multiclass_pred(scores, target, top_k):
    """scores (C,), target: TorchMetrics 1.6 keeps the target where it is among the top k
    (ties to the lower index), else the top-1 class."""
    top1 = int(np.argmax(scores))
    if top_k == 1 or not 0 <= target < C:
        return top1
    ahead = sum(1 for c in range(C) if scores[c] > scores[target] or (scores[c] == scores[target] and c < target))
    return target if ahead < top_k else top1


def binary_preds(x):
    """TorchMetrics: a batch with any value outside [0, 1] holds logits."""
    probs = 1 / (1 + np.exp(-x.astype(np.float64))) if ((x < 0) | (x > 1)).any() else x
    return (probs > 0.5).astype(int)


def counts_of_batch(task, preds, target, top_k, ignore_index):
    """[N, K] tp, fp, tn, fn per sample (K classes, labels, or 1 for binary), by loops."""
    p, t = preds.numpy(), target.numpy()
    n = t.shape[0]
    k = {"binary": 1, "multiclass": C, "multilabel": L}[task]
    tp, fp, tn, fn = (np.zeros((n, k), np.int64) for _ in range(4))
    if task == "multiclass":
        scores = p.ndim == t.ndim + 1
        for i in range(n):
            positions = np.ndindex(*t.shape[1:])
            for pos in positions:
                target_c = int(t[(i,) + pos])
                if target_c == ignore_index:
                    continue
                pred_c = multiclass_pred(p[(i, slice(None)) + pos], target_c, top_k) if scores else int(p[(i,) + pos])
                for c in range(C):
                    tp[i, c] += pred_c == c and target_c == c
                    fp[i, c] += pred_c == c and target_c != c
                    fn[i, c] += pred_c != c and target_c == c
                    tn[i, c] += pred_c != c and target_c != c
        return tp, fp, tn, fn
    labels = binary_preds(p) if p.dtype.kind == "f" else p
    for i in range(n):
        for j in range(k):
            entries = (t[i], labels[i]) if task == "binary" else (t[i, j], labels[i, j])
            for target_v, pred_v in zip(entries[0].reshape(-1), entries[1].reshape(-1)):
                if target_v == ignore_index:
                    continue
                tp[i, j] += pred_v == 1 and target_v == 1
                fp[i, j] += pred_v == 1 and target_v == 0
                fn[i, j] += pred_v == 0 and target_v == 1
                tn[i, j] += pred_v == 0 and target_v == 0
    return tp, fp, tn, fn


def reduce_sample(name, task, tp, fp, tn, fn, average, top_k, zero_division):
    """One sample's value from its per-class counts [K], by TorchMetrics 1.6's definitions."""
    if name == "stat_scores":
        table = np.stack([tp, fp, tn, fn, tp + fn], -1)
        if task == "binary":
            return table[0]
        if average == "micro":
            return table.sum(0)
        if average == "macro":
            return table.astype(np.float32).mean(0)
        if average == "weighted":
            support = (tp + fn).astype(float)
            with np.errstate(invalid="ignore"):  # no support: NaN, as TorchMetrics' 0 / 0
                return (table * (support / support.sum())[:, None]).sum(0)
        return table

    def score(tp, fp, tn, fn):
        if name == "accuracy":
            if task == "multiclass":
                return sdiv(tp, tp + fn, 0)
            return sdiv(tp + tn, tp + fp + tn + fn, 0)
        if name == "precision":
            return sdiv(tp, tp + fp, zero_division)
        if name == "recall":
            return sdiv(tp, tp + fn, zero_division)
        beta2 = 1.0 if name == "f1" else BETA ** 2
        return sdiv((1 + beta2) * tp, (1 + beta2) * tp + beta2 * fn + fp, zero_division)

    if task == "binary":
        return score(tp, fp, tn, fn)[0]
    if average == "micro":
        return score(tp.sum(), fp.sum(), tn.sum(), fn.sum())
    per_class = score(tp, fp, tn, fn)
    if average == "none":
        return per_class
    if average == "weighted":
        weights = (tp + fn).astype(float)
    else:
        weights = np.ones(len(tp))
        if task == "multiclass":
            seen = tp + fp + fn if (top_k == 1 or name in ("f1", "fbeta")) else tp + fn
            weights[seen == 0] = 0
    return float(sdiv((weights * per_class).sum(), weights.sum(), 0))


def reference(name, task, batches, average, top_k=1, ignore_index=None, zero_division=0):
    values = []
    for preds, target in batches:
        for tp, fp, tn, fn in zip(*counts_of_batch(task, preds, target, top_k, ignore_index)):
            values.append(reduce_sample(name, task, tp, fp, tn, fn, average, top_k, zero_division))
    out = np.array(values)
    return out.squeeze() if name == "stat_scores" and task == "binary" else out


# ------------------------------------------------------------------ inputs

def batches(task, seed, ignore_index=None, labels=False, extra=(5,), logits=False):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in (3, 1, 4):
        if task == "multiclass":
            target = torch.randint(0, C, (n,) + extra, generator=g)
            preds = torch.randint(0, C, (n,) + extra, generator=g) if labels else torch.randn((n, C) + extra, generator=g)
        elif task == "binary":
            target = torch.randint(0, 2, (n,) + extra, generator=g)
            preds = torch.randn((n,) + extra, generator=g) * 3 if logits else torch.rand((n,) + extra, generator=g)
        else:
            target = torch.randint(0, 2, (n, L) + extra, generator=g)
            preds = torch.randn((n, L) + extra, generator=g) * 3 if logits else torch.rand((n, L) + extra, generator=g)
        if ignore_index is not None:
            target[torch.rand(target.shape, generator=g) < 0.25] = ignore_index
        out.append((preds, target))
    return out


def run(metric, data):
    for preds, target in data:
        metric.update(preds, target)
    return metric.compute()


def check(metric, expected, name):
    value = metric.compute() if not isinstance(metric, torch.Tensor) else metric
    np.testing.assert_allclose(value.numpy(), expected, rtol=1e-6, atol=1e-6, err_msg=name)


# ------------------------------------------------------------------ values

# top_k > 1 needs scores (labels with top_k > 1 are refused, as in TorchMetrics)
@pytest.mark.parametrize("average,top_k,ignore_index,labels",
                         [c for c in itertools.product(["micro", "macro", "weighted", "none"], [1, 2], [None, 1, -1],
                                                       [False, True]) if not (c[3] and c[1] > 1)])
def test_multiclass_per_sample_matches_the_reference(average, top_k, ignore_index, labels):
    data = batches("multiclass", 3, ignore_index, labels)
    for name in NAMES:
        for zero_division in (0, 1):
            metric = make("multiclass", name, average, top_k, ignore_index, zero_division)
            run(metric, data)
            check(metric, reference(name, "multiclass", data, average, top_k, ignore_index, zero_division),
                  f"{name} zd={zero_division}")


@pytest.mark.parametrize("ignore_index,logits", list(itertools.product([None, -1], [False, True])))
def test_binary_per_sample_matches_the_reference(ignore_index, logits):
    data = batches("binary", 4, ignore_index, logits=logits)
    for name in NAMES:
        for zero_division in (0, 1):
            metric = make("binary", name, ignore_index=ignore_index, zero_division=zero_division)
            run(metric, data)
            check(metric, reference(name, "binary", data, None, 1, ignore_index, zero_division), name)


@pytest.mark.parametrize("average,ignore_index", list(itertools.product(["micro", "macro", "weighted", "none"],
                                                                        [None, -1])))
def test_multilabel_per_sample_matches_the_reference(average, ignore_index):
    data = batches("multilabel", 5, ignore_index)
    for name in NAMES:
        for zero_division in (0, 1):
            metric = make("multilabel", name, average, ignore_index=ignore_index, zero_division=zero_division)
            run(metric, data)
            check(metric, reference(name, "multilabel", data, average, 1, ignore_index, zero_division), name)


@pytest.mark.parametrize("task", ["binary", "multiclass", "multilabel"])
def test_several_extra_dimensions_and_the_device_path(task):
    """(N, ..., 2, 3) inputs flatten per sample; a non-contiguous input (the ATen path on the CPU
    counts every samplewise update anyway) gives the same values."""
    data = batches(task, 6, extra=(2, 3))
    expected = reference("f1", task, data, "macro")
    check(run(make(task, "f1"), data), expected, task)
    strided = [(p.transpose(-1, -2).contiguous().transpose(-1, -2), t.transpose(-1, -2).contiguous().transpose(-1, -2))
               for p, t in data]
    assert not strided[0][0].is_contiguous()
    check(run(make(task, "f1"), strided), expected, task)


def test_torchmetrics_doc_examples():
    """TorchMetrics 1.6.3's docstring examples (multidim tensors)."""
    target = torch.tensor([[[0, 1], [2, 1], [0, 2]], [[1, 1], [2, 0], [1, 2]]])
    preds = torch.tensor([[[0, 2], [2, 0], [0, 1]], [[2, 2], [2, 1], [1, 0]]])
    metric = nm.MulticlassAccuracy(num_classes=3, multidim_average="samplewise")
    np.testing.assert_allclose(metric(preds, target).numpy(), [0.5, 0.2778], atol=1e-4)
    metric = nm.MulticlassAccuracy(num_classes=3, multidim_average="samplewise", average=None)
    np.testing.assert_allclose(metric(preds, target).numpy(), [[1.0, 0.0, 0.5], [0.0, 0.3333, 0.5]], atol=1e-4)

    target = torch.tensor([[[0, 1], [1, 0], [0, 1]], [[1, 1], [0, 0], [1, 0]]])
    preds = torch.tensor([[[0.59, 0.91], [0.91, 0.99], [0.63, 0.04]], [[0.38, 0.04], [0.86, 0.780], [0.45, 0.37]]])
    np.testing.assert_allclose(nm.BinaryAccuracy(multidim_average="samplewise")(preds, target).numpy(),
                               [0.3333, 0.1667], atol=1e-4)
    assert nm.BinaryStatScores(multidim_average="samplewise")(preds, target).tolist() == [[2, 3, 0, 1, 3],
                                                                                           [0, 2, 1, 3, 3]]
    np.testing.assert_allclose(nm.MultilabelAccuracy(num_labels=3, multidim_average="samplewise")(preds, target),
                               [0.3333, 0.1667], atol=1e-4)
    np.testing.assert_allclose(
        nm.MultilabelAccuracy(num_labels=3, multidim_average="samplewise", average=None)(preds, target),
        [[0.5, 0.5, 0.0], [0.0, 0.0, 0.5]], atol=1e-4)
    stat = nm.MultilabelStatScores(num_labels=3, multidim_average="samplewise", average="micro")
    assert stat(preds, target).tolist() == [[2, 3, 0, 1, 3], [0, 2, 1, 3, 3]]
    per_label = nm.MultilabelStatScores(num_labels=3, multidim_average="samplewise", average=None)(preds, target)
    assert per_label[0].tolist() == [[1, 1, 0, 0, 1], [1, 1, 0, 0, 1], [0, 1, 0, 1, 1]]


# ------------------------------------------------------------------ the growing state

def test_the_state_grows_by_a_row_per_sample_and_reset_empties_it():
    metric = make("multiclass", "accuracy")
    data = batches("multiclass", 7)
    run(metric, data)
    state = metric.state_dict()
    assert state["tp"].shape == (8, C)
    assert metric.compute().shape == (8,)
    metric.reset()
    assert metric.state_dict()["tp"].shape == (0, C)
    with pytest.warns(UserWarning, match="before any update"):
        assert metric.compute().shape == (0,)


def test_forward_gives_the_batch_samples_and_keeps_all():
    data = batches("multilabel", 8)
    metric = make("multilabel", "precision", "micro")
    values = [metric(p, t) for p, t in data]
    expected = reference("precision", "multilabel", data, "micro")
    np.testing.assert_allclose(torch.cat(values).numpy(), expected, rtol=1e-6)
    check(metric, expected, "all")


def test_merge_state_dict_clone_pickle_and_collections():
    data = batches("multiclass", 9)
    expected = reference("recall", "multiclass", data, "macro")
    first, second = make("multiclass", "recall"), make("multiclass", "recall")
    run(first, data[:2])
    run(second, data[2:])
    merged = copy.deepcopy(first)
    merged.merge_state(second)
    # the incoming samples come first, as TorchMetrics' merge_state puts them
    expected_merged = reference("recall", "multiclass", data[2:] + data[:2], "macro")
    check(merged, expected_merged, "merge")
    restored = make("multiclass", "recall")
    restored.load_state_dict(merged.state_dict())
    check(restored, expected_merged, "state_dict")
    check(pickled(merged), expected_merged, "pickle")
    check(merged.clone(), expected_merged, "clone")
    in_turn = copy.deepcopy(first)  # a list is merged in turn: [third, second, first]
    third = make("multiclass", "recall")
    run(third, data[:1])
    in_turn.merge_state([second, third.state_dict()])
    check(in_turn, reference("recall", "multiclass", data[:1] + data[2:] + data[:2], "macro"), "merge of a list")
    collection = nm.MetricCollection({"acc": make("multiclass", "accuracy"), "rec": make("multiclass", "recall")})
    for p, t in data:
        collection.update(p, t)
    values = collection.compute()
    np.testing.assert_allclose(values["rec"].numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(values["acc"].numpy(), reference("accuracy", "multiclass", data, "macro"), rtol=1e-6)


def test_a_global_state_does_not_load_into_a_samplewise_metric():
    global_metric = nm.MulticlassAccuracy(num_classes=C)
    with pytest.raises(ValueError, match="MulticlassAccuracy.load_state_dict"):
        make("multiclass", "accuracy").load_state_dict(global_metric.state_dict())
    with pytest.raises(ValueError, match="merge"):
        make("multiclass", "accuracy").merge_state(global_metric)


def test_a_state_dict_whose_row_entries_disagree_is_refused_and_changes_nothing():
    metric = make("multiclass", "accuracy")
    metric.update(torch.randint(0, C, (3, 4)), torch.randint(0, C, (3, 4)))
    before = metric.state_dict()
    state = dict(before)
    state["tp"] = state["tp"][:2]  # a sample short
    with pytest.raises(ValueError, match="MulticlassAccuracy.load_state_dict: 'fp' has 3 rows but 'tp' has 2"):
        metric.load_state_dict(state)
    after = metric.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before if isinstance(before[k], torch.Tensor))


def test_bad_input_is_counted_and_kept_out_of_its_sample():
    metric = make("multiclass", "accuracy", "micro")
    preds = torch.tensor([[0, 1, 2], [1, 1, 1]])
    target = torch.tensor([[0, 9, 2], [1, 0, 1]])  # 9: out of range, left out of sample 0
    metric.update(preds, target)
    with pytest.raises(ValueError, match="1 target outside"):
        metric.compute()
    np.testing.assert_allclose(value_without_report(metric), [1.0, 2 / 3], rtol=1e-6)


@pytest.mark.parametrize("top_k,ignore_index", list(itertools.product([1, 2], [None, 1])))
def test_nan_scores_and_bad_targets_are_left_out_of_their_samples_and_counted(top_k, ignore_index):
    """Scores with NaN (of either sign) and targets out of range, in some updates only: each sample
    counts its clean positions as the reference does, and the report counts the bad rows, the bad
    updates and the first of them."""
    g = torch.Generator().manual_seed(12)
    metric = make("multiclass", "stat_scores", "none", top_k, ignore_index)
    skipped = -100 if ignore_index is None else ignore_index
    counted, nan_rows, bad_targets, bad_updates, first = [], 0, 0, 0, None
    for update, n in enumerate((2, 3, 1, 2)):
        scores = torch.randn((n, C, 5), generator=g)
        target = torch.randint(0, C, (n, 5), generator=g)
        if update in (1, 3):
            scores[0, 1, 2] = float("nan")
            scores[-1, :, 4] = -float("nan")
            target[-1, 0] = C + 3
            target[0, 3] = -2
        ignored = target == ignore_index if ignore_index is not None else torch.zeros_like(target, dtype=torch.bool)
        nan = scores.isnan().any(1) & ~ignored
        out = ((target < 0) | (target >= C)) & ~ignored
        nan_rows += int(nan.sum())
        bad_targets += int(out.sum())
        if (nan | out).any():
            bad_updates += 1
            first = update if first is None else first
        metric.update(scores, target)
        counted.append((scores.nan_to_num(0.0), target.masked_fill(nan | out, skipped)))  # the reference skips them
    expected = [np.stack(counts_of_batch("multiclass", p, t, top_k, skipped), -1) for p, t in counted]
    quiet = make("multiclass", "stat_scores", "none", top_k, ignore_index, validate_args=False)
    quiet.load_state_dict({k: v for k, v in metric.state_dict().items()
                           if k not in ("bad_input_counts", "first_bad_update", "_metric", "_version")}, strict=False)
    table = quiet.compute().numpy()
    np.testing.assert_array_equal(table[..., :4], np.concatenate(expected))
    report = metric.bad_input()
    assert report["counts"]["NaN or out-of-range predictions"] == nan_rows
    assert report["counts"][f"targets outside [0, {C})"] == bad_targets
    assert report["updates"] == bad_updates and report["first_update"] == first


def value_without_report(metric):
    """The value without the bad-input report: validate_args off, same state."""
    quiet = make("multiclass", "accuracy", "micro", validate_args=False)
    state = {k: v for k, v in metric.state_dict().items() if k not in ("bad_input_counts", "first_bad_update",
                                                                        "_metric", "_version")}
    quiet.load_state_dict(state, strict=False)
    return quiet.compute().numpy()


def test_updates_never_synchronize():
    metric = make("multiclass", "f1", top_k=2)
    data = batches("multiclass", 10)
    with nm.count_syncs() as counter:
        for p, t in data:
            metric.update(p, t)
    assert counter.total == 0, counter.by_op


@pytest.mark.parametrize("call,message", [
    (lambda: nm.MulticlassAccuracy(num_classes=C, multidim_average="samplewise").update(torch.randn(4, C),
                                                                                          torch.randint(0, C, (4,))),
     "MulticlassAccuracy.update: multidim_average=samplewise needs preds of at least 3 dimensions"),
    (lambda: nm.BinaryF1Score(multidim_average="samplewise").update(torch.rand(4), torch.randint(0, 2, (4,))),
     "BinaryF1Score.update: multidim_average=samplewise needs preds of at least 2 dimensions"),
    (lambda: nm.MultilabelRecall(num_labels=L, multidim_average="samplewise").update(
        torch.rand(4, L), torch.randint(0, 2, (4, L))),
     "MultilabelRecall.update: multidim_average=samplewise needs preds of at least 3 dimensions"),
    (lambda: nm.BinaryAccuracy(multidim_average="samplewise", weighted=True),
     "BinaryAccuracy: multidim_average=samplewise counts without weights"),
    (lambda: nm.BinaryAccuracy(multidim_average="sample"), "BinaryAccuracy: multidim_average must be"),
    (lambda: nm.MulticlassRecall(num_classes=None, average="micro", multidim_average="samplewise"),
     "MulticlassRecall: multidim_average=samplewise needs num_classes, got None"),
])
def test_errors_name_the_metric_and_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_refused_update_leaves_the_rows_as_they_were():
    metric = make("binary", "accuracy")
    run(metric, batches("binary", 11))
    before = metric.state_dict()
    with pytest.raises(ValueError):
        metric.update(torch.rand(4), torch.randint(0, 2, (4,)))
    after = metric.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_empty_batches_and_samples_without_positions():
    """No samples add no rows; samples with no positions add zero counts (TorchMetrics' 0 / 0 rules)."""
    metric = make("multiclass", "stat_scores", "micro")
    metric.update(torch.empty(0, C, 3), torch.empty(0, 3, dtype=torch.long))
    assert metric.compute().shape == (0, 5)
    metric.update(torch.empty(2, C, 0), torch.empty(2, 0, dtype=torch.long))
    assert metric.compute().tolist() == [[0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]
    binary = make("binary", "accuracy")
    binary.update(torch.empty(2, 0), torch.empty(2, 0, dtype=torch.long))
    assert binary.compute().tolist() == [0.0, 0.0]


@pytest.mark.filterwarnings("ignore:.*called before any update")
def test_reading_the_state_beside_another_threads_updates_sees_whole_updates():
    """Updates that grow the rows take the state's lock, and so do compute() and state_dict()."""
    import threading
    metric = make("multiclass", "accuracy", "none")
    preds, target = torch.randint(0, C, (1, 4)), torch.randint(0, C, (1, 4))
    writer = threading.Thread(target=lambda: [metric.update(preds, target) for _ in range(300)])
    writer.start()
    while writer.is_alive():
        state = metric.state_dict()
        assert len({state[k].shape[0] for k in ("tp", "fp", "tn", "fn")}) == 1
        metric.compute()
    writer.join()
    assert metric.compute().shape[0] == 300


STRIDED_BATCHES = """
import torch, nosync_metrics as nm
torch.manual_seed(0)
batches = [("Multilabel", dict(num_labels=3), torch.rand(1, 3, 2), torch.randint(2, (1, 3, 2))),
           ("Binary", {}, torch.rand(4, 8, 2)[..., 1], torch.randint(2, (4, 8, 2))[..., 0])]
for task, options, preds, target in batches:
    strided = getattr(nm, task + "StatScores")(multidim_average="samplewise", **options)
    strided.update(preds, target)
    laid_out = getattr(nm, task + "StatScores")(multidim_average="samplewise", **options)
    laid_out.update(preds.contiguous(), target.contiguous())
    assert torch.equal(strided.compute(), laid_out.compute()), task
"""


def test_strided_batches_count_as_laid_out_ones_and_torch_warns_of_no_copy():
    """A batch read as a strided view (a column of a wider tensor; one sample, whose labels moved last
    stay a view) counts as its contiguous copy, and torch prints no warning that it copied one itself
    (bucketize does, on stderr; the ATen path copies it first). In a process of its own: torch
    prints that warning once per process."""
    run = subprocess.run([sys.executable, "-c", STRIDED_BATCHES], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "non-contiguous" not in run.stderr, run.stderr
