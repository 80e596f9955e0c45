"""TorchMetrics' inputs, all without a sync: integer and bool values and weights, NumPy scalars
and arrays, Python lists and bools, float {0., 1.} targets in binary and multilabel tasks. Values
against numpy and sklearn."""

import copy

import numpy as np
import pytest
import sklearn.metrics as skm
import torch

import nosync_metrics as nm


def test_integer_and_bool_values_and_weights():
    pred, y = torch.tensor([0, 1, 2, 1]), torch.tensor([0, 1, 1, 1])
    correct = nm.SumMetric()
    correct.update((pred == y).sum())  # an int64 0-dim tensor
    correct.update(pred == y)  # a bool tensor
    assert correct.compute().item() == 6.0

    mean = nm.MeanMetric().set_dtype(torch.float64)
    values, weights = np.array([2, 4, 6, 8]), np.array([True, False, True, True])
    mean.update(torch.tensor(values, dtype=torch.int32), torch.tensor(weights))
    assert mean.compute().item() == pytest.approx(np.average(values, weights=weights), rel=1e-15)

    low = nm.MinMetric()
    low.update(torch.tensor([5, -3, 9], dtype=torch.int16))
    assert low.compute().item() == -3.0


@pytest.mark.parametrize("scalar", [np.float32(2.5), np.float64(2.5), np.int64(2), np.bool_(True), True, 3])
def test_numpy_scalars_and_python_bools_are_host_scalars(scalar):
    total = nm.SumMetric()
    total.update(scalar)
    total.update(torch.ones(2), weight=scalar)
    assert total.compute().item() == pytest.approx(float(scalar) + 2 * float(scalar))


def test_numpy_arrays_and_lists():
    rng = np.random.default_rng(0)
    values, weights = rng.normal(size=50), rng.uniform(size=50)
    mean = nm.MeanMetric().set_dtype(torch.float64)
    mean.update(values, weights)  # NumPy arrays
    mean.update(list(values[:10]), list(weights[:10]))  # lists
    want = np.average(np.concatenate([values, values[:10]]), weights=np.concatenate([weights, weights[:10]]))
    assert mean.compute().item() == pytest.approx(want, rel=1e-12)

    acc = nm.MulticlassAccuracy(num_classes=3, average="micro")
    preds, target = rng.integers(0, 3, 40), rng.integers(0, 3, 40)
    acc.update(list(preds), target)
    assert acc.compute().item() == pytest.approx(skm.accuracy_score(target, preds), rel=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_float_targets_in_binary_and_multilabel_tasks(dtype):
    rng = np.random.default_rng(1)
    probs, target = rng.uniform(size=(64, 3)), rng.integers(0, 2, (64, 3))
    binary = nm.BinaryF1Score()
    binary.update(torch.tensor(probs[:, 0]), torch.tensor(target[:, 0], dtype=dtype))
    assert binary.compute().item() == pytest.approx(skm.f1_score(target[:, 0], probs[:, 0] > 0.5), rel=1e-6)

    multilabel = nm.MultilabelAccuracy(num_labels=3, average="micro")
    multilabel.update(torch.tensor(probs), torch.tensor(target, dtype=dtype))
    assert multilabel.compute().item() == pytest.approx(((probs > 0.5) == target).mean(), rel=1e-6)


def test_float_targets_that_are_not_labels_are_counted_as_bad_input():
    acc = nm.BinaryAccuracy()
    acc.update(torch.tensor([0.9, 0.2, 0.7, 0.1]), torch.tensor([1.0, 0.5, float("nan"), 0.0]))
    with pytest.raises(ValueError, match="BinaryAccuracy: 2 targets not 0 or 1 in 1 update"):
        acc.compute()
    ignoring = nm.BinaryAccuracy(ignore_index=-1)
    ignoring.update(torch.tensor([0.9, 0.2, 0.7]), torch.tensor([1.0, -1.0, 0.0]))
    assert ignoring.compute().item() == 0.5  # -1. is the ignore_index, not a bad target


def test_multiclass_targets_may_be_floats_of_whole_numbers():
    # TorchMetrics takes float class indices (and truncates the others); a float that is not a
    # whole number is counted as a bad target here, as for binary targets
    scores, target = torch.tensor([[0.8, 0.1, 0.1], [0.1, 0.2, 0.7], [0.3, 0.6, 0.1]]), torch.tensor([0.0, 1.0, 1.0])
    for preds in (scores, scores.argmax(1)):
        for metric in (nm.MulticlassAccuracy(num_classes=3), nm.MulticlassConfusionMatrix(num_classes=3)):
            expected = type(metric)(num_classes=3)
            expected.update(preds, target.long())
            metric.update(preds, target)
            assert torch.equal(metric.compute(), expected.compute())
    ignoring = nm.MulticlassAccuracy(num_classes=3, average="micro", ignore_index=-1)
    ignoring.update(scores, torch.tensor([0.0, -1.0, 1.0]))
    assert ignoring.compute().item() == 1.0  # -1. is the ignore_index
    bad = nm.MulticlassAccuracy(num_classes=3)
    bad.update(scores, torch.tensor([0.0, 1.5, float("nan")]))
    assert bad.bad_input()["counts"]["targets outside [0, 3)"] == 2
    with pytest.raises(ValueError, match="MulticlassAccuracy: 2 targets outside"):
        bad.compute()
    with pytest.raises(TypeError, match="MulticlassAccuracy.update: target has dtype ComplexFloat"):
        nm.MulticlassAccuracy(num_classes=3).update(torch.tensor([0, 1]), torch.tensor([0, 1], dtype=torch.cfloat))


def test_multiclass_label_preds_may_be_floats_of_whole_numbers():
    # TorchMetrics takes float preds shaped like the target as labels (logits.argmax(1).float()) and
    # truncates them; whole numbers count as the integers they equal here, the others as bad
    # predictions, as float targets do
    rng = np.random.default_rng(2)
    preds, target = rng.integers(0, 4, 200), rng.integers(0, 4, 200)
    for dtype in (torch.float32, torch.float64, torch.float16):
        for cls in (nm.MulticlassAccuracy, nm.MulticlassF1Score, nm.MulticlassConfusionMatrix):
            metric = cls(num_classes=4)
            metric.update(torch.tensor(preds, dtype=dtype), torch.tensor(target))
            expected = cls(num_classes=4)
            expected.update(torch.tensor(preds), torch.tensor(target))
            assert torch.equal(metric.compute(), expected.compute()), (dtype, cls)
    acc = nm.MulticlassAccuracy(num_classes=4, average="micro")
    acc.update(torch.tensor(preds).float(), torch.tensor(target))
    assert acc.compute().item() == pytest.approx(skm.accuracy_score(target, preds), rel=1e-6)
    bad = nm.MulticlassAccuracy(num_classes=3)
    bad.update(torch.tensor([0.0, 1.5, float("nan"), 2.0]), torch.tensor([0, 1, 2, 2]))
    assert bad.bad_input()["counts"]["NaN or out-of-range predictions"] == 2
    with pytest.raises(ValueError, match="MulticlassAccuracy: 2 NaN or out-of-range predictions in 1 update"):
        bad.compute()


def _negated_views(values):
    """Views whose values are `values` while their memory holds -values (the negative bit): one
    element of x.conj().imag, and a contiguous view of several."""
    if values.numel() == 1:
        return [torch.complex(torch.zeros_like(values), -values).conj().imag]
    return [torch._neg_view(-values)]


@pytest.mark.parametrize("shape", [(1,), (), (6,)])
def test_views_with_the_negative_bit_are_read_as_their_values(shape):
    gen = torch.Generator().manual_seed(5)
    values = torch.randn(shape, generator=gen, dtype=torch.float64).reshape(shape)
    weights = torch.rand(shape, generator=gen, dtype=torch.float64).reshape(shape)
    for view in _negated_views(values):
        assert view.is_neg() and torch.equal(view, values)
        for cls in (nm.MeanMetric, nm.SumMetric, nm.MinMetric, nm.MaxMetric):
            assert cls()(view).item() == cls()(values).item(), cls.__name__
        for weight in _negated_views(weights):
            assert nm.MeanMetric()(values, weight).item() == nm.MeanMetric()(values, weights).item()
            assert nm.SumMetric()(view, weight).item() == nm.SumMetric()(values, weights).item()
    if values.dim() == 0:
        return
    target = (values > 0).long()  # the logits' signs: accuracy 1 where read right, 0 where negated
    for view in _negated_views(values):
        assert nm.BinaryAccuracy()(view, target).item() == 1.0
        assert nm.BinaryAccuracy(weighted=True)(view, target, _negated_views(weights)[0]).item() == 1.0
    scores = torch.stack([-values, values], -1)  # class 1 where the value is positive
    for view in _negated_views(scores.flatten()):
        assert nm.MulticlassAccuracy(num_classes=2, average="micro")(view.reshape(scores.shape), target).item() == 1.0


def test_a_0_dim_pair_is_a_batch_of_one_for_binary_and_multiclass():
    # TorchMetrics' confusion matrices flatten their inputs, so a per-sample loop may give scalars
    cases = [(nm.MulticlassConfusionMatrix(num_classes=3), torch.tensor(2), torch.tensor(1)),
             (nm.MulticlassAccuracy(num_classes=3), torch.tensor(2), torch.tensor(2)),
             (nm.BinaryConfusionMatrix(), torch.tensor(0.7), torch.tensor(1)),
             (nm.BinaryF1Score(), torch.tensor(0.2), torch.tensor(1))]
    for metric, preds, target in cases:
        batch = copy.deepcopy(metric)
        batch.update(preds.reshape(1), target.reshape(1))
        metric.update(preds, target)
        assert torch.equal(metric.compute(), batch.compute()), type(metric).__name__
    weighted = nm.BinaryConfusionMatrix(weighted=True)
    weighted.update(torch.tensor(0.7), torch.tensor(1), torch.tensor(2.0))
    assert weighted.compute().tolist() == [[0.0, 0.0], [0.0, 2.0]]
    with pytest.raises(ValueError, match="MultilabelConfusionMatrix"):
        nm.MultilabelConfusionMatrix(num_labels=2).update(torch.tensor(0.7), torch.tensor(1))


UNSIGNED = [getattr(torch, name) for name in ("uint16", "uint32", "uint64") if hasattr(torch, name)]


@pytest.mark.skipif(not UNSIGNED, reason="uint16, uint32 and uint64 are PyTorch 2's (test-torch2.sh runs this)")
@pytest.mark.parametrize("multidim_average", ["global", "samplewise"])  # the CPU path, the device path
def test_multiclass_targets_of_pytorch2_unsigned_dtypes_count_as_int64_ones(multidim_average):
    """uint16 (16-bit PNG masks), uint32 and uint64 targets do not promote with int64 in PyTorch 2: they
    are made int64 first, and count as the same targets in int64 (ignored ones among them), which
    sklearn's confusion matrix checks; on meta too."""
    g = torch.Generator().manual_seed(5)
    scores, target = torch.randn(6, 4, 3, generator=g), torch.randint(0, 4, (6, 3), generator=g)
    options = dict(num_classes=4, average=None, multidim_average=multidim_average, ignore_index=2)
    want = nm.MulticlassStatScores(**options)
    want.update(scores, target)
    kept = target != 2
    matrix = skm.confusion_matrix(target[kept].numpy(), scores.argmax(1)[kept].numpy(), labels=range(4))
    if multidim_average == "global":
        assert want.compute()[:, 0].tolist() == np.diag(matrix).tolist()  # tp
    for dtype in UNSIGNED:
        metric = nm.MulticlassStatScores(**options)
        metric.update(scores, target.to(dtype))
        assert torch.equal(metric.compute(), want.compute()), dtype
        on_meta = nm.MulticlassStatScores(**options).to("meta")
        on_meta.update(scores.to("meta"), target.to(dtype).to("meta"))
        assert on_meta.compute().is_meta
