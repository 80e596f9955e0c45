"""The drop-in surface beyond the values (issue 10): task names in any case, TorchMetrics 1.6's class
attributes, update_called, constructor arguments readable as attributes, MetricCollection's keys,
items and lookups, load_state_dict(strict=False), argument errors that name the metric and the
argument, and TorchMetrics' method signatures.

Expected values are TorchMetrics 1.6.3's documented examples (its docstrings) or sklearn/numpy;
attribute values are copied from its source (classification/*.py, aggregation.py, metric.py)."""

import inspect

import numpy as np
import pytest
import sklearn.metrics as skm
import torch
import torch.distributed

import nosync_metrics as nm
import nosync_metrics.distributed

T = torch.tensor


# ---------------------------------------------------------------- 0. TorchMetrics' import paths

@pytest.mark.parametrize("module, name, same_as", [
    ("collections", "MetricCollection", nm.MetricCollection),  # torchmetrics.collections
    ("metric", "Metric", nm.Metric),  # torchmetrics.metric
    ("classification", "MulticlassAccuracy", nm.MulticlassAccuracy),
    ("aggregation", "MeanMetric", nm.MeanMetric),
])
def test_torchmetrics_submodule_imports_are_an_import_change(module, name, same_as):
    imported = __import__(f"nosync_metrics.{module}", fromlist=[name])
    assert getattr(imported, name) is same_as


# ---------------------------------------------------------------- 1. task= in any case

DOC_EXAMPLES = [  # (wrapper, task as spelled, arguments, preds, target, TorchMetrics' documented value)
    (nm.Accuracy, "MultiClass", {"num_classes": 4}, T([0, 2, 1, 3]), T([0, 1, 2, 3]), 0.5),
    (nm.Accuracy, "Binary", {}, T([0, 0, 1, 1, 0, 1]), T([0, 1, 0, 1, 0, 1]), 0.6667),
    (nm.Accuracy, "MULTILABEL", {"num_labels": 3}, T([[0, 0, 1], [1, 0, 1]]), T([[0, 1, 0], [1, 0, 1]]), 0.6667),
    (nm.Precision, "MULTICLASS", {"average": "macro", "num_classes": 3}, T([2, 0, 2, 1]), T([1, 1, 2, 0]), 0.1667),
    (nm.Recall, "Multiclass", {"average": "macro", "num_classes": 3}, T([2, 0, 2, 1]), T([1, 1, 2, 0]), 0.3333),
    (nm.F1Score, "multiClass", {"num_classes": 3}, T([0, 2, 1, 0, 0, 1]), T([0, 1, 2, 0, 1, 2]), 0.3333),
    (nm.FBetaScore, "MULTICLASS", {"num_classes": 3, "beta": 0.5}, T([0, 2, 1, 0, 0, 1]), T([0, 1, 2, 0, 1, 2]),
     0.3333),
    (nm.StatScores, "Multiclass", {"num_classes": 3, "average": "micro"}, T([1, 0, 2, 1]), T([1, 1, 2, 0]),
     [2, 2, 6, 2, 4]),
    (nm.ConfusionMatrix, "BINARY", {}, T([0, 1, 0, 0]), T([1, 1, 0, 0]), [[2, 0], [1, 1]]),
]


@pytest.mark.parametrize("wrapper, task, arguments, preds, target, expected", DOC_EXAMPLES,
                         ids=[f"{w.__name__}-{t}" for w, t, *_ in DOC_EXAMPLES])
def test_task_is_matched_in_any_case(wrapper, task, arguments, preds, target, expected):
    metric = wrapper(task=task, **arguments)
    assert type(metric).__name__ == task.lower().capitalize() + wrapper.__name__
    np.testing.assert_allclose(metric(preds, target).numpy(), expected, atol=5e-5)
    lower = wrapper(task.lower(), **arguments)
    assert type(lower) is type(metric) and torch.equal(lower(preds, target), metric.compute())


@pytest.mark.parametrize("task", ["regression", "multi-class", None, 3])
def test_an_unknown_task_names_the_wrapper_and_task(task):
    with pytest.raises(ValueError, match=r"Accuracy: Invalid Classification task: expected one of \['BINARY', "
                                         r"'MULTICLASS', 'MULTILABEL'\] \(any case\), but got"):
        nm.Accuracy(task=task, num_classes=3)
    with pytest.raises(ValueError, match="Accuracy: `top_k` is expected to be `int`"):
        nm.Accuracy(task="Multiclass", num_classes=3, top_k=1.5)


# ---------------------------------------------------------------- 2. class attributes, TorchMetrics 1.6.3's values

# (is_differentiable, higher_is_better, full_state_update, plot_lower_bound, plot_upper_bound)
SCORE = (False, True, False, 0.0, 1.0)
COUNTS = (False, None, False, None, None)
BASE = (None, None, None, None, None)  # Metric's own, kept by the task wrappers
ATTRIBUTES = {"MeanMetric": (None, None, False, None, None), "SumMetric": (None, None, False, None, None),
              "MinMetric": (None, None, True, None, None), "MaxMetric": (None, None, True, None, None)}
for _family, _values in [("Accuracy", SCORE), ("Precision", SCORE), ("Recall", SCORE), ("F1Score", SCORE),
                         ("FBetaScore", SCORE), ("StatScores", COUNTS), ("ConfusionMatrix", COUNTS)]:
    ATTRIBUTES[_family] = BASE
    for _task in ("Binary", "Multiclass", "Multilabel"):
        ATTRIBUTES[_task + _family] = _values
NAMES = ("is_differentiable", "higher_is_better", "full_state_update", "plot_lower_bound", "plot_upper_bound")


def test_every_metric_class_is_in_the_table():
    classes = {n for n in nm.__all__ if isinstance(getattr(nm, n), type) and n not in (
        "Metric", "ClassificationMetric", "MetricCollection", "ShapeError", "StateDictError", "count_syncs")}
    assert classes == set(ATTRIBUTES)


@pytest.mark.parametrize("name", sorted(ATTRIBUTES))
def test_class_attributes_have_torchmetrics_values(name):
    cls = getattr(nm, name)
    assert tuple(getattr(cls, attribute) for attribute in NAMES) == ATTRIBUTES[name]
    assert cls.plot_legend_name is None


def test_class_attributes_are_constant_on_instances():
    metric = nm.MulticlassAccuracy(num_classes=3)
    assert metric.higher_is_better is True and metric.plot_upper_bound == 1.0
    for attribute in NAMES:
        with pytest.raises(RuntimeError, match=f"MulticlassAccuracy: Can't change const `{attribute}`"):
            setattr(metric, attribute, 0)
    assert metric.higher_is_better is True


# ---------------------------------------------------------------- 3. update_called

@pytest.mark.parametrize("make, batch, expected", [
    (nm.MeanMetric, (T([1.0, 2.0, 6.0]),), 3.0),
    (nm.MaxMetric, (T([1.0, 7.0, 6.0]),), 7.0),
    (lambda: nm.MulticlassAccuracy(num_classes=3, average="micro"), (T([0, 1, 2, 2]), T([0, 1, 1, 2])), 0.75),
], ids=["mean", "max", "accuracy"])
def test_update_called_follows_update_forward_reset_and_load(make, batch, expected):
    metric = make()
    fresh = metric.state_dict()
    assert metric.update_called is False
    metric.update(*batch)
    assert metric.update_called is True and metric.compute().item() == pytest.approx(expected)
    metric.reset()
    assert metric.update_called is False
    assert metric(*batch).item() == pytest.approx(expected) and metric.update_called is True
    metric.load_state_dict(fresh)
    assert metric.update_called is False


# ---------------------------------------------------------------- 4. constructor arguments as attributes

COMMON = {"multidim_average": "global", "validate_args": True}
OPTIONS = [
    (lambda: nm.MulticlassAccuracy(num_classes=5, top_k=2, average="weighted", ignore_index=-1),
     {"num_classes": 5, "top_k": 2, "average": "weighted", "ignore_index": -1, "zero_division": 0, **COMMON}),
    (lambda: nm.BinaryPrecision(threshold=0.3, zero_division=1),
     {"threshold": 0.3, "ignore_index": None, "zero_division": 1, **COMMON}),
    (lambda: nm.MultilabelF1Score(num_labels=4, threshold=0.7, average="micro"),
     {"num_labels": 4, "threshold": 0.7, "average": "micro", "ignore_index": None, "zero_division": 0, "beta": 1.0,
      **COMMON}),
    (lambda: nm.BinaryFBetaScore(beta=2.0), {"beta": 2.0, "threshold": 0.5, "zero_division": 0, **COMMON}),
    (lambda: nm.MulticlassFBetaScore(2, num_classes=3), {"beta": 2.0, "num_classes": 3}),  # an int: the float taken
    (lambda: nm.BinaryAccuracy(threshold=1), {"threshold": 1.0}),
    (lambda: nm.MultilabelStatScores(num_labels=3, average=None), {"num_labels": 3, "average": None, **COMMON}),
    (lambda: nm.MulticlassConfusionMatrix(num_classes=3, normalize="true"),
     {"num_classes": 3, "ignore_index": None, "normalize": "true", "validate_args": True}),
    (lambda: nm.BinaryConfusionMatrix(threshold=0.2), {"threshold": 0.2, "normalize": None}),
    (lambda: nm.Accuracy(task="multiclass", num_classes=3), {"num_classes": 3, "average": "micro", "top_k": 1}),
    (lambda: nm.MeanMetric(nan_strategy="ignore"), {"nan_strategy": "ignore"}),
    (lambda: nm.MaxMetric(nan_strategy=0.0), {"nan_strategy": 0.0}),
]


@pytest.mark.parametrize("make, expected", OPTIONS, ids=lambda v: "" if callable(v) else ",".join(v))
def test_options_are_readable_and_read_only(make, expected):
    metric = make()
    assert {name: getattr(metric, name) for name in expected} == expected
    assert all(type(getattr(metric, name)) is type(value) for name, value in expected.items())
    name = next(iter(expected))
    with pytest.raises(AttributeError, match=f"{type(metric).__name__}: {name} is fixed when the metric is made"):
        setattr(metric, name, expected[name])


def test_options_exist_only_where_torchmetrics_has_them():
    assert not hasattr(nm.MulticlassConfusionMatrix(num_classes=3), "average")
    assert not hasattr(nm.BinaryAccuracy(), "num_classes")
    assert not hasattr(nm.MulticlassAccuracy(num_classes=3), "threshold")
    assert not hasattr(nm.MeanMetric(), "threshold")


def test_metric_keyword_arguments_are_attributes_with_torchmetrics_defaults():
    metric = nm.BinaryRecall()
    assert (metric.compute_on_cpu, metric.dist_sync_on_step, metric.sync_on_compute, metric.compute_with_cache) == (
        False, False, True, True)
    assert metric.process_group is None and metric.dist_sync_fn is None and callable(metric.distributed_available_fn)


def test_options_given_are_the_options_used():
    g = torch.Generator().manual_seed(4)
    preds, target = torch.randn(200, 5, generator=g), torch.randint(0, 5, (200,), generator=g)
    target[:20] = -1
    metric = nm.MulticlassAccuracy(num_classes=5, average="weighted", ignore_index=-1)
    metric.update(preds, target)
    kept = target != -1
    expected = skm.recall_score(target[kept].numpy(), preds.argmax(1)[kept].numpy(), average="weighted")
    assert metric.compute().item() == pytest.approx(expected, abs=1e-6)


# ---------------------------------------------------------------- 5. MetricCollection keys, items, lookups

def _collection(**kwargs):
    return nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=3, average="micro"),
                                "f1": nm.MulticlassF1Score(num_classes=3)}, **kwargs)


def test_keys_items_values_with_prefix_and_postfix():
    coll = _collection(prefix="val_", postfix="_x")
    assert list(coll.keys()) == ["val_acc_x", "val_f1_x"] and list(coll) == ["val_acc_x", "val_f1_x"]
    assert list(coll.keys(keep_base=True)) == ["acc", "f1"]
    assert [k for k, _ in coll.items()] == ["val_acc_x", "val_f1_x"]
    assert [k for k, _ in coll.items(keep_base=True, copy_state=False)] == ["acc", "f1"]
    assert list(coll.values(copy_state=False)) == [m for _, m in coll.items()]
    for key in ("val_acc_x", "acc_x", "val_acc", "acc"):
        assert coll[key] is coll["acc"]
    assert "acc" in coll and "val_acc_x" not in coll  # TorchMetrics' ModuleDict: names without affixes
    with pytest.raises(KeyError, match="MetricCollection: no metric under 'val_top5_x'"):
        coll["val_top5_x"]


def test_values_through_renamed_keys_match_sklearn():
    preds, target = T([0, 2, 1, 0, 0, 1]), T([0, 1, 2, 0, 1, 2])
    coll = _collection(prefix="train/")
    values = coll(preds, target)
    assert values.keys() == coll.keys()
    assert values["train/acc"].item() == pytest.approx(skm.accuracy_score(target, preds))
    assert coll["train/f1"].compute().item() == pytest.approx(skm.f1_score(target, preds, average="macro"))
    assert coll.state_dict(prefix="m.").keys() == {"m." + k for k in coll.state_dict()}


# ---------------------------------------------------------------- 6. load_state_dict(strict=False)

def test_metric_partial_load_ignores_unknown_and_keeps_missing():
    source, target = nm.MeanMetric(), nm.MeanMetric()
    source.update(T([1.0, 2.0, 6.0]))
    target.update(T([10.0]))
    target.update(T([20.0]))
    partial = {k: v for k, v in source.state_dict().items() if k in ("total", "compensation")}
    partial["not_a_state"] = T([1.0])
    with pytest.raises(ValueError, match="Mean.load_state_dict: unexpected key 'not_a_state'"):
        target.load_state_dict(partial)  # strict by default: today's error, nothing loaded
    assert target.compute().item() == 15.0
    result = target.load_state_dict(partial, strict=False)
    assert result.unexpected_keys == ["not_a_state"] and "update_count" in result.missing_keys
    assert target.compute().item() == pytest.approx(np.mean([1.0, 2.0, 6.0]))  # the loaded sums
    assert target.update_count == 2  # missing: kept


def test_classification_partial_load_matches_sklearn():
    preds, target = T([2, 0, 2, 1, 1]), T([1, 1, 2, 0, 1])
    source = nm.MulticlassPrecision(num_classes=3, average="macro")
    source.update(preds, target)
    loaded = nm.MulticlassPrecision(num_classes=3, average="macro")
    assert loaded.load_state_dict({**source.state_dict(), "extra": T(0)}, strict=False) == ([], ["extra"])
    expected = skm.precision_score(target, preds, average="macro", zero_division=0)
    assert loaded.compute().item() == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("compute_groups", [True, False])
def test_collection_partial_load(compute_groups):
    preds, target = T([0, 2, 1, 0, 0, 1]), T([0, 1, 2, 0, 1, 2])
    source = _collection(compute_groups=compute_groups)
    source.update(preds, target)
    state = source.state_dict()
    del state["f1.tp"]  # with compute groups, f1 shares acc's state: taken from "acc.tp"
    state["f1.junk"] = T(1)
    loaded = _collection(compute_groups=compute_groups)
    result = loaded.load_state_dict(state, strict=False)
    assert result.missing_keys == ["f1.tp"] and result.unexpected_keys == ["f1.junk"]
    assert loaded["acc"].compute().item() == pytest.approx(skm.accuracy_score(target, preds))
    if compute_groups:
        assert loaded["f1"].compute().item() == pytest.approx(skm.f1_score(target, preds, average="macro"))
    else:
        assert loaded.state_dict()["f1.tp"].sum().item() == 0  # kept: f1 has its own state
    with pytest.raises(ValueError, match="MulticlassF1Score.load_state_dict: unexpected key 'junk'"):
        loaded.load_state_dict(state)  # strict by default: today's error


# ---------------------------------------------------------------- 7. argument errors name the metric and argument

def _accuracy():
    return nm.MulticlassAccuracy(num_classes=3)


ERRORS = [
    (lambda: nm.MulticlassAccuracy(num_classes=2.5), ValueError,
     r"MulticlassAccuracy: num_classes must be an int or None, got 2\.5 \(float\)"),
    (lambda: nm.MulticlassAccuracy(num_classes="3"), ValueError, "MulticlassAccuracy: num_classes must be an int"),
    (lambda: nm.MultilabelRecall(num_labels=None), ValueError, "MultilabelRecall: num_labels must be an int"),
    (lambda: nm.MulticlassAccuracy(num_classes=3, ignore_index=2**64), ValueError,
     "MulticlassAccuracy: ignore_index = 18446744073709551616 does not fit in a 64-bit integer"),
    (lambda: nm.MulticlassAccuracy(num_classes=3, ignore_index=1.0), ValueError,
     "MulticlassAccuracy: ignore_index must be an int or None"),
    (lambda: nm.MulticlassRecall(num_classes=3, top_k=True), ValueError, "MulticlassRecall: top_k must be an int"),
    (lambda: nm.BinaryAccuracy(threshold="0.5"), ValueError, "BinaryAccuracy: threshold must be a number"),
    (lambda: nm.BinaryFBetaScore(beta="2"), ValueError, "BinaryFBetaScore: beta must be a number"),
    (lambda: nm.MulticlassF1Score(num_classes=3, average=1), ValueError, "MulticlassF1Score: average must be a string"),
    (lambda: nm.BinaryConfusionMatrix(normalize=True), ValueError, "BinaryConfusionMatrix: normalize must be a string"),
    (lambda: nm.BinaryPrecision(validate_args="yes"), ValueError, "BinaryPrecision: validate_args must be a bool"),
    (lambda: nm.BinaryAccuracy(zero_division=0.5), ValueError, "BinaryAccuracy: zero_division must be 0 or 1"),
    (lambda: nm.MulticlassF1Score(num_classes=3, average="samples"), ValueError,
     "MulticlassF1Score: average must be 'micro', 'macro', 'weighted', 'none' or None, got 'samples'"),
    (lambda: nm.MultilabelConfusionMatrix(num_labels=3, normalize="rows"), ValueError,
     "MultilabelConfusionMatrix: normalize must be 'true', 'pred', 'all', 'none' or None, got 'rows'"),
    (lambda: nm.MeanMetric(nan_strategy="skip"), ValueError,
     r"^MeanMetric: Arg `nan_strategy` should either be a float or one of \['error', 'warn', 'ignore', 'disable'\] "
     r"but got 'skip'\.$"),
    (lambda: nm.MulticlassStatScores(num_classes=3, multidim_average="per_sample"), ValueError,
     "MulticlassStatScores: multidim_average must be 'global' or 'samplewise', got 'per_sample'"),
    (lambda: nm.MulticlassStatScores(num_classes=3, multidim_average=None), ValueError,
     "MulticlassStatScores: multidim_average must be a string"),
    (lambda: nm.BinaryRecall(device=1.5), ValueError, "BinaryRecall: device must be a device"),
    (lambda: nm.BinaryRecall(device="gpu0"), ValueError, "BinaryRecall: device 'gpu0' is not a device"),
    (lambda: nm.MinMetric(nan_strategy=[]), ValueError,
     r"^MinMetric: Arg `nan_strategy` should either .* but got \[\]\.$"),
    (lambda: nm.MeanMetric(nan_strategy=None), ValueError,
     r"^MeanMetric: Arg `nan_strategy` should either .* but got None\.$"),
    (lambda: nm.SumMetric(dtype="float64"), TypeError, "SumMetric: dtype must be a torch.dtype"),
    # TorchMetrics' Metric keyword arguments: accepted with their defaults, refused by name otherwise
    (lambda: nm.MeanMetric(compute_on_cpu="no"), ValueError, "MeanMetric: compute_on_cpu must be a bool"),
    (lambda: nm.MeanMetric(sync_on_compute=1), ValueError, "MeanMetric: sync_on_compute must be a bool"),
    (lambda: nm.MeanMetric(compute_with_cache=None), ValueError, "MeanMetric: compute_with_cache must be a bool"),
    (lambda: nm.BinaryAccuracy(dist_sync_fn=lambda *a: a), ValueError, "BinaryAccuracy: dist_sync_fn is not supported"),
    (lambda: nm.BinaryAccuracy(distributed_available_fn=True), ValueError,
     "BinaryAccuracy: distributed_available_fn must be callable"),
    (lambda: nm.MinMetric(weighted=True), ValueError, "MinMetric: unexpected keyword arguments: `weighted`"),
    # keywords named as the binding helper's own parameters are the caller's, refused by name too
    (lambda: nm.MeanMetric(name="x"), ValueError, "MeanMetric: unexpected keyword arguments: `name`"),
    (lambda: nm.Accuracy(task="multiclass", num_classes=3, signature=1), ValueError,
     "MulticlassAccuracy: unexpected keyword arguments: `signature`"),
    (lambda: nm.MulticlassConfusionMatrix(num_classes=3, zero_division=1), ValueError,
     "MulticlassConfusionMatrix: unexpected keyword arguments: `zero_division`"),
    (lambda: nm.MulticlassF1Score(), TypeError, "MulticlassF1Score: missing a required argument: 'num_classes'"),
    (lambda: nm.Precision("binary", 0.5, None, None, "micro", "global", 1, None, True, 5), TypeError,
     "Precision: too many positional arguments"),
    # a required update argument left out or given as None (trailing Nones are read as left out)
    (lambda: _accuracy().update(T([[0.2, 0.5, 0.3]])), TypeError,
     r"^MulticlassAccuracy.update: missing argument 'target' \(not given, or given as None\)$"),
    (lambda: _accuracy().update(T([[0.2, 0.5, 0.3]]), None), TypeError, "missing argument 'target' \\(not given"),
    (lambda: _accuracy().update(None, T([1])), TypeError, "^MulticlassAccuracy.update: preds is None$"),
    (lambda: nm.MeanMetric().update(), TypeError, "^Mean.update: missing argument 'value' \\(not given"),
    # integer preds with a class dimension: a ValueError, as TorchMetrics' (helper-56: a TypeError)
    (lambda: _accuracy().update(T([[0, 1, 0], [1, 0, 0]]).long(), T([1, 0]).long()), ValueError,
     r"^MulticlassAccuracy.update: preds of shape \[2, 3\] must hold floating-point scores, got Long$"),
    (lambda: nm.MulticlassConfusionMatrix(num_classes=3).update(T([[0, 1, 0]]).bool(), T([1]).long()), ValueError,
     r"^MulticlassConfusionMatrix.update: preds of shape \[1, 3\] must hold floating-point scores, got Bool$"),
    # methods
    (lambda: _accuracy().merge_state("x"), ValueError,
     "MulticlassAccuracy.merge_state: incoming_state must be a metric, a state dict or a list of them, got <class"),
    (lambda: _accuracy().merge_state([_accuracy(), 3]), ValueError, "MulticlassAccuracy.merge_state: incoming_state"),
    # a dict of some states alone (TorchMetrics merges {tp, fp, tn, fn}): named as merge_state's
    (lambda: _accuracy().merge_state({k: T([1, 1, 1]).long() for k in ("tp", "fp", "tn", "fn")}), ValueError,
     "MulticlassAccuracy.merge_state: the state dict given is not one that state_dict\\(\\) makes for this metric: "
     "MulticlassAccuracy.load_state_dict: missing key 'update_count'"),
    (lambda: _accuracy().merge_state({1: 2}), TypeError,
     "^MulticlassAccuracy.merge_state: the state dict given is not one that state_dict"),
    (lambda: _accuracy().merge_state(nm.MulticlassRecall(num_classes=3)), ValueError,
     "MulticlassAccuracy.merge_state: expected incoming state to be an instance of MulticlassAccuracy, got "
     "MulticlassRecall"),
    (lambda: _accuracy().load_state_dict([("tp", T(1))]), TypeError,
     "MulticlassAccuracy.load_state_dict: expected state_dict to be dict-like"),
    (lambda: _accuracy().load_state_dict({**_accuracy().state_dict(), "tp": 1.0}), TypeError,
     "MulticlassAccuracy.load_state_dict: 'tp' must be a torch.Tensor"),
    (lambda: _accuracy().load_state_dict({}, strict="no"), ValueError,
     "MulticlassAccuracy.load_state_dict: strict must be a bool"),
    (lambda: _accuracy().load_state_dict(_accuracy().state_dict(), assign=True), ValueError,
     "MulticlassAccuracy.load_state_dict: assign=True is not supported"),
    (lambda: _accuracy().state_dict(prefix=1), ValueError, "MulticlassAccuracy.state_dict: prefix must be a string"),
    (lambda: _accuracy().to("gpu0"), ValueError, "MulticlassAccuracy.to: .*gpu0"),
    (lambda: _accuracy().to(2.5), ValueError, "MulticlassAccuracy.to: expected a device, a dtype or a tensor"),
    (lambda: _accuracy().to("cpu", torch.float16), ValueError, "MulticlassAccuracy.to: dtype=torch.float16 is not"),
    (lambda: _collection().merge_state("x"), ValueError, "MetricCollection.merge_state: other must be a Metric"),
    (lambda: _collection().load_state_dict(3), TypeError, "MetricCollection.load_state_dict: expected state_dict"),
    (lambda: _collection().to(dtype=torch.float64), ValueError, "MetricCollection.to: dtype=torch.float64"),
    (lambda: _collection(compute_groups=[["acc", "recall"]]), ValueError,
     "MetricCollection: compute_groups names 'recall', which does not match a metric in the collection"),
]


@pytest.mark.parametrize("call, error, message", ERRORS, ids=[m[:60] for _, _, m in ERRORS])
def test_argument_errors_name_the_metric_and_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_metric_keyword_arguments_with_their_values_give_torchmetrics_values():
    preds, target = T([0, 2, 1, 0, 0, 1]), T([0, 1, 2, 0, 1, 2])
    expected = skm.f1_score(target, preds, average="macro")
    for kwargs in ({}, {"compute_on_cpu": True}, {"compute_with_cache": False}, {"process_group": None},
                   {"sync_on_compute": False, "dist_sync_on_step": True, "distributed_available_fn": lambda: False}):
        metric = nm.MulticlassF1Score(num_classes=3, **kwargs)
        assert metric(preds, target).item() == pytest.approx(expected)
        assert metric.compute().item() == pytest.approx(expected)
        assert repr(metric).startswith("MulticlassF1Score(num_classes=3")


def test_to_takes_nn_module_forms():
    metric = nm.MeanMetric()
    assert metric.to(torch.device("cpu")) is metric and metric.to(device="cpu") is metric
    assert metric.to(torch.zeros(1)) is metric and metric.cpu() is metric
    assert metric.to("meta").device == torch.device("meta")


def test_distributed_available_fn_decides_whether_compute_reduces(monkeypatch):
    reduced = []
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(nosync_metrics.distributed, "_check_device", lambda packed, group: "cpu")
    monkeypatch.setattr(nosync_metrics.distributed, "_same_on_every_rank", lambda text, group, device: True)
    monkeypatch.setattr(nosync_metrics.distributed, "reduce_packed",
                        lambda packed, description, group, who, **checked: reduced.append(who))
    asked = []
    local = nm.SumMetric(distributed_available_fn=lambda: asked.append(1) or False)
    everywhere = nm.SumMetric()
    for metric in (local, everywhere):
        metric.update(T([1.0, 2.0]))
    assert local.compute().item() == 3.0 and asked and reduced == []
    local.sync()  # not available: nothing to sync, nothing to undo
    assert local._sync_cache is None and reduced == []
    assert everywhere.compute().item() == 3.0 and reduced == ["Sum"]  # the (stubbed) reduction ran
    assert nm.MetricCollection({"local": local, "everywhere": everywhere}).compute() == {"local": 3.0,
                                                                                      "everywhere": 3.0}
    # each member decides for itself, as in TorchMetrics: the collection reduces for "everywhere", and
    # "local" keeps its own value (test_distributed checks the values over two processes)
    assert reduced == ["Sum", "MetricCollection"]
    reduced.clear()
    assert nm.MetricCollection({"local": local}).compute() == {"local": 3.0} and reduced == []


# ---------------------------------------------------------------- 8. signatures and docstrings

COMMON_METHODS = {
    "forward": ["args", "kwargs"], "__call__": ["args", "kwargs"], "compute": [], "reset": [],
    "merge_state": ["incoming_state"], "state_dict": ["destination", "prefix", "keep_vars"],
    "load_state_dict": ["state_dict", "strict", "assign"], "clone": [], "to": ["args", "kwargs"],
    "sync": ["dist_sync_fn", "process_group", "should_sync", "distributed_available"], "unsync": ["should_unsync"],
    "sync_context": ["dist_sync_fn", "process_group", "should_sync", "should_unsync", "distributed_available"],
    "cpu": [], "cuda": ["device"], "check": [], "bad_input": [], "lock_updates": ["on"],
}
UPDATE = {"MeanMetric": ["value", "weight"], "SumMetric": ["value", "weight"], "MinMetric": ["value"],
          "MaxMetric": ["value"]}
TASK_CLASSES = [n for n, v in ATTRIBUTES.items() if v is not BASE]


def _names(function):
    return list(inspect.signature(function).parameters)


@pytest.mark.parametrize("name", sorted(TASK_CLASSES))
def test_methods_have_torchmetrics_signatures_and_docstrings(name):
    cls = getattr(nm, name)
    assert _names(cls.update)[1:] == UPDATE.get(name, ["preds", "target", "weight"]) and cls.update.__doc__
    for method, parameters in COMMON_METHODS.items():
        assert _names(getattr(cls, method))[1:] == parameters, method
        assert getattr(cls, method).__doc__, method
    init = inspect.signature(cls.__init__).parameters
    for kwarg in ("compute_on_cpu", "dist_sync_on_step", "process_group", "dist_sync_fn", "distributed_available_fn",
                  "sync_on_compute", "compute_with_cache", "kwargs"):
        assert kwarg in init


def test_collection_methods_have_torchmetrics_signatures_and_docstrings():
    expected = {"keys": ["keep_base"], "items": ["keep_base", "copy_state"], "values": ["copy_state"],
                "__getitem__": ["key", "copy_state"], "update": ["args", "kwargs"], "forward": ["args", "kwargs"],
                "compute": [], "reset": [], "clone": ["prefix", "postfix"], "add_metrics": ["metrics",
                                                                                         "additional_metrics"],
                "state_dict": ["destination", "prefix", "keep_vars"], "load_state_dict": ["state_dict", "strict",
                                                                                          "assign"],
                "to": ["args", "kwargs"], "unsync": ["should_unsync"], "check": []}
    for method, parameters in expected.items():
        function = getattr(nm.MetricCollection, method)
        assert _names(function)[1:] == parameters, method
        assert function.__doc__, method
