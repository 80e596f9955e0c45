"""Metrics and MetricCollection are torch.nn.Modules, as in TorchMetrics: submodules of a model, moved
by model.to(), copied by deepcopy and AveragedModel, saved by pickle and torch.save(model), and in a
model's state_dict() only when persistent(True). Values are checked against NumPy."""

import copy
import threading

import numpy as np
import pytest
import torch
from torch.optim.swa_utils import AveragedModel

import nosync_metrics as nm
from round_trips import pickled, torch_saved

# ---------------------------------------------------------------- the metrics, their streams, NumPy's values


def _stream(seed, batches=4):
    """Keyword arguments of `batches` updates: values, 4-class logits, binary and 3-label scores."""
    g = torch.Generator().manual_seed(seed)
    return [{"value": torch.rand(8, generator=g, dtype=torch.float64) * 10,
             "logits": torch.randn(8, 4, generator=g), "labels": torch.arange(8) % 4,
             "scores": torch.rand(8, generator=g), "binary": torch.randint(0, 2, (8,), generator=g),
             "label_scores": torch.rand(8, 3, generator=g), "multilabel": torch.randint(0, 2, (8, 3), generator=g)}
            for _ in range(batches)]


def _joined(stream, name):
    return np.concatenate([b[name].numpy() for b in stream])


def _confusion(target, predicted, classes):
    matrix = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(matrix, (target, predicted), 1)
    return matrix


def _macro_accuracy(stream):
    matrix = _confusion(_joined(stream, "labels"), _joined(stream, "logits").argmax(1), 4)
    return np.mean(np.diag(matrix) / matrix.sum(1))  # every class occurs in every batch


def _binary_f1(stream):
    predicted, target = _joined(stream, "scores") > 0.5, _joined(stream, "binary") == 1
    tp, fp, fn = np.sum(predicted & target), np.sum(predicted & ~target), np.sum(~predicted & target)
    return 2 * tp / (2 * tp + fp + fn)


def _macro_multilabel_precision(stream):
    predicted, target = _joined(stream, "label_scores") > 0.5, _joined(stream, "multilabel") == 1
    return np.mean(np.sum(predicted & target, 0) / np.sum(predicted, 0))


# name -> (the metric, its update's arguments from a batch, NumPy's value of a stream)
SINGLE = {
    "MeanMetric": (nm.MeanMetric, lambda b: {"value": b["value"]}, lambda s: np.mean(_joined(s, "value"))),
    "SumMetric": (nm.SumMetric, lambda b: {"value": b["value"]}, lambda s: np.sum(_joined(s, "value"))),
    "MaxMetric": (nm.MaxMetric, lambda b: {"value": b["value"]}, lambda s: np.max(_joined(s, "value"))),
    "MulticlassAccuracy": (lambda: nm.MulticlassAccuracy(num_classes=4),
                           lambda b: {"preds": b["logits"], "target": b["labels"]}, _macro_accuracy),
    "BinaryF1Score": (nm.BinaryF1Score, lambda b: {"preds": b["scores"], "target": b["binary"]}, _binary_f1),
    "MultilabelPrecision": (lambda: nm.MultilabelPrecision(num_labels=3),
                            lambda b: {"preds": b["label_scores"], "target": b["multilabel"]},
                            _macro_multilabel_precision),
    "MulticlassConfusionMatrix": (lambda: nm.MulticlassConfusionMatrix(num_classes=4),
                                  lambda b: {"preds": b["logits"], "target": b["labels"]},
                                  lambda s: _confusion(_joined(s, "labels"), _joined(s, "logits").argmax(1), 4)),
}


def _collection():
    """Mixed: an aggregator, two metrics that share one state, and a confusion matrix."""
    return nm.MetricCollection({"loss": nm.MeanMetric(), "acc": nm.MulticlassAccuracy(num_classes=4),
                                "prec": nm.MulticlassPrecision(num_classes=4),
                                "cm": nm.MulticlassConfusionMatrix(num_classes=4)}, prefix="val_")


def _collection_reference(stream):
    matrix = _confusion(_joined(stream, "labels"), _joined(stream, "logits").argmax(1), 4)
    return {"val_loss": np.mean(_joined(stream, "value")), "val_acc": _macro_accuracy(stream),
            "val_prec": np.mean(np.diag(matrix) / matrix.sum(0)), "val_cm": matrix}


CASES = dict(SINGLE, MetricCollection=(
    _collection, lambda b: {"value": b["value"], "preds": b["logits"], "target": b["labels"]}, _collection_reference))


class Net(torch.nn.Module):
    """A model carrying a metric (or a collection) as an attribute."""

    def __init__(self, metric):
        super().__init__()
        self.linear = torch.nn.Linear(3, 2)
        self.metric = metric

    def forward(self, x):
        return self.linear(x)


def _updated(name, stream):
    make, arguments, _ = CASES[name]
    metric = make()
    for batch in stream:
        metric.update(**arguments(batch))
    return metric


def _assert_value(name, metric, stream):
    _assert_close(metric.compute(), CASES[name][2](stream))


def _assert_close(computed, expected):
    if isinstance(expected, dict):
        assert computed.keys() == expected.keys()
        for key, value in expected.items():
            _assert_close(computed[key], value)
    else:
        np.testing.assert_allclose(computed.numpy(), np.asarray(expected), rtol=1e-6)


def _update_counts(metric):
    members = metric.values() if isinstance(metric, nm.MetricCollection) else [metric]
    return [m.update_count for m in members]


def _devices(metric):
    members = metric.values() if isinstance(metric, nm.MetricCollection) else [metric]
    return {str(m.device) for m in members}


@pytest.fixture(params=sorted(CASES))
def name(request):
    return request.param


# ---------------------------------------------------------------- Module: registration, train/eval, moves


def test_is_a_module_registered_as_a_submodule_and_in_module_containers(name):
    stream = _stream(1)
    metric = _updated(name, stream)
    net = Net(metric)
    assert isinstance(metric, torch.nn.Module)
    assert dict(net.named_children())["metric"] is metric and net._modules["metric"] is metric
    assert torch.nn.ModuleDict({"m": metric})["m"] is metric
    assert torch.nn.ModuleList([metric])[0] is metric
    net.eval()
    assert not metric.training
    net.train()
    assert metric.training
    _assert_value(name, metric, stream)


def test_collection_members_are_its_child_modules():
    collection = _collection()
    assert [n for n, _ in collection.named_children()] == ["acc", "cm", "loss", "prec"]  # a dict in name order
    assert collection.acc is collection["val_acc"]  # a child module is an attribute, as in nn.ModuleDict


def test_model_to_moves_the_state_and_keeps_values_and_dtypes(name):
    stream = _stream(2)
    metric = _updated(name, stream)
    dtypes = {k: v.dtype for k, v in metric.state_dict().items()}
    net = Net(metric)
    assert net.to("cpu") is net and net.cpu() is net
    net.half()  # TorchMetrics keeps a state's dtype through .half() / .double()
    net.double()
    assert {k: v.dtype for k, v in metric.state_dict().items()} == dtypes
    assert _devices(metric) == {"cpu"}
    _assert_value(name, metric, stream)


def test_model_to_meta_moves_every_state(name):
    metric = CASES[name][0]()
    Net(metric).to(torch.device("meta"))
    assert _devices(metric) == {"meta"}


class _HeldTwice(torch.nn.Module):
    """A metric as an attribute and in a collection, registered before it (model.to() reaches it first)."""

    def __init__(self):
        super().__init__()
        self.acc = nm.MulticlassAccuracy(num_classes=4)
        self.metrics = nm.MetricCollection({"acc": self.acc, "f1": nm.MulticlassF1Score(num_classes=4)})


def test_a_model_moves_a_metric_it_holds_also_in_a_collection():
    # helper-51: the attribute, sharing its collection's state, refused model.to(), .cpu(),
    # share_memory() and to_empty(), even to the device it was on
    g = torch.Generator().manual_seed(3)
    batches = [(torch.randn(9, 4, generator=g), torch.randint(0, 4, (9,), generator=g)) for _ in range(3)]
    net, alone = _HeldTwice(), [nm.MulticlassAccuracy(num_classes=4), nm.MulticlassF1Score(num_classes=4)]
    for preds, target in batches[:2]:
        net.metrics.update(preds, target)
        for m in alone:
            m.update(preds, target)
    groups = net.metrics.compute_groups
    assert net.to("cpu") is net and net.cpu() is net and net.share_memory() is net
    assert net.metrics["f1"].to("cpu") is net.metrics["f1"] and net.metrics["f1"].to("cpu:0") is net.metrics["f1"]
    assert net.metrics.compute_groups == groups  # a move to the device it is on changes nothing
    net.metrics.update(*batches[2])
    for m in alone:
        m.update(*batches[2])
    values = net.metrics.compute()
    assert values["acc"].item() == alone[0].compute().item() and values["f1"].item() == alone[1].compute().item()
    net.to("meta")  # to another device: the attribute takes its own copy, which moves too
    assert {m.device.type for m in (net.acc, net.metrics["acc"], net.metrics["f1"])} == {"meta"}
    assert net.to_empty(device="cpu") is net
    assert {m.device.type for m in (net.acc, net.metrics["f1"])} == {"cpu"}


def test_a_model_made_on_meta_materializes_with_fresh_metrics(name):
    # deferred initialization: a model built on meta, then model.to_empty(device=...)
    metric = _updated(name, _stream(5))
    net = Net(metric).to("meta")
    assert net.to_empty(device="cpu") is net
    assert _devices(metric) == {"cpu"} and net.linear.weight.device.type == "cpu"
    assert set(_update_counts(metric)) == {0}
    stream = _stream(6)
    _, arguments, _ = CASES[name]
    for batch in stream:
        metric.update(**arguments(batch))
    _assert_value(name, metric, stream)


# ---------------------------------------------------------------- copies: deepcopy, pickle, torch.save


def test_deepcopy_of_a_model_gives_equal_and_independent_metrics(name):
    stream, more = _stream(3), _stream(4)
    net = Net(_updated(name, stream))
    copied = copy.deepcopy(net)
    assert copied.metric is not net.metric and type(copied.metric) is type(net.metric)
    _assert_value(name, copied.metric, stream)
    for batch in more:
        copied.metric.update(**CASES[name][1](batch))
    _assert_value(name, copied.metric, stream + more)
    _assert_value(name, net.metric, stream)


@pytest.mark.parametrize("round_trip", [pickled, torch_saved])
def test_pickle_and_torch_save_of_a_model_round_trip(name, round_trip):
    stream = _stream(5)
    net = Net(_updated(name, stream))
    net.metric.persistent(True)
    net.eval()
    loaded = round_trip(net)
    assert type(loaded.metric) is type(net.metric)
    _assert_value(name, loaded.metric, stream)
    assert _update_counts(loaded.metric) == _update_counts(net.metric) == [4] * len(_update_counts(net.metric))
    assert not loaded.metric.training and set(loaded.state_dict()) == set(net.state_dict())
    assert torch.equal(loaded.linear.weight, net.linear.weight)


class AliasingNet(torch.nn.Module):
    """A metric set on the model and in a collection, and one in two collections."""

    def __init__(self):
        super().__init__()
        self.accuracy = nm.classification.MulticlassAccuracy(num_classes=3, average="micro")
        self.metrics = nm.MetricCollection({"acc": self.accuracy, "f1": nm.classification.MulticlassF1Score(3)})
        self.recall = nm.classification.MulticlassRecall(num_classes=3)
        self.train_metrics = nm.MetricCollection({"recall": self.recall,
                                                  "acc": nm.classification.MulticlassAccuracy(3)})
        self.val_metrics = nm.MetricCollection({"recall": self.recall, "f1": nm.classification.MulticlassF1Score(3)})


@pytest.mark.parametrize("round_trip", [copy.deepcopy, pickled, torch_saved])
def test_a_metric_the_model_holds_twice_stays_one_metric_in_a_copy(round_trip):
    net = AliasingNet()
    net.metrics.update(torch.tensor([0, 1, 2]), torch.tensor([0, 1, 2]))
    net.train_metrics.update(torch.tensor([0, 1, 2]), torch.tensor([0, 1, 1]))
    copied = round_trip(net)
    assert copied.accuracy is copied.metrics["acc"] and copied.accuracy is not net.accuracy
    assert copied.recall is copied.train_metrics["recall"] is copied.val_metrics["recall"]
    for collection in ("metrics", "train_metrics", "val_metrics"):
        expected, got = getattr(net, collection), getattr(copied, collection)
        assert got.compute_groups == expected.compute_groups
        assert {k: v.item() for k, v in got.compute().items()} == {k: v.item() for k, v in expected.compute().items()}
    copied.metrics.update(torch.tensor([0, 0, 0]), torch.tensor([1, 1, 1]))  # 3 right of 6
    assert copied.accuracy.compute().item() == 0.5 and copied.accuracy.update_count == 2
    copied.train_metrics.update(torch.tensor([0, 0, 0]), torch.tensor([1, 1, 1]))
    # by hand from the two batches: class 0 1 of 1 found, class 1 1 of 5, class 2 no target (0)
    assert copied.val_metrics["recall"].compute().item() == pytest.approx((1 + 1 / 5 + 0) / 3)
    assert net.accuracy.update_count == 1 and net.recall.update_count == 1


class ScaledMean(nm.MeanMetric):
    """A user's subclass with its own constructor and attribute."""

    def __init__(self, scale, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale

    def compute(self):
        return super().compute() * self.scale


def test_a_subclass_keeps_its_class_and_attributes_through_pickle():
    metric = ScaledMean(3.0, nan_strategy="ignore")
    metric.update(torch.tensor([1.0, 2.0, float("nan")]))
    loaded = pickled(metric)
    assert type(loaded) is ScaledMean and loaded.scale == 3.0 and loaded.nan_strategy == "ignore"
    assert loaded.compute().item() == 4.5  # mean(1, 2) * 3, NaN ignored


def test_averaged_model_copies_a_model_with_metrics(name):
    stream = _stream(6)
    net = Net(_updated(name, stream))
    averaged = AveragedModel(net)
    averaged.update_parameters(net)
    assert torch.equal(averaged(torch.ones(1, 3)), net(torch.ones(1, 3)))
    assert averaged.module.metric is not net.metric
    _assert_value(name, averaged.module.metric, stream)


# ---------------------------------------------------------------- state_dict through a parent module


def _metric_keys(metric):
    return {"metric." + key for key in metric.state_dict()}


def test_a_model_state_dict_holds_a_metric_only_when_persistent(name):
    metric = _updated(name, _stream(7))
    net = Net(metric)
    assert set(net.state_dict()) == {"linear.weight", "linear.bias"}
    metric.persistent(True)
    assert set(net.state_dict()) == {"linear.weight", "linear.bias"} | _metric_keys(metric)
    # TorchMetrics' default mode: False for a metric (True for a collection)
    metric.persistent(False) if isinstance(metric, nm.MetricCollection) else metric.persistent()
    assert set(net.state_dict()) == {"linear.weight", "linear.bias"}
    assert set(metric.state_dict()) == {k[len("metric."):] for k in _metric_keys(metric)}  # called directly: all


def test_a_collections_persistent_defaults_to_true_as_in_torchmetrics():
    net = torch.nn.Module()
    net.metrics = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=4)})
    assert not net.state_dict()
    net.metrics.persistent()
    assert {"metrics.acc.tp", "metrics.acc.update_count"} <= set(net.state_dict())
    net.metrics.persistent(False)
    assert not net.state_dict()


@pytest.mark.parametrize("base", [nm.Metric, nm.ClassificationMetric])
def test_a_metric_written_on_a_base_class_is_refused_saying_what_to_subclass(base):
    class Counted(base):  # TorchMetrics' way: a base, add_state, update and compute
        def __init__(self):
            super().__init__()

    with pytest.raises(TypeError, match=f"{base.__name__} is the base of this library's metrics, not one for new "
                                        "metrics .* subclass one of its metrics"):
        Counted()


def test_model_load_state_dict_restores_a_persistent_metric_exactly(name):
    stream = _stream(8)
    saved = Net(_updated(name, stream))
    saved.metric.persistent(True)
    checkpoint = saved.state_dict()
    loaded = Net(_updated(name, _stream(9, batches=1)))
    loaded.metric.persistent(True)
    assert loaded.load_state_dict(checkpoint) == ([], [])
    _assert_value(name, loaded.metric, stream)
    assert _update_counts(loaded.metric) == _update_counts(saved.metric)
    assert all(torch.equal(v, checkpoint[k]) for k, v in loaded.state_dict().items())


def test_a_checkpoint_without_metrics_loads_strictly_into_a_model_with_metrics(name):
    stream = _stream(10)
    plain = torch.nn.Sequential()
    plain.linear = torch.nn.Linear(3, 2)
    net = Net(_updated(name, stream))
    net.load_state_dict(plain.state_dict())
    assert torch.equal(net.linear.weight, plain.linear.weight)
    _assert_value(name, net.metric, stream)  # untouched


def test_a_persistent_metric_missing_from_the_checkpoint_is_reported_and_untouched(name):
    stream = _stream(11)
    net = Net(_updated(name, stream))
    net.metric.persistent(True)
    without_metric = {k: v for k, v in net.state_dict().items() if not k.startswith("metric.")}
    with pytest.raises(RuntimeError, match=r"Missing key\(s\) in state_dict: \"metric\."):
        net.load_state_dict(without_metric)
    missing, unexpected = net.load_state_dict(without_metric, strict=False)
    assert set(missing) == _metric_keys(net.metric) and unexpected == []
    _assert_value(name, net.metric, stream)


def test_a_checkpoint_holding_a_metric_loads_it_even_when_not_persistent(name):
    stream = _stream(12)
    saved = Net(_updated(name, stream))
    saved.metric.persistent(True)
    loaded = Net(CASES[name][0]())  # not persistent: loads what it finds, as TorchMetrics does
    loaded.load_state_dict(saved.state_dict())
    _assert_value(name, loaded.metric, stream)


def test_unknown_keys_under_a_metric_are_unexpected(name):
    net = Net(CASES[name][0]())
    checkpoint = dict(net.state_dict(), **{"metric.bogus": torch.zeros(1)})
    with pytest.raises(RuntimeError, match=r"Unexpected key\(s\) in state_dict: \"metric.bogus\""):
        net.load_state_dict(checkpoint)


@pytest.mark.parametrize("single", sorted(SINGLE))
def test_a_damaged_metric_checkpoint_changes_nothing_in_the_metric(single):
    stream = _stream(13)
    net = Net(_updated(single, stream))
    net.metric.persistent(True)
    checkpoint = net.state_dict()
    first_state = next(k for k in checkpoint if k.startswith("metric.") and "._" not in k)
    checkpoint["metric.update_count"] = torch.tensor(99)
    checkpoint[first_state] = torch.zeros(17)  # wrong shape: the whole metric is refused
    with pytest.raises(RuntimeError, match="While loading metric"):
        net.load_state_dict(checkpoint)
    _assert_value(single, net.metric, stream)
    assert _update_counts(net.metric) == [4]


class DoubledMean(nm.MeanMetric):
    """A user's subclass that overrides update()."""

    def update(self, value):
        super().update(value * 2)


def test_calling_a_subclass_runs_its_own_update_and_compute():
    """As TorchMetrics' forward: the batch goes through the subclass's update(), its value through
    its compute(), and the batch is kept."""
    doubled = DoubledMean()
    assert doubled(torch.tensor([1.0, 2.0])).item() == 3.0
    assert doubled(torch.tensor([5.0])).item() == 10.0
    assert doubled.compute().item() == pytest.approx((2 + 4 + 10) / 3)
    assert type(doubled.clone()) is DoubledMean
    scaled = ScaledMean(3.0)
    assert scaled(torch.tensor([1.0, 3.0])).item() == 6.0  # the batch's mean, scaled by its compute()
    assert scaled.compute().item() == 6.0
    plain = nm.MeanMetric()
    assert not plain._overrides_update_or_compute() and doubled._overrides_update_or_compute()


class PositiveOnlyMean(nm.MeanMetric):
    """A subclass whose update() refuses some input, after its own checks."""

    def update(self, value, **ignored):
        if (value < 0).any():
            raise ValueError("PositiveOnlyMean: negative value")
        super().update(value)


def _collection_of_subclasses():
    return nm.MetricCollection({"doubled": DoubledMean(), "plain": nm.MeanMetric(), "scaled": ScaledMean(3.0),
                                "acc": nm.MulticlassAccuracy(num_classes=3)})


def _feed(collection, values, preds, target):
    return collection.update(value=values, preds=preds, target=target)


def test_a_collection_updates_and_computes_a_subclass_through_its_own_methods():
    """As TorchMetrics' MetricCollection calls each metric's update() and compute(): the subclass
    gets the keywords its update() takes, and keeps a state of its own (a plain MeanMetric beside
    it counts the values as given)."""
    c = _collection_of_subclasses()
    assert sorted(c.compute_groups.values()) == [["acc"], ["doubled"], ["plain"], ["scaled"]]
    batches = [torch.tensor([1.0, 2.0]), torch.tensor([5.0]), torch.tensor([0.5, 0.25, 4.0])]
    preds, target = torch.tensor([0, 1, 2]), torch.tensor([0, 1, 1])
    for values in batches:
        _feed(c, values, preds[:len(values)], target[:len(values)])
    every = torch.cat(batches).double()
    got = c.compute()
    assert got["plain"].item() == pytest.approx(every.mean().item())
    assert got["doubled"].item() == pytest.approx(2 * every.mean().item())
    assert got["scaled"].item() == pytest.approx(3 * every.mean().item())
    assert got["doubled"].item() == pytest.approx(c["doubled"].compute().item())
    assert c["doubled"].update_count == c["plain"].update_count == 3


def test_a_collections_forward_gives_a_subclass_batch_value_through_its_own_methods():
    c = _collection_of_subclasses()
    _feed(c, torch.tensor([1.0, 2.0]), torch.tensor([0, 1]), torch.tensor([0, 1]))
    got = c(value=torch.tensor([5.0, 7.0]), preds=torch.tensor([2, 2]), target=torch.tensor([2, 0]))
    assert (got["plain"].item(), got["doubled"].item(), got["scaled"].item()) == (6.0, 12.0, 18.0)
    assert got["acc"].item() == pytest.approx(1 / 2)  # macro over the classes seen: class 2 right, 0 wrong
    assert c.compute()["doubled"].item() == pytest.approx(2 * 15 / 4)
    assert c["doubled"].update_count == 2


def test_a_subclass_that_refuses_a_batch_leaves_the_whole_collection_unchanged():
    c = nm.MetricCollection({"positive": PositiveOnlyMean(), "plain": nm.MeanMetric(),
                             "acc": nm.MulticlassAccuracy(num_classes=3)})
    c.update(value=torch.tensor([1.0, 3.0]), preds=torch.tensor([0]), target=torch.tensor([0]))
    before = c.state_dict()
    with pytest.raises(ValueError, match="negative value"):
        c.update(value=torch.tensor([-1.0]), preds=torch.tensor([0]), target=torch.tensor([1]))
    with pytest.raises(ValueError, match="negative value"):
        c(value=torch.tensor([-1.0]), preds=torch.tensor([0]), target=torch.tensor([1]))
    # and where a metric the collection updates refuses the batch, the subclass is unchanged too
    with pytest.raises(ValueError, match="MulticlassAccuracy"):
        c.update(value=torch.tensor([2.0]), preds=torch.tensor([0, 1]), target=torch.tensor([0]))
    after = c.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before if isinstance(before[k], torch.Tensor))
    assert c.compute()["positive"].item() == 2.0


def test_a_collection_with_subclasses_keeps_them_apart_through_clone_pickle_and_state_dict():
    c = _collection_of_subclasses()
    _feed(c, torch.tensor([1.0, 2.0]), torch.tensor([0, 1]), torch.tensor([0, 1]))
    for copied in (c.clone(), pickled(c)):
        assert copied.compute_groups == c.compute_groups
        _feed(copied, torch.tensor([4.0]), torch.tensor([2]), torch.tensor([2]))
        assert copied.compute()["doubled"].item() == pytest.approx(2 * 7 / 3)
    loaded = _collection_of_subclasses()
    loaded.load_state_dict(c.state_dict())
    assert loaded.compute()["doubled"].item() == c.compute()["doubled"].item() == 3.0


class StepScaledMean(nm.MeanMetric):
    """A subclass whose update() keeps Python state of its own, and holds what cannot be copied."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.step = 0
        self.lock = threading.Lock()

    def update(self, value):
        with self.lock:
            self.step += 1
            super().update(value * self.step)


def test_a_subclass_update_runs_on_the_metric_itself_alone_and_in_a_collection():
    """As TorchMetrics: the attributes its update() changes are the metric's own (no copy is made)."""
    alone = StepScaledMean()
    assert alone(torch.tensor([1.0])).item() == 1.0
    assert alone(torch.tensor([1.0])).item() == 2.0
    assert alone.step == 2 and alone.compute().item() == 1.5
    c = nm.MetricCollection({"scaled": StepScaledMean(), "plain": nm.MeanMetric()})
    for _ in range(3):
        c.update(torch.tensor([1.0]))
    assert c["scaled"].step == 3
    assert c.compute()["scaled"].item() == 2.0  # mean(1, 2, 3)
    assert c(torch.tensor([1.0]))["scaled"].item() == 4.0
    assert c["scaled"].step == 4 and c.compute()["scaled"].item() == 2.5


class CountingReset(nm.SumMetric):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seen = 0

    def update(self, value):
        self.seen += 1
        super().update(value)

    def reset(self):
        super().reset()
        self.seen = 0


def test_a_collections_reset_runs_a_subclass_reset():
    c = nm.MetricCollection({"counting": CountingReset(), "plain": nm.SumMetric()})
    c.update(torch.tensor([2.0]))
    c.reset()
    assert c["counting"].seen == 0 and c["counting"].update_count == 0 and c["plain"].update_count == 0


class MeanAndDouble(nm.MeanMetric):
    def compute(self):
        mean = super().compute()
        return {"mean": mean, "double": 2 * mean}


def test_a_dict_value_is_spread_into_its_keys_as_in_torchmetrics():
    c = nm.MetricCollection({"both": MeanAndDouble(), "sum": nm.SumMetric()}, prefix="val/")
    c.update(torch.tensor([1.0, 3.0]))
    got = c.compute()
    assert list(got) == ["val/mean", "val/double", "val/sum"]
    assert (got["val/mean"].item(), got["val/double"].item(), got["val/sum"].item()) == (2.0, 4.0, 4.0)
    assert list(c(torch.tensor([5.0]))) == ["val/mean", "val/double", "val/sum"]
    # keys that collide get their metric's name in front
    twice = nm.MetricCollection({"a": MeanAndDouble(), "b": MeanAndDouble()})
    twice.update(torch.tensor([1.0]))
    assert list(twice.compute()) == ["a_mean", "a_double", "b_mean", "b_double"]


class EncodedMean(nm.MeanMetric):
    """A subclass holding a module of its own (an encoder of the values)."""

    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(2, 1)

    def update(self, value):
        super().update(self.encoder(value).detach())


def test_a_subclass_modules_move_and_cast_with_the_model():
    net = torch.nn.Module()
    net.metrics = nm.MetricCollection({"encoded": EncodedMean()})
    net.double()
    assert net.metrics["encoded"].encoder.weight.dtype == torch.float64
    net.metrics.update(torch.ones(3, 2, dtype=torch.float64))
    assert net.metrics["encoded"].update_count == 1


@pytest.mark.parametrize("moved", ["metric", "collection"])
def test_a_subclass_modules_and_buffers_move_with_its_to(moved):
    # as TorchMetrics' Metric.to moves the module whole
    metric = EncodedMean()
    metric.register_buffer("scale", torch.ones(2))
    holder = metric if moved == "metric" else nm.MetricCollection({"encoded": metric})
    assert holder.to("meta") is holder
    assert metric.device.type == "meta"
    assert metric.encoder.weight.device.type == "meta" and metric.scale.device.type == "meta"


@pytest.mark.parametrize("held", ["metric", "collection", "model"])
def test_a_subclass_modules_materialize_from_meta_with_to_empty(held):
    # a collection moved the states (and the encoder, with to()) before to_empty() reached the encoder
    metric = EncodedMean()
    collection = nm.MetricCollection({"encoded": metric, "f1": nm.MulticlassF1Score(num_classes=3)})
    holder = {"metric": metric, "collection": collection, "model": torch.nn.ModuleDict({"m": collection})}[held]
    holder.to("meta")
    assert holder.to_empty(device="cpu") is holder
    assert metric.device.type == "cpu" and metric.encoder.weight.device.type == "cpu"
    assert collection["f1"].device.type == "cpu"


class LoggedForward(nm.SumMetric):
    def forward(self, *args, **kwargs):
        self.calls = getattr(self, "calls", 0) + 1
        return super().forward(*args, **kwargs)


def test_a_collections_forward_calls_a_subclass_forward():
    c = nm.MetricCollection({"logged": LoggedForward(), "plain": nm.SumMetric()})
    assert c(torch.tensor([2.0]))["logged"].item() == 2.0
    assert c["logged"].calls == 1 and c.compute()["logged"].item() == 2.0


class ComputedAccuracy(nm.BinaryAccuracy):
    """A subclass that defines compute() only."""

    def compute(self):
        return super().compute() * 1


def _states_equal(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa if isinstance(sa[k], torch.Tensor))


class ComputedMean(nm.MeanMetric):
    def compute(self):
        return super().compute() * 1


@pytest.mark.parametrize("make, first, batch, expected, error", [
    # a target not 0 or 1: left out of the batch's value (3 of 3 right) and reported by compute()
    (lambda cls: cls(), ([1, 0], [1, 1]), ([1, 1, 0, 1], [1, 1, 0, 5]), 1.0, ValueError),
    # a NaN under nan_strategy="error": the batch's mean of 3.0, then compute() raises
    (lambda cls: cls(nan_strategy="error"), ([1.0],), ([3.0, float("nan")],), 3.0, RuntimeError),
], ids=["accuracy", "mean"])
def test_a_subclass_forward_counts_bad_input_for_compute_to_report_as_the_built_in_one(make, first, batch, expected,
                                                                                        error):
    subclass, built_in = (ComputedAccuracy, nm.BinaryAccuracy) if len(first) == 2 else (ComputedMean, nm.MeanMetric)
    ours, theirs = make(subclass), make(built_in)
    for m in (ours, theirs):
        m.update(*(torch.tensor(x) for x in first))
        assert m(*(torch.tensor(x) for x in batch)).item() == expected
    assert _states_equal(ours, theirs) and ours.update_count == 2
    assert ours.bad_input() == theirs.bad_input()
    with pytest.raises(error, match=built_in.__name__.replace("Metric", "")):
        ours.compute()


class UpdatedAccuracy(nm.MulticlassAccuracy):
    def update(self, preds, target):
        super().update(preds, target)


def test_a_collection_forward_counts_a_subclass_members_bad_input_for_compute_to_report():
    preds, target = torch.tensor([[0.9, 0.1, 0.0], [0.1, 0.8, 0.1], [0.0, 0.1, 0.9]]), torch.tensor([0, 1, 7])
    values = {}
    for name, acc in (("subclass", UpdatedAccuracy(num_classes=3)), ("built-in", nm.MulticlassAccuracy(num_classes=3))):
        c = nm.MetricCollection({"acc": acc, "f1": nm.MulticlassF1Score(num_classes=3)})
        values[name] = {k: v.item() for k, v in c(preds, target).items()}
        assert c["acc"].update_count == c["f1"].update_count == 1
        assert c["acc"].bad_input()["counts"]["targets outside [0, 3)"] == 1
        with pytest.raises(ValueError, match="1 target"):
            c.compute()
    assert values["subclass"] == values["built-in"] == {"acc": 1.0, "f1": 1.0}


def test_a_subclass_forward_given_bad_arguments_leaves_the_state_as_it_was():
    m = ComputedAccuracy()
    m.update(torch.tensor([1, 0]), torch.tensor([1, 1]))
    before = m.state_dict()
    with pytest.raises(ValueError, match="BinaryAccuracy"):
        m(torch.tensor([1, 1, 0]), torch.tensor([1, 1]))  # shapes that differ
    after = m.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before if isinstance(before[k], torch.Tensor))
    assert m.compute().item() == 0.5


def test_a_subclass_forward_beside_updates_from_another_thread_loses_nothing():
    m = ComputedAccuracy()
    preds, target = torch.randint(0, 2, (20000,)), torch.randint(0, 2, (20000,))
    expected = (preds == target).double().mean().item()
    workers = [threading.Thread(target=lambda: [m.update(preds, target) for _ in range(100)]),
               threading.Thread(target=lambda: [m(preds, target) for _ in range(100)])]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert m.update_count == 200
    assert m.compute().item() == pytest.approx(expected, rel=1e-6)


def test_syncing_on_compute_nests_and_is_not_copied():
    m = ComputedAccuracy()
    with m._syncing_on_compute(True):
        with m._syncing_on_compute(False):
            assert m._sync_on_compute_now is False
            assert "_sync_on_compute_now" not in m.__reduce__()[2]
            copied = copy.deepcopy(nm.MetricCollection({"m": m}))["m"]
            assert copied._sync_on_compute_now is None
        assert m._sync_on_compute_now is True
    assert m._sync_on_compute_now is None


class ScaledByParameter(nm.MeanMetric):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(1), requires_grad=False)


def test_a_subclass_parameters_cast_with_the_model():
    net = torch.nn.Module()
    net.metric = ScaledByParameter()
    net.double()
    assert net.metric.scale.dtype == torch.float64


@pytest.mark.parametrize("in_collection", [False, True])
def test_a_model_state_dict_holds_a_subclass_modules_and_loads_back_strictly(in_collection):
    """As TorchMetrics: a metric's own modules are in the model's state_dict (its state only when
    persistent), and the model's own state_dict loads back strictly."""
    net = torch.nn.Module()
    metric = EncodedMean()
    net.metric = nm.MetricCollection({"e": metric}) if in_collection else metric
    prefix = "metric.e." if in_collection else "metric."
    state = net.state_dict()
    assert set(state) == {prefix + "encoder.weight", prefix + "encoder.bias"}
    other = torch.nn.Module()
    other_metric = EncodedMean()
    other.metric = nm.MetricCollection({"e": other_metric}) if in_collection else other_metric
    other.load_state_dict(state)
    assert torch.equal(other_metric.encoder.weight, metric.encoder.weight)
    with pytest.raises(RuntimeError, match="Unexpected key"):
        other.load_state_dict({**state, prefix + "nonsense": torch.zeros(1)})
    metric.persistent(True)
    metric.update(torch.ones(2, 2))
    other_metric.persistent(True)
    other.load_state_dict(net.state_dict())
    assert other_metric.update_count == 1


def test_forward_values_are_their_batches_and_stay_so_after_later_forwards(name):
    # forward counts on a batch state kept from call to call: no value it returned is a view of it
    make, arguments, _ = CASES[name]
    stream = _stream(7)
    metric = make()
    returned = [metric(**arguments(batch)) for batch in stream]
    for batch, value in zip(stream, returned):
        alone = make()
        alone.update(**arguments(batch))
        _assert_close(value, {k: v.numpy() for k, v in alone.compute().items()} if isinstance(value, dict)
                      else alone.compute().numpy())
    _assert_value(name, metric, stream)
    metric.to("meta")  # the kept batch state moves with it
    value = metric(**{k: v.to("meta") for k, v in arguments(stream[0]).items()})
    assert _devices(metric) == {"meta"}
    assert {str(v.device) for v in (value.values() if isinstance(value, dict) else [value])} == {"meta"}


# ---------------------------------------------------------------- torch.inference_mode()

def _multiclass(g, samplewise=False):
    shape = (4, 3, 5) if samplewise else (16, 3)
    return torch.randn(*shape, generator=g), torch.randint(0, 3, shape[:1] + shape[2:], generator=g)


INFERENCE_MODE_CASES = {  # what each keeps between updates: the state; ATen buffers; rows it grows
    "accuracy": (lambda: nm.MulticlassAccuracy(num_classes=3), _multiclass),
    "samplewise": (lambda: nm.MulticlassF1Score(num_classes=3, multidim_average="samplewise"),
                   lambda g: _multiclass(g, samplewise=True)),
    "binary samplewise": (lambda: nm.BinaryAccuracy(multidim_average="samplewise"),
                          lambda g: (torch.rand(4, 6, generator=g), torch.randint(0, 2, (4, 6), generator=g))),
    "multilabel weighted": (lambda: nm.MultilabelRecall(num_labels=4, weighted=True),
                            lambda g: (torch.rand(8, 4, generator=g), torch.randint(0, 2, (8, 4), generator=g),
                                       torch.rand(8, generator=g, dtype=torch.float64))),
    "mean of strided values": (lambda: nm.MeanMetric(),  # (a strided value takes the ATen path)
                               lambda g: (torch.randn(6, 2, generator=g)[:, 0], torch.rand(6, generator=g))),
    "collection": (lambda: nm.MetricCollection([nm.MulticlassAccuracy(num_classes=3),
                                                 nm.MulticlassRecall(num_classes=3)]), _multiclass),
}


@pytest.mark.parametrize("case", INFERENCE_MODE_CASES)
@pytest.mark.parametrize("made_inside", [False, True], ids=["made outside", "made inside"])
def test_a_metric_used_under_inference_mode_works_outside_it_after(case, made_inside):
    # as a Lightning validation step runs (under inference_mode), then the next epoch's calls outside
    make, batch = INFERENCE_MODE_CASES[case]
    g = torch.Generator().manual_seed(11)
    batches = [batch(g) for _ in range(6)]
    reference = make()
    for args in batches:
        reference.update(*args)
    if made_inside:
        with torch.inference_mode():
            metric = make()
    else:
        metric = make()
    with torch.inference_mode():
        for args in batches[:3]:  # samplewise: the rows it grows are made in this mode
            metric(*args)
    for args in batches[3:5]:
        metric(*args)
    metric.update(*batches[5])
    got, want = metric.compute(), reference.compute()
    for key in (want.keys() if isinstance(want, dict) else [None]):
        assert torch.equal(got[key] if key else got, want[key] if key else want)
    metric.load_state_dict(reference.state_dict())
    metric.reset()
    metric.update(*batches[0])
    fresh = make()
    fresh.update(*batches[0])
    assert all(torch.equal(a, b) for a, b in zip(metric.state_dict().values(), fresh.state_dict().values()))


def test_repr_shows_where_a_moved_metric_is():
    acc = nm.MulticlassAccuracy(num_classes=3, device="meta")
    assert repr(acc) == "MulticlassAccuracy(num_classes=3, device='meta')"
    acc.to("cpu")
    assert repr(acc) == repr(acc.clone()) == "MulticlassAccuracy(num_classes=3)"
    mean = nm.MeanMetric()
    mean.to("meta")
    assert repr(mean) == "MeanMetric(device='meta')"


@pytest.mark.skipif(not hasattr(torch, "compile"), reason="torch.compile is PyTorch 2's (test-torch2.sh runs it)")
@pytest.mark.parametrize("call", ["update", "forward"])
def test_a_compiled_training_step_counts_as_its_eager_twin(call):
    """torch.compile(step) of a step that updates (or calls) a collection and a MeanMetric of the
    loss: the compiled step's metrics read what the eager step's do, and NumPy's accuracy and mean
    of the same logits and losses."""
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 4)
    batches = [(torch.randn(16, 6), torch.randint(0, 4, (16,))) for _ in range(5)]

    def made():
        return nm.MetricCollection([nm.MulticlassAccuracy(num_classes=4, average="micro"),
                                    nm.MulticlassF1Score(num_classes=4)]), nm.MeanMetric()

    def step(x, y, collection, mean):
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        collection.update(logits, y) if call == "update" else collection(logits, y)
        mean.update(loss)
        return logits, loss

    eager, compiled = made(), made()
    compiled_step = torch.compile(step, backend="eager")
    predicted, losses = [], []
    with torch.no_grad():
        for x, y in batches:
            logits, loss = step(x, y, *eager)
            compiled_logits, compiled_loss = compiled_step(x, y, *compiled)
            assert torch.equal(compiled_logits, logits) and torch.equal(compiled_loss, loss)
            predicted.append(logits.argmax(1).numpy())
            losses.append(loss.item())
    want_accuracy = np.mean(np.concatenate(predicted) == np.concatenate([y.numpy() for _, y in batches]))
    for (collection, mean) in (eager, compiled):
        values = collection.compute()
        assert values["MulticlassAccuracy"].item() == pytest.approx(want_accuracy, abs=1e-7)
        assert mean.compute().item() == pytest.approx(np.mean(losses), rel=1e-6)
    eager_values, compiled_values = eager[0].compute(), compiled[0].compute()
    for name in eager_values:
        assert torch.equal(eager_values[name], compiled_values[name]), name
