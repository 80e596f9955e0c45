"""The dtypes of the values (issue 10, item 4): TorchMetrics 1.6's, while the state keeps its own.

The expected dtypes are read from TorchMetrics 1.6.3's source, not from our output:
- aggregation.py: the states are made with dtype=torch.get_default_dtype(), so values come in it;
- utilities/compute.py, _safe_divide: `num.float()` on integer counts, so scores are float32;
  save F-beta's (functional/classification/f_beta.py, _fbeta_reduce: `(1 + beta**2) * tp`, integer
  counts times a Python float, is in the default dtype, and _safe_divide keeps a floating dtype);
- classification/stat_scores.py and confusion_matrix.py: the states are torch.long counts;
  functional/classification/stat_scores.py: macro is `res.float().mean()` (float32), weighted is
  `res * (weight / weight.sum())` (long / long: the default dtype); confusion_matrix.py,
  _confusion_matrix_reduce: `confmat.float()` before normalizing;
- metric.py: set_dtype(d) is nn.Module.type(d) on every state (counts too), so every value then
  comes in d, save StatScores' macro average (`.float()` again); type/float/double/half return self.
"""

import copy

import numpy as np
import pytest
import torch
from sklearn import metrics as sklearn_metrics

import nosync_metrics as nm
from round_trips import pickled

T = torch.tensor
BINARY = (T([0, 1, 1, 0, 1]), T([0, 1, 0, 0, 1]))
MULTICLASS = (T([0, 2, 1, 0, 2]), T([0, 1, 2, 0, 2]))
MULTILABEL = (T([[0, 1], [1, 1], [1, 0]]), T([[0, 1], [0, 1], [1, 1]]))
DEFAULT = "the default dtype"  # the dtype TorchMetrics makes its floating states in

# (make, batch, TorchMetrics 1.6's dtype before set_dtype)
CASES = {
    "MeanMetric": (nm.MeanMetric, (T([1.0, 2.0]),), DEFAULT),
    "SumMetric": (nm.SumMetric, (T([1.0, 2.0]),), DEFAULT),
    "MinMetric": (nm.MinMetric, (T([1.0, 2.0]),), DEFAULT),
    "MaxMetric": (nm.MaxMetric, (T([1.0, 2.0]),), DEFAULT),
    "BinaryStatScores": (nm.BinaryStatScores, BINARY, torch.int64),
    "MulticlassStatScores micro": (lambda: nm.MulticlassStatScores(3, average="micro"), MULTICLASS, torch.int64),
    "MulticlassStatScores none": (lambda: nm.MulticlassStatScores(3, average=None), MULTICLASS, torch.int64),
    "MulticlassStatScores macro": (lambda: nm.MulticlassStatScores(3), MULTICLASS, torch.float32),
    "MulticlassStatScores weighted": (lambda: nm.MulticlassStatScores(3, average="weighted"), MULTICLASS, DEFAULT),
    "MultilabelStatScores macro": (lambda: nm.MultilabelStatScores(2), MULTILABEL, torch.float32),
    "MultilabelStatScores weighted": (lambda: nm.MultilabelStatScores(2, average="weighted"), MULTILABEL, DEFAULT),
    "BinaryAccuracy": (nm.BinaryAccuracy, BINARY, torch.float32),
    "MulticlassAccuracy": (lambda: nm.MulticlassAccuracy(3), MULTICLASS, torch.float32),
    "MultilabelAccuracy": (lambda: nm.MultilabelAccuracy(2), MULTILABEL, torch.float32),
    "MulticlassPrecision weighted": (lambda: nm.MulticlassPrecision(3, average="weighted"), MULTICLASS, torch.float32),
    "MultilabelRecall none": (lambda: nm.MultilabelRecall(2, average=None), MULTILABEL, torch.float32),
    "BinaryF1Score": (nm.BinaryF1Score, BINARY, DEFAULT),
    "MulticlassFBetaScore micro": (lambda: nm.MulticlassFBetaScore(0.5, 3, average="micro"), MULTICLASS, DEFAULT),
    "MulticlassF1Score weighted": (lambda: nm.MulticlassF1Score(3, average="weighted"), MULTICLASS, DEFAULT),
    "MultilabelFBetaScore none": (lambda: nm.MultilabelFBetaScore(2.0, 2, average=None), MULTILABEL, DEFAULT),
    "F1Score binary samplewise": (lambda: nm.F1Score(task="binary", multidim_average="samplewise"),
                                  (T([[0, 1, 1], [0, 1, 0]]), T([[0, 1, 0], [1, 1, 0]])), DEFAULT),
    "BinaryConfusionMatrix": (nm.BinaryConfusionMatrix, BINARY, torch.int64),
    "MulticlassConfusionMatrix": (lambda: nm.MulticlassConfusionMatrix(3), MULTICLASS, torch.int64),
    "MultilabelConfusionMatrix": (lambda: nm.MultilabelConfusionMatrix(2), MULTILABEL, torch.int64),
    "MulticlassConfusionMatrix true": (lambda: nm.MulticlassConfusionMatrix(3, normalize="true"), MULTICLASS,
                                       torch.float32),
    "BinaryConfusionMatrix all": (lambda: nm.BinaryConfusionMatrix(normalize="all"), BINARY, torch.float32),
}


def _expected(dtype, default):
    return default if dtype == DEFAULT else dtype


def _values(metric, batch):
    """forward()'s and compute()'s values."""
    return metric(*batch), metric.compute()


@pytest.mark.parametrize("name", CASES)
def test_values_come_in_torchmetrics_dtypes(name, default_dtype):
    make, batch, dtype = CASES[name]
    metric = make()
    assert metric.dtype == default_dtype
    for value in _values(metric, batch):
        assert value.dtype == _expected(dtype, default_dtype)


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dst", [torch.float64, torch.float16])
def test_after_set_dtype_every_value_comes_in_it_and_the_state_keeps_its_dtype(name, dst):
    make, batch, _ = CASES[name]
    metric = make()
    states = {k: v.dtype for k, v in metric.state_dict().items()}
    assert metric.set_dtype(dst) is metric and metric.dtype == dst
    for value in _values(metric, batch):
        assert value.dtype == (torch.float32 if name.endswith("StatScores macro") else dst)
    assert {k: v.dtype for k, v in metric.state_dict().items()} == states


def test_mean_of_one_float_is_close_to_a_default_dtype_tensor():
    assert torch.allclose(nm.MeanMetric()(1.0), T(1.0))
    mean = nm.MeanMetric()
    mean.update(1.0)
    assert torch.allclose(mean.compute(), T(1.0))


def test_set_dtype_float64_gives_the_float64_accumulators_full_precision():
    values = np.array([0.1, 0.2, 0.4, 1.0 / 3.0])
    want = np.mean(values)
    assert float(np.float32(want)) != want  # the float32 value would differ
    mean = nm.MeanMetric().set_dtype(torch.float64)
    batch = mean(T(values[:2]))
    assert batch.dtype == torch.float64 and batch.item() == pytest.approx(np.mean(values[:2]), rel=1e-15)
    mean.update(T(values[2:]))
    assert mean.compute().dtype == torch.float64 and mean.compute().item() == pytest.approx(want, rel=1e-15)


@pytest.mark.parametrize("default_dtype", [torch.float64], indirect=True, ids=["default_float64"])
def test_default_dtype_float64_when_made_gives_float64_values(default_dtype):
    mean = nm.MeanMetric()
    torch.set_default_dtype(torch.float32)  # (the metric keeps the dtype it was made in)
    mean.update(T([0.1, 0.2, 0.4], dtype=torch.float64))
    assert mean.dtype == torch.float64 and mean.compute().dtype == torch.float64
    assert mean.compute().item() == pytest.approx(np.mean([0.1, 0.2, 0.4]), rel=1e-15)


def test_an_aggregators_dtype_argument_chooses_the_metrics_dtype_and_the_accumulators_stay_float64():
    float32 = nm.SumMetric(dtype=torch.float32)
    assert float32.dtype == torch.float32 and float32.state_dict()["total"].dtype == torch.float64
    float64 = nm.SumMetric(dtype=torch.float64)
    float64.update(T([0.1, 0.2], dtype=torch.float64))
    assert float64.dtype == torch.float64 and float64.compute().item() == pytest.approx(0.1 + 0.2, rel=1e-15)
    float32.set_dtype(torch.float64)  # the values come in float64, rounded to the metric's float32 first
    float32.update(T([0.1, 0.2], dtype=torch.float64))
    assert float32.compute().dtype == torch.float64 and float32.state_dict()["total"].dtype == torch.float64
    assert float32.compute().item() == float(np.float32(0.1 + 0.2))


@pytest.mark.parametrize("name", ["MeanMetric", "MulticlassAccuracy", "BinaryConfusionMatrix"])
def test_half_float_double_and_type_change_nothing(name):
    make, batch, _ = CASES[name]
    metric, reference = make(), make()
    metric.update(*batch)
    reference.update(*batch)
    states = {k: v.dtype for k, v in metric.state_dict().items()}
    for convert in (lambda m: m.half(), lambda m: m.float(), lambda m: m.double(), lambda m: m.type(torch.float16)):
        assert convert(metric) is metric
    net = torch.nn.Sequential()
    net.metric = metric
    net.half()
    net.bfloat16()
    assert metric.dtype == reference.dtype and {k: v.dtype for k, v in metric.state_dict().items()} == states
    value, expected = metric.compute(), reference.compute()
    assert value.dtype == expected.dtype and torch.equal(value, expected)


def test_set_dtype_takes_a_tensor_type_name_and_refuses_anything_else():
    assert nm.MeanMetric().set_dtype("torch.DoubleTensor").dtype == torch.float64
    assert nm.MeanMetric().set_dtype("torch.cuda.HalfTensor").dtype == torch.float16
    for bad in ("float64", "torch.nothing", 64, None, float):  # a ValueError, as TorchMetrics raises
        with pytest.raises(ValueError, match="MeanMetric.set_dtype: expected a torch.dtype or a tensor type name"):
            nm.MeanMetric().set_dtype(bad)
    collection = nm.MetricCollection({"loss": nm.MeanMetric(), "acc": nm.MulticlassAccuracy(3)})
    with pytest.raises(ValueError, match="MetricCollection.set_dtype: expected a torch.dtype"):
        collection.set_dtype("float64")


@pytest.mark.parametrize("dst", [torch.int64, torch.int32, torch.bool, torch.complex64, "torch.LongTensor"])
def test_set_dtype_refuses_a_dtype_that_is_not_floating(dst):
    """TorchMetrics takes one, and its accuracy stays a float32 fraction; here every value would come
    in it, cut to a whole number (an accuracy of 2/3 as 0), so it is refused and changes nothing."""
    accuracy = nm.MulticlassAccuracy(3, average="micro")
    accuracy.update(T([[.1, .7, .2], [.5, .3, .2], [.1, .1, .8]]), torch.tensor([1, 0, 0]))
    collection = nm.MetricCollection({"loss": nm.MeanMetric(), "acc": accuracy})
    for target, who in ((accuracy, "MulticlassAccuracy"), (collection, "MetricCollection")):
        with pytest.raises(ValueError, match=f"{who}.set_dtype: expected a floating dtype"):
            target.set_dtype(dst)
    assert accuracy.dtype == torch.get_default_dtype()
    assert torch.allclose(accuracy.compute(), T(2 / 3))


def test_the_dtype_set_survives_reset_clone_pickle_and_deepcopy():
    mean = nm.MeanMetric().set_dtype(torch.float64)
    mean.update(1.0)
    mean.reset()
    for copied in (mean, mean.clone(), pickled(mean), copy.deepcopy(mean)):
        assert copied.dtype == torch.float64 and copied(2.0).dtype == torch.float64


def test_collection_set_dtype_applies_to_every_metric():
    collection = nm.MetricCollection({"loss": nm.MeanMetric(), "acc": nm.MulticlassAccuracy(3),
                                      "cm": nm.MulticlassConfusionMatrix(3)}, prefix="val_")
    assert collection(value=T([0.5]), preds=MULTICLASS[0], target=MULTICLASS[1])["val_cm"].dtype == torch.int64
    assert collection.set_dtype(torch.float64) is collection
    assert all(metric.dtype == torch.float64 for metric in collection.values())
    batch = collection(value=T([0.5]), preds=MULTICLASS[0], target=MULTICLASS[1])
    assert {v.dtype for v in batch.values()} == {v.dtype for v in collection.compute().values()} == {torch.float64}
    assert copy.deepcopy(collection).compute()["val_loss"].dtype == torch.float64


@pytest.mark.parametrize("name", ["MeanMetric", "MulticlassAccuracy", "MulticlassStatScores weighted"])
def test_the_conversion_adds_no_sync(name):
    make, batch, _ = CASES[name]
    native, converted = make(), make().set_dtype(torch.float64)
    for metric in (native, converted):
        with nm.count_syncs() as syncs:
            metric(*batch)
        assert syncs.total == 0
    native.update(*batch)
    converted.update(*batch)
    with nm.count_syncs() as native_syncs:
        native.compute()
    with nm.count_syncs() as converted_syncs:
        converted.compute()
    assert converted_syncs.by_op == native_syncs.by_op


@pytest.mark.parametrize("default_dtype", [torch.float64], indirect=True, ids=["default_float64"])
def test_fbeta_under_a_float64_default_is_computed_in_float64(default_dtype):
    """As TorchMetrics computes it (and sklearn, in float64): not a float32 value widened."""
    rng = np.random.default_rng(3)
    preds, target = rng.integers(0, 5, 997), rng.integers(0, 5, 997)
    want = sklearn_metrics.fbeta_score(target, preds, beta=0.3, average="macro")
    metric = nm.MulticlassFBetaScore(0.3, 5)
    metric.update(T(preds), T(target))
    value = metric.compute()
    assert value.dtype == torch.float64 and value.item() == pytest.approx(want, rel=1e-15)
    assert float(np.float32(want)) != want  # a float32 value would differ
    torch.set_default_dtype(torch.float32)  # back under float32: float32
    metric.update(T(preds), T(target))
    assert metric.compute().dtype == torch.float32
