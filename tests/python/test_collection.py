"""MetricCollection: shared states from options, values equal to separate metrics."""

import copy
import gc
import sys
import threading
import time
import warnings

import numpy as np
import pytest
import sklearn.metrics as skm
import torch

import nosync_metrics as nm
from round_trips import pickled, torch_saved


def _batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(20, 6, generator=g), torch.randint(0, 6, (20,), generator=g)) for _ in range(5)]


def _four():
    return [nm.MulticlassAccuracy(num_classes=6), nm.MulticlassPrecision(num_classes=6),
            nm.MulticlassRecall(num_classes=6), nm.MulticlassF1Score(num_classes=6)]


def test_values_equal_separate_metrics_and_groups_follow_options():
    separate = _four()
    metrics = {type(m).__name__: m for m in _four()}
    metrics["top2"] = nm.MulticlassAccuracy(num_classes=6, top_k=2)
    collection = nm.MetricCollection(metrics, prefix="val/")
    for preds, target in _batches():
        collection.update(preds, target)
        for m in separate:
            m.update(preds, target)
    values = collection.compute()
    # a dict's metrics come in the order of their names, as TorchMetrics adds them
    assert list(values) == ["val/MulticlassAccuracy", "val/MulticlassF1Score", "val/MulticlassPrecision",
                            "val/MulticlassRecall", "val/top2"]
    for m in separate:
        assert torch.equal(values["val/" + type(m).__name__], m.compute())
    assert collection.compute_groups == {0: ["MulticlassAccuracy", "MulticlassF1Score", "MulticlassPrecision",
                                             "MulticlassRecall"], 1: ["top2"]}


def test_duplicate_class_names_in_a_list_are_rejected():
    with pytest.raises(ValueError, match="two metrics both named MulticlassAccuracy"):
        nm.MetricCollection([nm.MulticlassAccuracy(num_classes=6), nm.MulticlassAccuracy(num_classes=6, top_k=2)])


def test_further_arguments_that_are_not_metrics_are_left_out_with_a_warning():
    """As TorchMetrics does (MetricCollection(metric, "x") warns, in its words), a collection among
    them too; the metrics given count as usual."""
    nested = nm.MetricCollection([nm.MaxMetric()])
    with pytest.warns(UserWarning, match=r"extra arguments \['x', 3, MetricCollection\([\s\S]*\)\] which are not "
                                         r"`Metric` so they will be ignored"):
        collection = nm.MetricCollection(nm.MeanMetric(), "x", nm.SumMetric(), 3, nested)
    assert list(collection.keys()) == ["MeanMetric", "SumMetric"]
    collection.update(torch.tensor([1.0, 3.0]))
    assert {k: v.item() for k, v in collection.compute().items()} == {"MeanMetric": 2.0, "SumMetric": 4.0}
    with pytest.warns(UserWarning, match="which are not `Metric`"):
        collection.add_metrics(nm.MinMetric(), "y")
    assert list(collection.keys()) == ["MeanMetric", "SumMetric", "MinMetric"]
    with pytest.raises(ValueError, match="is a str, not a nosync_metrics metric"):
        nm.MetricCollection([nm.MeanMetric(), "x"])  # inside the first argument: refused, as there
    # a module that is not ours (another library's metric, passed by mistake) is refused, not left out
    with pytest.raises(ValueError, match="Linear is a Linear, not a nosync_metrics metric"):
        nm.MetricCollection(nm.MeanMetric(), torch.nn.Linear(1, 1))


@pytest.mark.parametrize("name", ["a.b", ""])
def test_a_name_state_dict_keys_cannot_carry_is_a_key_error(name):
    """As torch.nn.ModuleDict (and so TorchMetrics) refuses it: '.' separates a metric's name from
    its state's in state_dict() keys, so such a collection could not load its own state_dict()."""
    with pytest.raises(KeyError, match="a metric's name must be non-empty and hold no '.'"):
        nm.MetricCollection({name: nm.MeanMetric()})
    collection = nm.MetricCollection({"loss": nm.MeanMetric()})
    with pytest.raises(KeyError):
        collection.add_metrics({name: nm.SumMetric()})
    assert list(collection.keys()) == ["loss"]
    collection.load_state_dict(collection.state_dict())


def test_resetting_a_nested_collection_leaves_the_outer_metrics_that_shared_its_states():
    inner = nm.MetricCollection({"rec": nm.MulticlassRecall(num_classes=3)})
    outer = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=3), "in": inner})
    preds, target = torch.tensor([0, 1, 2, 2, 1, 0]), torch.tensor([0, 1, 1, 2, 1, 2])
    outer.update(preds, target)
    inner.reset()
    values = outer.compute()
    # acc (macro): class 0 1 of 1, class 1 2 of 3, class 2 1 of 2; rec: reset, no update since
    assert values["acc"].item() == pytest.approx((1 + 2 / 3 + 1 / 2) / 3)
    assert outer["acc"].update_count == 1 and inner["rec"].update_count == 0
    outer.update(preds, target)  # both count on; rec from its reset
    values = outer.compute()
    assert values["acc"].item() == pytest.approx((1 + 2 / 3 + 1 / 2) / 3)
    assert values["in_rec"].item() == pytest.approx((1 + 2 / 3 + 1 / 2) / 3)
    assert outer["acc"].update_count == 2 and inner["rec"].update_count == 1


def test_a_refused_add_metrics_adds_none_of_its_metrics():
    collection = nm.MetricCollection({"f1": nm.MulticlassF1Score(num_classes=3)})
    collection.update(torch.tensor([0, 1, 2]), torch.tensor([0, 1, 1]))
    before = collection.state_dict()
    for metrics in ({"acc": nm.MulticlassAccuracy(num_classes=3), "f1": nm.MulticlassRecall(num_classes=3)},
                    [nm.MeanMetric(), nm.SumMetric(), nm.MeanMetric()],
                    [nm.MeanMetric(), torch.nn.Linear(1, 1)]):
        with pytest.raises(ValueError):
            collection.add_metrics(metrics)
        assert list(collection.keys()) == ["f1"]
        assert all(torch.equal(v, before[k]) for k, v in collection.state_dict().items())
    with pytest.raises(KeyError):
        collection.add_metrics({"mean": nm.MeanMetric(), "a.b": nm.SumMetric()})
    assert list(collection.keys()) == ["f1"]
    # a nested collection given in a refused call keeps its groups: nothing is handed over
    nested = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=3), "f1": nm.MulticlassF1Score(3)})
    groups = nested.compute_groups
    with pytest.raises(KeyError):
        collection.add_metrics({"n": nested, "a.b": nm.SumMetric()})
    assert nested.compute_groups == groups == {0: ["acc", "f1"]}
    nested.add_metrics({"r": nm.MulticlassRecall(num_classes=3)})  # still joins their state there
    assert nested.compute_groups == {0: ["acc", "f1", "r"]}


def test_dict_names_postfix_forward_and_other_metrics():
    acc = nm.MulticlassAccuracy(num_classes=6, average="micro")
    collection = nm.MetricCollection({"acc": acc, "cm": nm.MulticlassConfusionMatrix(num_classes=6)}, postfix="_val")
    preds, target = _batches()[0]
    batch = collection(preds, target)
    assert set(batch) == {"acc_val", "cm_val"}
    assert batch["acc_val"].item() == pytest.approx((preds.argmax(1) == target).float().mean().item())
    assert acc.update_count == 1  # the collection updates the very object it was given
    assert collection.compute_groups == {0: ["acc", "cm"]}
    assert collection["acc"] is acc and "cm" in collection and len(collection) == 2


def test_without_compute_groups_every_metric_keeps_its_state():
    collection = nm.MetricCollection(_four(), compute_groups=False)
    assert collection.compute_groups == {}  # as TorchMetrics reports it
    assert len(collection._core.groups()) == 4
    for preds, target in _batches():
        collection.update(preds, target)
    grouped = nm.MetricCollection(_four())
    for preds, target in _batches():
        grouped.update(preds, target)
    for key, value in grouped.compute().items():
        assert torch.equal(collection.compute()[key], value)


def test_state_dict_clone_reset_and_merge():
    collection = nm.MetricCollection(_four())
    for preds, target in _batches():
        collection.update(preds, target)
    copy = collection.clone(prefix="copy/")
    assert copy.compute_groups == collection.compute_groups
    for key, value in collection.compute().items():
        assert torch.equal(copy.compute()["copy/" + key], value)
    # an empty prefix or postfix keeps the old one, as TorchMetrics' clone does (helper-51)
    assert (copy.clone(prefix="", postfix="").prefix, copy.clone(prefix="", postfix="").postfix) == ("copy/", None)
    restored = nm.MetricCollection(_four())
    restored.load_state_dict(collection.state_dict())
    assert restored.compute().keys() == collection.compute().keys()
    collection.reset()
    with pytest.warns(UserWarning):
        assert all(v.item() == 0 for v in collection.compute().values())


def test_bad_input_raises_once_at_compute():
    collection = nm.MetricCollection(_four())
    preds, target = _batches()[0]
    collection.update(preds, torch.full_like(target, 9))
    with pytest.raises(ValueError, match="20 targets outside \\[0, 6\\)"):
        collection.compute()


def test_bad_input_reports_name_the_metrics_that_counted_it():
    """Two metrics of one class tell apart by their keys: each report names the metrics of the
    compute group that counted it (they share its state), in the order added."""
    collection = nm.MetricCollection({"loss": nm.MeanMetric(nan_strategy="warn"),
                                      "acc_macro": nm.MulticlassAccuracy(num_classes=6),
                                      "acc_top2": nm.MulticlassAccuracy(num_classes=6, top_k=2),
                                      "acc_micro": nm.MulticlassAccuracy(num_classes=6, average="micro")})
    preds, target = _batches()[0]
    preds[3, 1] = float("nan")
    collection.update(value=torch.tensor([1.0, 2.0]), preds=preds, target=target)
    message = "MulticlassAccuracy: 1 NaN or out-of-range prediction in 1 update"
    for call in ("check", "compute"):
        with pytest.raises(ValueError, match=f"MetricCollection.{call}: 'acc_macro', 'acc_micro': {message}"):
            getattr(collection, call)()
    collection = nm.MetricCollection({"acc_top2": nm.MulticlassAccuracy(num_classes=6, top_k=2)})
    collection.update(preds, target)
    with pytest.raises(ValueError, match=f"MetricCollection.compute: 'acc_top2': {message}"):
        collection.compute()
    collection = nm.MetricCollection({"loss": nm.MeanMetric(nan_strategy="warn")})
    collection.update(torch.tensor([1.0, float("nan")]))
    with pytest.warns(UserWarning, match="MetricCollection.compute: 'loss': Mean: 1 NaN value in 1 update"):
        assert collection.compute()["loss"].item() == 1.0


@pytest.mark.parametrize("call", ["compute", "check"])
def test_a_report_that_raises_leaves_the_others_warning(call):
    """Every report that warns does, then the first that raises is raised (the key "acc" sorts, and
    so reports, before "loss", as in TorchMetrics, which computes in that order and would stop)."""
    collection = nm.MetricCollection({"loss": nm.MeanMetric(nan_strategy="warn"),
                                      "acc": nm.MulticlassAccuracy(num_classes=3)})
    collection.update(value=torch.tensor([1.0, float("nan")]), preds=torch.tensor([0, 1, 5]),
                      target=torch.tensor([0, 1, 2]))
    with pytest.warns(UserWarning, match=f"MetricCollection.{call}: 'loss': Mean: 1 NaN value in 1 update"):
        with pytest.raises(ValueError, match=f"MetricCollection.{call}: 'acc': MulticlassAccuracy: 1 NaN or out"):
            getattr(collection, call)()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the warning as an error: the report that raises stays the one raised
        with pytest.raises(ValueError, match="'acc': MulticlassAccuracy"):
            getattr(collection, call)()

    class HookFailed(Exception):
        pass

    def failing_hook(*args, **kwargs):
        raise HookFailed

    with warnings.catch_warnings():  # what fails in showing the warning is not a warning: it is raised
        warnings.simplefilter("always")
        warnings.showwarning = failing_hook
        with pytest.raises(HookFailed):
            getattr(collection, call)()


def test_a_report_names_the_metrics_of_every_group_that_shares_the_state():
    """A collection of collections shares one state among groups of either; each report names every
    metric that counted into the state."""
    inner = nm.MetricCollection({"cm": nm.MulticlassConfusionMatrix(num_classes=4),
                                 "prec": nm.MulticlassPrecision(num_classes=4, average=None)})
    outer = nm.MetricCollection([inner, nm.MulticlassRecall(num_classes=4, average=None)])
    inner.update(torch.tensor([0, 1, 7]), torch.tensor([0, 1, 2]))
    for collection, names in ((inner, "'prec', 'cm'"), (outer, "'cm', 'prec', 'MulticlassRecall'")):
        for call in ("compute", "check"):
            with pytest.raises(ValueError, match=f"MetricCollection.{call}: {names}: Multiclass"):
                getattr(collection, call)()


class _OwnMean(nm.MeanMetric):
    def compute(self):
        return super().compute() * 10


@pytest.mark.parametrize("call", ["compute", "check"])
def test_a_metric_updated_apart_reports_as_the_others_do(call):
    """A Python subclass with its own compute() is updated and computed apart from the shared states;
    its reports name it too (every key it has, once), and run whatever the others raised (helper-53:
    they came unprefixed, and not at all after the core's raised). Outside the collection the metric
    reports as before."""
    own = _OwnMean(nan_strategy="warn")
    collection = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=3), "loss": own, "again": own})
    collection.update(value=torch.tensor([1.0, float("nan")]), preds=torch.tensor([0, 1, 5]),
                      target=torch.tensor([0, 1, 2]))
    with pytest.warns(UserWarning) as caught:
        with pytest.raises(ValueError, match=f"^MetricCollection.{call}: 'acc': MulticlassAccuracy: 1 NaN or out"):
            getattr(collection, call)()
    texts = [str(w.message) for w in caught if "Mean:" in str(w.message)]
    assert texts == [f"MetricCollection.{call}: 'again', 'loss': Mean: 1 NaN value in 1 update, first at update 0 "
                     "(kept out of the state)"]  # the keys in their order
    with pytest.warns(UserWarning) as caught, nm._C._ReportContext("epoch 3: "):  # an outer context comes first
        with pytest.raises(ValueError, match=f"^epoch 3: MetricCollection.{call}: 'acc': MulticlassAccuracy"):
            getattr(collection, call)()
    assert [str(w.message) for w in caught if "Mean:" in str(w.message)] == ["epoch 3: " + texts[0]]
    collection["acc"].reset()
    if call == "compute":
        with pytest.warns(UserWarning, match="'again', 'loss': Mean"):
            values = collection.compute()
        assert values["loss"] is values["again"]  # computed once, as forward() and TorchMetrics' cache give it
    with pytest.warns(UserWarning, match="^Mean: 1 NaN value in 1 update"):
        assert own.compute().item() == 10.0

    clean = nm.MetricCollection({"loss": _OwnMean(nan_strategy="error"), "acc": nm.MulticlassAccuracy(num_classes=3)})
    clean.update(value=torch.tensor([float("nan")]), preds=torch.tensor([0]), target=torch.tensor([0]))
    with pytest.raises(RuntimeError, match=f"^MetricCollection.{call}: 'loss': Mean: 1 NaN value"):
        getattr(clean, call)()
    nested = nm.MetricCollection({"n": nm.MetricCollection({"loss": _OwnMean()})})
    nested.update(torch.tensor([float("nan")]))
    with pytest.warns(UserWarning, match=f"^MetricCollection.{call}: 'n_loss': Mean: 1 NaN"):
        getattr(nested, call)()


class _ForwardComputes(nm.MeanMetric):
    """A subclass whose own forward() computes (its reports come at forward())."""

    def forward(self, *args, **kwargs):
        self.update(*args, **kwargs)
        return self.compute()


def test_the_reports_of_a_metric_forwarded_apart_name_it():
    """A subclass's own forward() that reports (through its compute()) names the metric under its
    keys inside a collection's forward(), as its compute() does there (helper-54 #7: it came
    unprefixed); outside, as before."""
    collection = nm.MetricCollection({"loss": _ForwardComputes(),
                                    "acc": nm.MulticlassAccuracy(num_classes=3, average="micro")})
    with pytest.warns(UserWarning) as caught:
        values = collection(value=torch.tensor([1.0, float("nan")]), preds=torch.tensor([0, 1]),
                            target=torch.tensor([0, 2]))
    assert [str(w.message) for w in caught] == [
        "MetricCollection.forward: 'loss': Mean: 1 NaN value in 1 update, first at update 0 (kept out of the state)"]
    assert values["loss"].item() == 1.0 and values["acc"].item() == 0.5
    failing = nm.MetricCollection({"loss": _ForwardComputes(nan_strategy="error")})
    with pytest.raises(RuntimeError, match="^MetricCollection.forward: 'loss': Mean: 1 NaN value"):
        failing(torch.tensor([float("nan")]))
    assert failing["loss"].update_count == 0  # the call that raised left the state as it was
    with pytest.warns(UserWarning, match="^Mean: 1 NaN value"):
        _ForwardComputes()(torch.tensor([float("nan")]))


def test_a_report_context_is_entered_once_and_left_once():
    scope = nm._C._ReportContext("x: ")
    with pytest.raises(RuntimeError, match="left without being entered"):
        scope.__exit__(None, None, None)
    with scope:
        with pytest.raises(RuntimeError, match="entered twice"):
            scope.__enter__()
        inner = nm._C._ReportContext("y: ")
        inner.__enter__()
        with pytest.raises(RuntimeError, match="before a context entered after it"):
            scope.__exit__(None, None, None)
        inner.__exit__(None, None, None)
    with pytest.warns(UserWarning, match="^Mean: 1 NaN"):  # nothing left in force
        mean = nm.MeanMetric()
        mean.update(torch.tensor([float("nan")]))
        mean.check()


class _Failing(nm.SumMetric):
    def compute(self):
        raise KeyError("a bug in compute")


def test_what_the_first_raised_carries_the_others_and_every_call_ran():
    """After the first exception the others' calls still run, and their exceptions are noted on it
    (Python 3.11+), a bug in a subclass's compute() too; a warning that is no report of bad input
    (no update yet) keeps its own words."""
    collection = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=3), "bug": _Failing(),
                                      "loss": _OwnMean(nan_strategy="error"), "late": _OwnMean()})
    collection["acc"].update(torch.tensor([7]), torch.tensor([0]))
    collection["loss"].update(torch.tensor([float("nan")]))
    with pytest.warns(UserWarning, match="^Mean.compute: called before any update"):
        with pytest.raises(ValueError, match="^MetricCollection.compute: 'acc': MulticlassAccuracy") as raised:
            collection.compute()
    if sys.version_info >= (3, 11):
        assert raised.value.__notes__ == ["Also raised: KeyError: 'a bug in compute'",
                                          "Also raised: RuntimeError: MetricCollection.compute: 'loss': Mean: 1 NaN "
                                          "value in 1 update, first at update 0 (kept out of the state)"]


@pytest.mark.parametrize("call", ["update", "forward"])
def test_a_refused_update_names_the_metrics_of_the_collection_it_came_from(call):
    collection = nm.MetricCollection({"a3": nm.MulticlassAccuracy(num_classes=3),
                                      "a5": nm.MulticlassAccuracy(num_classes=5)})
    before = collection.state_dict()
    with pytest.raises(nm.ShapeError, match=rf"^MulticlassAccuracy.{call}: preds has shape \[10, 5\] .* "
                                            r"\(in MetricCollection: 'a3'\)$"):
        getattr(collection, call)(torch.rand(10, 5), torch.randint(0, 5, (10,)))
    assert all(torch.equal(before[k], v) for k, v in collection.state_dict().items())


def test_what_the_first_built_in_metric_raised_says_what_the_others_raised():
    collection = nm.MetricCollection({"err": nm.MeanMetric(nan_strategy="error"),
                                      "acc": nm.MulticlassAccuracy(num_classes=3)})
    collection.update(value=torch.tensor([float("nan")]), preds=torch.tensor([5]), target=torch.tensor([0]))
    with pytest.raises(ValueError) as raised:
        collection.compute()
    tail = "in 1 update, first at update 0 (kept out of the state)"
    assert str(raised.value) == (f"MetricCollection.compute: 'acc': MulticlassAccuracy: 1 NaN or out-of-range "
                                 f"prediction {tail} (Also raised: MetricCollection.compute: 'err': Mean: 1 NaN "
                                 f"value {tail})")


def test_where_exceptions_take_no_notes_the_others_are_warned():
    with pytest.warns(RuntimeWarning, match="^Also raised: KeyError"):
        nm.collection._note(object(), "Also raised: KeyError: 'x'")


def test_a_failed_sync_raises_before_any_metric_updated_apart_computes(monkeypatch):
    computed = []

    class Counted(nm.SumMetric):
        def compute(self):
            computed.append(1)
            return super().compute()

    class SyncFailed(Exception):
        pass

    def failing_sync(*args):
        raise SyncFailed

    collection = nm.MetricCollection({"s": Counted(), "m": nm.MeanMetric()})
    collection.update(torch.tensor([1.0]))
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)  # (each metric's distributed_available_fn)
    monkeypatch.setattr(nm.MetricCollection, "_world_size", lambda self: 2)
    monkeypatch.setattr(nm.MetricCollection, "_synced_core", failing_sync)
    with pytest.raises(SyncFailed):
        collection.compute()
    assert computed == []


def test_metrics_of_every_family_share_one_collection_and_take_their_keywords():
    g = torch.Generator().manual_seed(3)
    collection = nm.MetricCollection({"loss": nm.MeanMetric(), "worst": nm.MaxMetric(),
                                      "acc": nm.MulticlassAccuracy(num_classes=6, average="micro")})
    collection.set_dtype(torch.float64)  # the loss to the accumulators' precision
    losses, hits, total = [], 0, 0
    for preds, target in _batches():
        loss = torch.rand(20, generator=g, dtype=torch.float64)
        with nm.count_syncs() as syncs:
            collection.update(value=loss, preds=preds, target=target)
        assert syncs.total == 0
        losses.append(loss)
        hits += int((preds.argmax(1) == target).sum())
        total += len(target)
    values = collection.compute()
    every = torch.cat(losses)
    assert values["loss"].item() == pytest.approx(every.mean().item(), rel=1e-12)
    assert values["worst"].item() == every.max().item()
    assert values["acc"].item() == pytest.approx(hits / total, rel=1e-6)
    assert collection.compute_groups == {0: ["acc"], 1: ["loss"], 2: ["worst"]}  # a dict's in name order


def test_a_failed_update_changes_no_member():
    top1 = nm.MulticlassAccuracy(num_classes=3)
    collection = nm.MetricCollection({"top1": top1, "top2": nm.MulticlassAccuracy(num_classes=3, top_k=2)})
    before = collection.state_dict()
    with pytest.raises(ValueError, match="top_k = 2 needs scores"):
        collection.update(torch.tensor([0, 1, 2]), torch.tensor([0, 1, 1]))
    assert top1.update_count == 0
    after = collection.state_dict()
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)


def test_only_nosync_metrics_are_taken():
    with pytest.raises(ValueError, match="x is a object, not a nosync_metrics metric"):
        nm.MetricCollection({"x": object()})


def test_merge_state_and_state_dict_come_from_the_cpp_collection():
    left, right, whole = (nm.MetricCollection(_four()) for _ in range(3))
    for i, (preds, target) in enumerate(_batches()):
        (left if i % 2 else right).update(preds, target)
        whole.update(preds, target)
    left.merge_state(right)
    for key, value in whole.compute().items():
        assert torch.equal(left.compute()[key], value)
    assert "MulticlassAccuracy.update_count" in whole.state_dict()


# ---------------------------------------------------------------- compute_groups as a list (TorchMetrics 1.6)

def _listed(compute_groups):
    return nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=6, average="micro"),
                                "f1": nm.MulticlassF1Score(num_classes=6, average="macro"),
                                "prec": nm.MulticlassPrecision(num_classes=6, average="weighted"),
                                "top2": nm.MulticlassAccuracy(num_classes=6, top_k=2, average="micro"),
                                "loss": nm.MeanMetric()}, compute_groups=compute_groups)


def _fed(collection):
    """Updates `collection` with _batches() (and a loss per batch); returns sklearn's and numpy's values."""
    g = torch.Generator().manual_seed(5)
    preds, target, losses = [], [], []
    for scores, labels in _batches():
        loss = torch.rand(20, generator=g)
        collection.update(preds=scores, target=labels, value=loss)
        preds.append(scores)
        target.append(labels)
        losses.append(loss)
    scores, labels, loss = torch.cat(preds).numpy(), torch.cat(target).numpy(), torch.cat(losses).numpy()
    top1 = scores.argmax(1)
    return {"acc": skm.accuracy_score(labels, top1),
            "f1": skm.f1_score(labels, top1, average="macro", labels=range(6), zero_division=0),
            "prec": skm.precision_score(labels, top1, average="weighted", labels=range(6), zero_division=0),
            "top2": skm.top_k_accuracy_score(labels, scores, k=2, labels=range(6)),
            "loss": loss.astype(np.float64).mean()}


def _assert_values(collection, expected):
    values = collection.compute()
    assert list(values) == sorted(expected)  # a dict's metrics in name order, as TorchMetrics adds them
    for name, value in expected.items():
        assert values[name].item() == pytest.approx(value, rel=1e-5), name


def test_a_list_of_groups_is_taken_and_the_groups_reported_are_the_states_shared():
    collection = _listed([["acc", "f1"], ["prec"]])
    # acc, f1 and prec count the same things: one state, though the list separates prec
    assert collection.compute_groups == {0: ["acc", "f1", "prec"], 1: ["loss"], 2: ["top2"]}
    _assert_values(collection, _fed(collection))


def test_a_wrong_list_of_groups_still_gives_every_value():
    # TorchMetrics would share acc's state with top2 and loss and return wrong values for them
    with pytest.warns(UserWarning, match=r"compute_groups puts \['acc', 'top2', 'loss'\] in one group, but they"):
        collection = _listed([["acc", "top2", "loss"], ["f1"]])
    assert collection.compute_groups == {0: ["acc", "f1", "prec"], 1: ["loss"], 2: ["top2"]}
    _assert_values(collection, _fed(collection))


def test_an_empty_list_of_groups_shares_nothing_as_in_torchmetrics():
    collection = _listed([])
    assert collection.compute_groups == {}
    assert collection._core.groups() == [[name] for name in ["acc", "f1", "loss", "prec", "top2"]]
    _assert_values(collection, _fed(collection))


@pytest.mark.parametrize("groups, message", [
    ([["acc", "recall"]], r"compute_groups names 'recall', which does not match a metric in the collection; "
                          r"its metrics are \['acc', 'f1', 'loss', 'prec', 'top2'\]"),
    (["acc", "f1"], r"compute_groups must be True, False or a list of groups, each a list of metric names, "
                    r"got the group 'acc'"),
    ([["acc", 1]], r"got the group \['acc', 1\]"),
])
def test_a_list_of_groups_names_metrics_of_the_collection(groups, message):
    with pytest.raises(ValueError, match=message):
        _listed(groups)


def test_names_are_checked_again_when_metrics_are_added():
    collection = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=6)}, compute_groups=[["acc"]])
    collection.add_metrics({"f1": nm.MulticlassF1Score(num_classes=6)})
    assert collection.compute_groups == {0: ["acc", "f1"]}
    with pytest.raises(ValueError, match="compute_groups names 'acc'"):
        nm.MetricCollection({"f1": nm.MulticlassF1Score(num_classes=6)}, compute_groups=[["acc"]])


@pytest.mark.parametrize("how", ["pickle", "deepcopy", "clone", "state_dict"])
def test_a_collection_made_with_a_list_round_trips(how):
    with pytest.warns(UserWarning, match="compute_groups puts"):
        collection = _listed([["acc", "loss"], ["f1", "prec"]])
    expected = _fed(collection)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the wrong group was reported once, when the original was made
        if how == "pickle":
            copied = pickled(collection)
        elif how == "deepcopy":
            copied = copy.deepcopy(collection)
        elif how == "clone":
            copied = collection.clone()
        else:
            with pytest.warns(UserWarning, match="compute_groups puts"):
                copied = _listed([["acc", "loss"], ["f1", "prec"]])
            copied.load_state_dict(collection.state_dict())
    assert copied.compute_groups == collection.compute_groups
    _assert_values(copied, expected)
    copied.reset()
    _assert_values(collection, expected)  # independent of the copy


def _three():
    return {"acc": nm.MulticlassAccuracy(num_classes=6), "prec": nm.MulticlassPrecision(num_classes=6),
            "rec": nm.MulticlassRecall(num_classes=6)}


def _assert_as_separate(collection, separate):
    values = collection.compute()
    for name, metric in separate.items():
        assert torch.equal(values[name], metric.compute()), name
        assert torch.equal(collection[name].compute(), metric.compute()), name


def test_a_member_that_counts_or_resets_alone_leaves_its_group_mates_as_they_were():
    # TorchMetrics hands out members holding copies of their group's state: resetting or updating
    # one alone changes no other (here they shared one state, and reset every member's)
    batches = _batches()
    collection, separate = nm.MetricCollection(_three()), _three()
    for preds, target in batches[:2]:
        collection.update(preds, target)
        for metric in separate.values():
            metric.update(preds, target)
    collection["acc"].reset()
    separate["acc"].reset()
    _assert_as_separate(collection, separate)
    collection["rec"].update(*batches[2])
    separate["rec"].update(*batches[2])
    _assert_as_separate(collection, separate)
    collection["prec"](*batches[3])  # forward
    separate["prec"](*batches[3])
    _assert_as_separate(collection, separate)
    # each keeps counting with the collection, now in a group of its own
    assert collection.compute_groups == {0: ["prec"], 1: ["acc"], 2: ["rec"]}
    collection.update(*batches[4])
    for metric in separate.values():
        metric.update(*batches[4])
    _assert_as_separate(collection, separate)
    for copied in (pickled(collection), copy.deepcopy(collection), collection.clone()):
        assert copied.compute_groups == collection.compute_groups
        _assert_as_separate(copied, separate)


def test_a_member_that_loads_or_merges_alone_takes_a_copy_and_a_parent_load_keeps_the_group():
    batches = _batches()
    collection = nm.MetricCollection(_three())
    collection.update(*batches[0])
    before = collection.compute()
    other = nm.MulticlassRecall(num_classes=6)
    other.update(*batches[1])
    collection["rec"].merge_state(other)
    assert torch.equal(collection["acc"].compute(), before["acc"])
    assert collection.compute_groups == {0: ["acc", "prec"], 1: ["rec"]}
    collection["prec"].load_state_dict(nm.MulticlassPrecision(num_classes=6).state_dict())
    assert torch.equal(collection["acc"].compute(), before["acc"])
    assert collection["prec"].update_count == 0
    # a model's load_state_dict reaches each member through its collection: the group stays
    model = torch.nn.Module()
    model.metrics = nm.MetricCollection(_three())
    for metric in model.metrics.values():
        metric.persistent(True)
    model.metrics.update(*batches[0])
    saved = model.state_dict()
    model.metrics.reset()
    model.load_state_dict(saved)
    assert model.metrics.compute_groups == {0: ["acc", "prec", "rec"]}
    assert all(torch.equal(v, before[k]) for k, v in model.metrics.compute().items())


def test_a_nested_collection_is_flattened_as_in_torchmetrics():
    batches = _batches()
    inner = nm.MetricCollection([nm.MulticlassAccuracy(num_classes=6), nm.MulticlassPrecision(num_classes=6)],
                                prefix="in_")
    outer = nm.MetricCollection([inner, nm.MulticlassRecall(num_classes=6)], prefix="out/", compute_groups=False)
    assert list(outer.keys()) == ["out/in_MulticlassAccuracy", "out/in_MulticlassPrecision", "out/MulticlassRecall"]
    by_key = nm.MetricCollection({"val": nm.MetricCollection([nm.MulticlassAccuracy(num_classes=6)], postfix="_x"),
                                  "loss": nm.MeanMetric()})
    assert list(by_key.keys()) == ["loss", "val_MulticlassAccuracy_x"]
    separate = {"out/in_MulticlassAccuracy": nm.MulticlassAccuracy(num_classes=6),
                "out/in_MulticlassPrecision": nm.MulticlassPrecision(num_classes=6),
                "out/MulticlassRecall": nm.MulticlassRecall(num_classes=6)}
    for preds, target in batches:
        outer.update(preds, target)  # each metric once: the states the nested collection shared are apart
        for metric in separate.values():
            metric.update(preds, target)
    for key, value in outer.compute().items():
        assert torch.equal(value, separate[key].compute()), key
    with pytest.raises(ValueError, match="not a nosync_metrics metric"):
        nm.MetricCollection([inner, "x"])


def test_repr_is_torchmetrics():
    collection = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=3),
                                      "p": nm.MulticlassPrecision(num_classes=3)}, prefix="a_", postfix="_b")
    assert repr(collection) == ("MetricCollection(\n  (acc): MulticlassAccuracy(num_classes=3)\n"
                                "  (p): MulticlassPrecision(num_classes=3),\n  prefix=a_,\n  postfix=_b\n)")
    assert repr(nm.MetricCollection([nm.MeanMetric()])) == "MetricCollection(\n  (MeanMetric): MeanMetric()\n)"


class _TwoOutputs(nm.SumMetric):
    def compute(self):
        value = super().compute()
        return {"output1": value, "output2": 2 * value}


@pytest.mark.parametrize("base, expected", [
    (_TwoOutputs, {"prefix2_prefix1_output1_postfix1_postfix2": 3.0, "prefix2_prefix1_output2_postfix1_postfix2": 6.0}),
    (lambda: {"metric1": _TwoOutputs(), "metric2": _TwoOutputs()},
     {"prefix2_prefix1_metric1_output1_postfix1_postfix2": 3.0, "prefix2_prefix1_metric1_output2_postfix1_postfix2": 6.0,
      "prefix2_prefix1_metric2_output1_postfix1_postfix2": 3.0, "prefix2_prefix1_metric2_output2_postfix1_postfix2": 6.0}),
])
def test_dict_values_from_a_nested_collection_keep_its_prefix_and_postfix(base, expected):
    # TorchMetrics' test_double_nested_collections, with values
    inner = nm.MetricCollection(base(), prefix="prefix1_", postfix="_postfix1")
    outer = nm.MetricCollection([inner], prefix="prefix2_", postfix="_postfix2")
    for values in (outer(torch.tensor(3.0)), outer.compute(), pickled(outer).compute()):
        assert {k: v.item() for k, v in values.items()} == expected


@pytest.mark.parametrize("call", [
    lambda m, p, t: m.update(p, t[:3]),
    lambda m, p, t: m(p, t[:3]),
    lambda m, p, t: m.update("x", t),
    lambda m, p, t: m.merge_state(nm.MulticlassRecall(num_classes=7)),
    lambda m, p, t: m.merge_state([nm.MulticlassRecall(num_classes=6), {"update_count": torch.tensor(1)}]),
    lambda m, p, t: m.load_state_dict({}),
    lambda m, p, t: m.load_state_dict({"tp": torch.zeros(3)}, strict=False),
], ids=["update", "forward", "update-type", "merge", "merge-list", "load", "load-loose"])
def test_a_member_call_refused_by_its_checks_leaves_the_member_in_its_group(call):
    collection = nm.MetricCollection(_three())
    preds, target = _batches()[0]
    collection.update(preds, target)
    before = collection.state_dict()
    with pytest.raises((ValueError, TypeError)):
        call(collection["rec"], preds, target)
    assert collection.compute_groups == {0: ["acc", "prec", "rec"]}
    assert all(torch.equal(before[k], v) for k, v in collection.state_dict().items())


def test_a_member_alone_in_its_group_still_detaches_once_a_later_metric_shares_it():
    preds, target = _batches()[0]
    collection = nm.MetricCollection({"a": nm.MulticlassPrecision(num_classes=6)})
    collection["a"].reset()  # alone: nothing to detach
    collection.add_metrics({"b": nm.MulticlassRecall(num_classes=6)})
    assert collection.compute_groups == {0: ["a", "b"]}
    collection["a"].update(preds, target)
    assert collection["b"].update_count == 0
    assert collection.compute_groups == {0: ["b"], 1: ["a"]}


def test_forward_after_a_member_took_another_collections_layout():
    # a metric in two collections: the second puts it in a confusion matrix's state
    preds, target = _batches()[0]
    precision = nm.MulticlassPrecision(num_classes=6)
    first = nm.MetricCollection({"p": precision})
    first(preds, target)
    first.reset()
    second = nm.MetricCollection({"cm": nm.MulticlassConfusionMatrix(num_classes=6), "p": precision})
    alone = nm.MulticlassPrecision(num_classes=6)
    alone.update(preds, target)
    assert torch.equal(first(preds, target)["p"], alone.compute())
    assert second.compute_groups == {0: ["cm"], 1: ["p"]}  # in two collections: a state of its own


@pytest.mark.parametrize("added_later_to", ["first", "second"])
def test_no_metric_joins_the_state_of_a_metric_in_two_collections(added_later_to):
    # metrics added after it, to either collection, keep states of their own: they see their own
    # collection's batches alone (before, one that joined its state counted the other's too)
    batches = _batches()
    shared = nm.MulticlassAccuracy(num_classes=6)
    first = nm.MetricCollection({"acc": shared, "p": nm.MulticlassPrecision(num_classes=6)})
    second = nm.MetricCollection({"acc": shared, "r": nm.MulticlassRecall(num_classes=6)})
    later = first if added_later_to == "first" else second
    later.add_metrics({"f1": nm.MulticlassF1Score(num_classes=6)})
    first.update(*batches[0])
    second.update(*batches[1])
    expected = {"acc": nm.MulticlassAccuracy(num_classes=6), "p": nm.MulticlassPrecision(num_classes=6),
                "r": nm.MulticlassRecall(num_classes=6), "f1": nm.MulticlassF1Score(num_classes=6)}
    for batch in batches[:2]:
        expected["acc"].update(*batch)
    for name, batch in (("p", batches[0]), ("r", batches[1]), ("f1", batches[0 if later is first else 1])):
        expected[name].update(*batch)
    for collection in (first, second):
        for name, value in collection.compute().items():
            assert torch.equal(value, expected[name].compute()), name
            assert collection[name].update_count == expected[name].update_count, name
        # the others, which count the same things, still share one state
        others = sorted(name for name in collection.keys() if name != "acc")
        assert sorted(sorted(group) for group in collection.compute_groups.values()) == sorted([["acc"], others])


@pytest.mark.parametrize("partner", [nm.MulticlassPrecision, nm.MulticlassConfusionMatrix])
def test_a_collection_with_a_metric_kept_alone_merges_one_without(partner):
    # with a ConfusionMatrix, the accuracy reads its C x C state there and counts per class here
    batches = _batches()

    def made(accuracy):
        return nm.MetricCollection({"acc": accuracy, "other": partner(num_classes=6)})

    shared = nm.MulticlassAccuracy(num_classes=6)
    elsewhere = nm.MetricCollection({"acc": shared})  # alive: it may update the metric too
    kept, twin = made(shared), made(nm.MulticlassAccuracy(num_classes=6))
    assert kept.compute_groups == {0: ["acc"], 1: ["other"]} and twin.compute_groups == {0: ["acc", "other"]}
    kept.update(*batches[0])
    twin.update(*batches[1])
    kept.merge_state(twin)
    expected = {"acc": nm.MulticlassAccuracy(num_classes=6), "other": partner(num_classes=6)}
    for name, metric in expected.items():
        for batch in batches[:2]:
            metric.update(*batch)
        assert torch.equal(kept.compute()[name], metric.compute()), name
    with pytest.raises(ValueError, match="different metrics or groups"):
        twin.merge_state(kept)  # its one state cannot take two
    assert elsewhere["acc"] is shared


def test_a_refused_merge_of_collections_that_hold_one_metric_changes_nothing():
    batches = _batches()
    shared = nm.MulticlassAccuracy(num_classes=6)
    first = nm.MetricCollection({"acc": shared, "p": nm.MulticlassPrecision(num_classes=6)})
    second = nm.MetricCollection({"acc": shared, "p": nm.MulticlassPrecision(num_classes=6)})
    first.update(*batches[0])
    second.update(*batches[1])
    before = {key: value.clone() for key, value in first.state_dict().items()}
    with pytest.raises(ValueError, match="'acc' there counts into a state of this collection"):
        first.merge_state(second)
    assert all(torch.equal(value, before[key]) for key, value in first.state_dict().items())


def test_a_merge_of_collections_that_hold_one_metric_under_other_names_is_refused_and_changes_nothing():
    # a group here would read a state that another group here has already merged into
    first, second = nm.SumMetric(), nm.SumMetric()
    first.update(1.0)
    second.update(10.0)
    here = nm.MetricCollection({"a": first, "b": second})
    there = nm.MetricCollection({"a": nm.SumMetric(), "b": first})
    with pytest.raises(ValueError, match="'b' there counts into a state of this collection"):
        here.merge_state(there)
    assert (first.compute().item(), second.compute().item()) == (1.0, 10.0)


def test_a_merge_that_would_read_a_meta_state_in_another_layout_is_refused():
    # (on the CPU from meta, a state would arrive reset: the merge would count nothing)
    batch = _batches()[0]
    precision = nm.MulticlassPrecision(num_classes=6)
    precision.update(*batch)
    here = nm.MetricCollection({"cm": nm.MulticlassConfusionMatrix(num_classes=6).to("meta"), "p": precision})
    there = nm.MetricCollection({"cm": nm.MulticlassConfusionMatrix(num_classes=6),
                                 "p": nm.MulticlassPrecision(num_classes=6)}).to("meta")
    assert here.compute_groups == {0: ["cm"], 1: ["p"]} and there.compute_groups == {0: ["cm", "p"]}
    before = {key: value.clone() for key, value in precision.state_dict().items()}
    with pytest.raises(ValueError, match="is on the meta device, which holds no values"):
        here.merge_state(there)
    assert all(torch.equal(value, before[key]) for key, value in precision.state_dict().items())


def test_a_collection_merges_one_on_another_device_whatever_their_groups():
    # on meta the merge checks and moves, with no values to count
    shared = nm.MulticlassAccuracy(num_classes=6)
    elsewhere = nm.MetricCollection({"acc": shared})

    def made(accuracy):
        return nm.MetricCollection({"acc": accuracy, "p": nm.MulticlassPrecision(num_classes=6),
                                    "cm": nm.MulticlassConfusionMatrix(num_classes=6), "mean": nm.MeanMetric()})

    kept, twin = made(shared).to("meta"), made(nm.MulticlassAccuracy(num_classes=6))
    preds, target = _batches()[0]
    twin.update(preds=preds, target=target, value=torch.tensor([1.0]))
    kept.merge_state(twin)
    assert kept.compute_groups == {0: ["acc"], 1: ["cm", "p"], 2: ["mean"]}
    assert all(kept[name].device.type == "meta" for name in kept.keys()) and elsewhere["acc"] is shared


def test_one_metric_under_two_names_counts_once_after_a_reset_of_its_own():
    preds, target = _batches()[0]
    metric = nm.MulticlassAccuracy(num_classes=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        collection = nm.MetricCollection({"a": metric, "b": metric})
    metric.reset()
    collection.update(preds, target)
    assert metric.update_count == 1


@pytest.mark.parametrize("how", ["pickle", "deepcopy", "clone"])
def test_a_copy_has_the_groups_of_the_original_whatever_made_them(how):
    batches = _batches()
    collection = nm.MetricCollection({"p": nm.MulticlassPrecision(num_classes=6), "r": nm.MulticlassRecall(num_classes=6)})
    collection["p"].update(*batches[0])  # detaches p
    collection.add_metrics({"cm": nm.MulticlassConfusionMatrix(num_classes=6)})  # joins r's fresh state
    collection.update(*batches[1])
    grown = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=6)})
    grown.update(*batches[1])
    grown.add_metrics({"f1": nm.MulticlassF1Score(num_classes=6)})  # added after an update: a state of its own
    for original in (collection, grown):
        copied = {"pickle": pickled, "deepcopy": copy.deepcopy,
                  "clone": lambda c: c.clone()}[how](original)
        assert copied.compute_groups == original.compute_groups
        for key, value in original.compute().items():
            assert torch.equal(copied.compute()[key], value), key
        copied.update(*batches[2])
        original.update(*batches[2])
        for key, value in original.compute().items():
            assert torch.equal(copied.compute()[key], value), key


def test_a_shallow_copy_holds_the_same_metrics_grouped_afresh():
    batches = _batches()
    collection = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=6),
                                      "p": nm.MulticlassPrecision(num_classes=6)}, prefix="val_")
    collection.update(*batches[0])
    before = {key: value.clone() for key, value in collection.compute().items()}
    shallow = copy.copy(collection)  # (it raised: the original's groups, which its metrics had just left)
    assert all(shallow[name] is collection[name] for name in ("acc", "p")) and shallow.prefix == "val_"
    assert all(torch.equal(shallow.compute()[key], value) for key, value in before.items())
    collection.update(*batches[1])  # each counts once: a metric in two collections keeps a state of its own
    separate = {"acc": nm.MulticlassAccuracy(num_classes=6), "p": nm.MulticlassPrecision(num_classes=6)}
    for metric in separate.values():
        for batch in batches[:2]:
            metric.update(*batch)
    for copy_or_original in (shallow, collection):
        values = copy_or_original.compute()
        assert all(torch.equal(values["val_" + name], metric.compute()) for name, metric in separate.items())


def test_a_metric_added_as_torch_adds_a_module_joins_as_add_metrics_adds_it():
    # (helper-98: it sat in the modules, left out of update() and raising a KeyError in compute())
    collection = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=3)})
    collection.add_module("f1", nm.MulticlassF1Score(num_classes=3))
    collection.register_module("p", nm.MulticlassPrecision(num_classes=3))
    collection.r = nm.MulticlassRecall(num_classes=3)
    assert collection.compute_groups == {0: ["acc", "f1", "p", "r"]}
    preds, target = torch.tensor([0, 1, 2, 2]), torch.tensor([0, 1, 1, 2])
    collection.update(preds, target)
    for name, score in (("acc", skm.recall_score), ("f1", skm.f1_score), ("p", skm.precision_score),
                        ("r", skm.recall_score)):
        assert collection[name].update_count == 1
        assert collection.compute()[name].item() == pytest.approx(score(target, preds, average="macro"))
    with pytest.raises(ValueError, match="MetricCollection: linear is a Linear, not a nosync_metrics metric"):
        collection.linear = torch.nn.Linear(2, 2)
    assert list(collection.keys()) == ["acc", "f1", "p", "r"]


def test_a_metric_stays_once_added():
    collection = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=3)})
    says = "MetricCollection: 'acc' is a metric of the collection, which is not replaced, set to None or deleted"
    for change in (lambda: delattr(collection, "acc"), lambda: setattr(collection, "acc", None),
                   lambda: setattr(collection, "acc", nm.MulticlassRecall(num_classes=3))):
        with pytest.raises(ValueError, match=says):
            change()
    collection.note = "kept"  # other attributes come and go
    del collection.note
    collection.update(torch.tensor([0, 1]), torch.tensor([0, 2]))
    assert list(collection.compute()) == ["acc"] and not hasattr(collection, "note")


def test_calling_a_subclass_runs_its_own_forward():
    class Logged(nm.MetricCollection):
        def forward(self, *args, **kwargs):
            self.calls = getattr(self, "calls", 0) + 1
            return super().forward(*args, **kwargs)

    logged = Logged({"mean": nm.MeanMetric()})
    assert logged(torch.tensor([1.0, 3.0]))["mean"].item() == 2.0 and logged.calls == 1


def test_a_members_own_update_beside_the_collections_update_loses_no_batch():
    # the member's update detaches it: that must wait for an update of the collection under way
    preds, target = torch.randn(200_000, 10), torch.randint(0, 10, (200_000,))
    for _ in range(5):
        collection = nm.MetricCollection({"a": nm.MulticlassAccuracy(num_classes=10, ignore_index=0),
                                          "p": nm.MulticlassPrecision(num_classes=10),
                                          "r": nm.MulticlassRecall(num_classes=10)})
        together = threading.Thread(target=lambda: collection.update(preds, target))
        alone = threading.Thread(target=lambda: (time.sleep(0.002), collection["p"].update(preds, target)))
        together.start()
        alone.start()
        together.join()
        alone.join()
        assert {k: m.update_count for k, m in collection.items()} == {"a": 1, "p": 2, "r": 1}


@pytest.mark.parametrize("alone", ["cm", "p"])
def test_a_member_detached_from_a_confusion_matrix_keeps_its_counts_in_its_own_layout_and_copies(alone):
    batches = _batches()
    collection = nm.MetricCollection({"cm": nm.MulticlassConfusionMatrix(num_classes=6),
                                      "p": nm.MulticlassPrecision(num_classes=6)})
    separate = {"cm": nm.MulticlassConfusionMatrix(num_classes=6), "p": nm.MulticlassPrecision(num_classes=6)}
    for preds, target in batches[:2]:
        collection.update(preds, target)
        for metric in separate.values():
            metric.update(preds, target)
    collection[alone].update(*batches[2])  # leaves the shared C x C state with its counts
    separate[alone].update(*batches[2])
    assert "tp" in collection["p"].state_dict() or alone == "cm"  # a precision alone counts per class
    for copied in (collection, collection.clone(), pickled(collection), copy.deepcopy(collection)):
        assert copied.compute_groups == collection.compute_groups
        copied.update(*batches[3])
    for metric in separate.values():
        metric.update(*batches[3])
    _assert_as_separate(collection, separate)


def test_a_copy_shares_the_states_of_metrics_added_later_as_the_original_does():
    preds, target = _batches()[0]
    original = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=6)})
    original.update(preds, target)
    original.add_metrics({"p": nm.MulticlassPrecision(num_classes=6)})  # after an update: a state of its own
    copied = original.clone()
    for collection in (original, copied):
        collection.add_metrics({"r": nm.MulticlassRecall(num_classes=6)})
    assert copied.compute_groups == original.compute_groups == {0: ["acc"], 1: ["p", "r"]}
    original.merge_state(copied)


def test_one_metric_under_two_names_leaves_its_group_as_one():
    preds, target = _batches()[0]
    metric = nm.MulticlassAccuracy(num_classes=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        collection = nm.MetricCollection({"a": metric, "b": metric, "c": nm.MulticlassAccuracy(num_classes=6)})
    metric.update(preds, target)
    assert collection.compute_groups == {0: ["c"], 1: ["a", "b"]}
    collection.update(preds, target)
    assert metric.update_count == 2 and collection["c"].update_count == 1


def test_a_metric_in_two_collections_leaves_no_third_metric_seeing_both_collections_batches():
    first_batch, second_batch = _batches()[:2]
    matrix = nm.MulticlassConfusionMatrix(num_classes=6)
    first = nm.MetricCollection({"cm": matrix, "acc": nm.MulticlassAccuracy(num_classes=6)})
    second = nm.MetricCollection({"cm2": nm.MulticlassConfusionMatrix(num_classes=6),
                                  "p": nm.MulticlassPrecision(num_classes=6)})
    second.add_metrics({"x": matrix})  # the same object in both: each collection counts into it
    first.update(*first_batch)
    second.update(*second_batch)
    expected = {name: metric() for name, metric in (("acc", lambda: nm.MulticlassAccuracy(num_classes=6)),
                                                    ("p", lambda: nm.MulticlassPrecision(num_classes=6)),
                                                    ("cm", lambda: nm.MulticlassConfusionMatrix(num_classes=6)))}
    expected["acc"].update(*first_batch)
    expected["p"].update(*second_batch)
    for batch in (first_batch, second_batch):
        expected["cm"].update(*batch)
    assert torch.equal(first["acc"].compute(), expected["acc"].compute())
    assert torch.equal(second["p"].compute(), expected["p"].compute())
    assert torch.equal(second["cm2"].compute(), nm.MulticlassConfusionMatrix(num_classes=6).forward(*second_batch))
    assert torch.equal(matrix.compute(), expected["cm"].compute())


def test_a_nested_collections_metrics_share_states_in_the_one_they_join():
    inner = nm.MetricCollection([nm.MulticlassAccuracy(num_classes=6), nm.MulticlassPrecision(num_classes=6)])
    outer = nm.MetricCollection([inner, nm.MulticlassRecall(num_classes=6)])
    assert outer.compute_groups == {0: ["MulticlassAccuracy", "MulticlassPrecision", "MulticlassRecall"]}


def test_a_metric_added_to_a_nested_collection_later_keeps_out_of_the_states_handed_over():
    inner = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=4)})
    outer = nm.MetricCollection([inner, nm.MulticlassRecall(num_classes=4)])
    inner.add_metrics({"f1": nm.MulticlassF1Score(num_classes=4)})
    batches = _label_batches(35, 2)
    outer.update(*batches[0])
    assert inner["f1"].update_count == 0 and inner["acc"].update_count == 1
    inner["acc"].update(*batches[1])  # on its own: it takes a copy, and the outer recall keeps its state
    assert inner["acc"].update_count == 2 and outer["MulticlassRecall"].update_count == 1
    assert inner["f1"].update_count == 0


def test_a_batch_given_to_a_nested_collection_counts_once():
    # its metrics, each in a group of its own there, share one state in the outer collection: the
    # batch reaches that state once (and so the outer collection's recall, as the README says)
    inner = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=4), "f1": nm.MulticlassF1Score(num_classes=4)})
    outer = nm.MetricCollection([inner, nm.MulticlassRecall(num_classes=4)])
    batches = _label_batches(21, 3)
    inner.update(*batches[0])
    inner(*batches[1])
    other = inner.clone()
    other.reset()
    other.update(*batches[2])
    inner.merge_state(other)
    preds = torch.cat([p for p, _ in batches]).numpy()
    target = torch.cat([t for _, t in batches]).numpy()
    for name in ("acc", "f1", "MulticlassRecall"):
        assert outer[name].update_count == 3
    macro_recall = skm.recall_score(target, preds, average="macro", labels=range(4), zero_division=0)
    assert outer["acc"].compute().item() == pytest.approx(macro_recall)  # macro accuracy is macro recall
    assert outer["MulticlassRecall"].compute().item() == pytest.approx(macro_recall)
    assert outer["f1"].compute().item() == pytest.approx(skm.f1_score(target, preds, average="macro", labels=range(4),
                                                                      zero_division=0))


def _model_holding_a_nested_collection():
    model = torch.nn.Module()
    model.inner = nm.MetricCollection({"p": nm.MulticlassPrecision(num_classes=4),
                                       "acc": nm.MulticlassAccuracy(num_classes=4)})
    model.outer = nm.MetricCollection({"nest": model.inner, "cm": nm.MulticlassConfusionMatrix(num_classes=4)})
    return model


def _copied_outer_first(model):
    copied = torch.nn.Module()
    copied.outer, copied.inner = copy.deepcopy((model.outer, model.inner))
    return copied


def _copied_nested_first(model):
    copied = torch.nn.Module()
    copied.inner, copied.outer = copy.deepcopy((model.inner, model.outer))
    return copied


@pytest.mark.parametrize("how", [copy.deepcopy, pickled, torch_saved,
                                 _copied_outer_first, _copied_nested_first],
                         ids=["deepcopy", "pickle", "torch.save", "outer first", "nested first"])
def test_a_copy_keeps_a_nested_collection_that_the_model_holds_too_nested(how):
    """The copy reaches the nested collection before or after the outer one: either way its metrics
    stay handed over, sharing the outer one's states. (The copy raised where it reached the nested
    one first; the other way, its outer collection lost the nested one's batches.)"""
    original = _model_holding_a_nested_collection()
    batches = _label_batches(36, 4)
    original.outer.update(*batches[0])
    original.inner.update(*batches[1])
    copied = how(original)
    assert copied.outer.compute_groups == original.outer.compute_groups and len(original.outer.compute_groups) == 1
    assert sorted(copied.inner.compute_groups.values()) == sorted(original.inner.compute_groups.values())
    assert copied.outer["nest_p"] is copied.inner["p"]
    for model in (original, copied):
        model.outer.update(*batches[2])
        model.inner.update(*batches[3])
    for name in ("outer", "inner"):
        want, got = getattr(original, name).compute(), getattr(copied, name).compute()
        assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want), name
    assert copied.outer["cm"].update_count == 4  # every batch, the nested collection's too


def test_a_shallow_copy_of_a_nested_collection_leaves_the_outer_ones_groups():
    model = _model_holding_a_nested_collection()
    groups = model.outer.compute_groups
    shallow = copy.copy(model.inner)
    assert shallow["p"] is model.inner["p"] and model.outer.compute_groups == groups and len(groups) == 1
    shallow.update(*_label_batches(37, 1)[0])
    assert model.outer["cm"].update_count == 1


# ---------------------------------------------------------------- checkpoints whatever the groups


def test_a_nested_collection_refuses_a_merge_or_load_that_gives_its_shared_state_two_counts():
    inner = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=4), "f1": nm.MulticlassF1Score(num_classes=4)})
    outer = nm.MetricCollection([inner, nm.MulticlassRecall(num_classes=4)])
    with pytest.warns(UserWarning, match="f1, acc called before any update"):
        inner.compute()
    batches = _label_batches(22, 2)
    inner.update(*batches[0])
    other = inner.clone()
    other.reset()
    other["acc"].update(*batches[1])  # acc alone: the copy's f1 counts nothing
    before = outer.state_dict()
    with pytest.raises(ValueError, match="share one state here .* but the other holds different counts"):
        inner.merge_state(other)
    saved = inner.state_dict()
    saved["f1.update_count"] = torch.tensor(5)
    with pytest.raises(ValueError, match="but the dict gives them different parts"):
        inner.load_state_dict(saved)
    assert all(torch.equal(before[k], v) for k, v in outer.state_dict().items())


def test_a_nested_confusion_matrix_and_precision_load_merge_and_load_loosely_as_one_state():
    # handed over, they share the matrix in the outer collection and sit in a group each here
    inner = nm.MetricCollection({"cm": nm.MulticlassConfusionMatrix(num_classes=4),
                                 "prec": nm.MulticlassPrecision(num_classes=4, average=None)})
    outer = nm.MetricCollection([inner, nm.MulticlassRecall(num_classes=4, average=None)])
    batches = _label_batches(23, 2)
    inner.update(*batches[0])
    saved = inner.state_dict()
    inner.load_state_dict(saved)
    other = inner.clone()
    other.reset()
    other.update(*batches[1])
    inner.merge_state(other)
    confmat, precision = _expected_confmat_and_precision(batches)
    np.testing.assert_array_equal(inner.compute()["cm"].numpy(), confmat)
    np.testing.assert_allclose(outer.compute()["prec"].numpy(), precision, rtol=1e-6)
    assert outer["MulticlassRecall"].update_count == 2
    # a loose load of the precision alone cannot load the matrix: it changes nothing, or is refused
    before = outer.state_dict()
    inner.load_state_dict({k: v for k, v in inner.state_dict().items() if k.startswith("prec.")}, strict=False)
    with pytest.raises(ValueError, match="'prec' shares one state here with 'cm'"):
        inner.load_state_dict({k: v for k, v in saved.items() if k.startswith("prec.")}, strict=False)
    assert all(torch.equal(before[k], v) for k, v in outer.state_dict().items())
    # a loose load of the matrix alone: the precision reads it
    inner.load_state_dict({k: v for k, v in saved.items() if k.startswith("cm.")}, strict=False)
    assert inner["prec"].update_count == 1
    np.testing.assert_array_equal(inner.compute()["cm"].numpy(), _expected_confmat_and_precision(batches[:1])[0])

def test_a_nested_collection_whose_shared_state_is_laid_out_for_an_outer_metric_loads_what_agrees():
    # the inner per-class metrics count into the outer ConfusionMatrix's C x C state, which no
    # metric of the inner collection lays out: its own state_dict loads (it agrees), a differing
    # one is refused before anything loads (the mean too), and a merge of per-class counts, which
    # cannot add to a matrix, is refused with what to do
    inner = nm.MetricCollection({"mean": nm.MeanMetric(), "prec": nm.MulticlassPrecision(num_classes=4, average=None),
                                 "rec": nm.MulticlassRecall(num_classes=4, average=None)})
    outer = nm.MetricCollection([inner, nm.MulticlassConfusionMatrix(num_classes=4)])
    batches = _label_batches(31, 2)
    inner.update(*batches[0])  # (the mean takes preds as values, target as weights)
    saved, saved_mean = inner.state_dict(), inner["mean"].compute()
    inner.load_state_dict(saved)
    inner.load_state_dict(saved, strict=False)
    inner["mean"].update(torch.tensor([100.0]))
    inner.update(*batches[1])
    before = outer.state_dict()
    with pytest.raises(ValueError, match="'(prec|rec)' shares one state here with a metric of a collection this one "
                                         "was handed to, laid out for the latter"):
        inner.load_state_dict(saved)
    with pytest.raises(ValueError, match="counts here into the state of a collection this one was handed to"):
        inner.merge_state(inner.clone())
    assert all(torch.equal(before[k], v) for k, v in outer.state_dict().items())
    inner.load_state_dict({k: v for k, v in saved.items() if k.startswith("mean.")}, strict=False)
    assert inner["mean"].compute().item() == saved_mean.item() != pytest.approx(0)
    _, precision = _expected_confmat_and_precision(batches)
    np.testing.assert_allclose(inner.compute()["prec"].numpy(), precision, rtol=1e-6)


def test_metrics_kept_after_their_collection_is_gone_count_on_their_own():
    collection = nm.MetricCollection({"cm": nm.MulticlassConfusionMatrix(num_classes=4),
                                      "prec": nm.MulticlassPrecision(num_classes=4, average=None)})
    batches = _label_batches(32, 2)
    collection.update(*batches[0])
    cm, prec = collection["cm"], collection["prec"]
    del collection
    gc.collect()
    prec.update(*batches[1])
    assert cm.update_count == 1 and prec.update_count == 2
    np.testing.assert_array_equal(cm.compute().numpy(), _expected_confmat_and_precision(batches[:1])[0])
    np.testing.assert_allclose(prec.compute().numpy(), _expected_confmat_and_precision(batches)[1], rtol=1e-6)
    prec.load_state_dict(prec.state_dict())
    prec.merge_state(nm.MulticlassPrecision(num_classes=4, average=None))
    assert prec.update_count == 2


def test_a_member_merging_itself_adds_its_counts_again_as_in_torchmetrics():
    collection = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=4),
                                      "f1": nm.MulticlassF1Score(num_classes=4)})
    collection.update(*_label_batches(34, 1)[0])
    before = collection.state_dict()
    collection["acc"].merge_state(collection["acc"])
    after = collection.state_dict()
    for key in ("tp", "fp", "tn", "fn", "update_count"):
        assert torch.equal(after["acc." + key], 2 * before["acc." + key]), key
        assert torch.equal(after["f1." + key], before["f1." + key]), key
    lone = nm.MulticlassAccuracy(num_classes=4)
    lone.update(*_label_batches(34, 1)[0])
    lone.merge_state(lone)
    assert torch.equal(lone.state_dict()["tp"], after["acc.tp"])


def _confmat_and_precision(compute_groups=True):
    return nm.MetricCollection({"cm": nm.MulticlassConfusionMatrix(num_classes=4),
                                "prec": nm.MulticlassPrecision(num_classes=4, average=None)},
                               compute_groups=compute_groups)


def _expected_confmat_and_precision(batches):
    """sklearn's values of the batches (labels)."""
    preds = torch.cat([p for p, _ in batches]).numpy()
    target = torch.cat([t for _, t in batches]).numpy()
    return (skm.confusion_matrix(target, preds, labels=range(4)),
            skm.precision_score(target, preds, labels=range(4), average=None, zero_division=0))


def _label_batches(seed, count):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, 4, (16,), generator=g), torch.randint(0, 4, (16,), generator=g)) for _ in range(count)]


def test_a_member_state_dict_has_its_own_keys_whatever_it_shares():
    grouped, apart = _confmat_and_precision(), _confmat_and_precision(compute_groups=False)
    assert grouped.compute_groups == {0: ["cm", "prec"]}
    for p, t in _label_batches(3, 2):
        grouped.update(p, t)
        apart.update(p, t)
    assert {"prec.tp", "prec.fp", "prec.tn", "prec.fn"} <= grouped.state_dict().keys()
    assert "prec.confmat" not in grouped.state_dict()
    assert grouped.state_dict().keys() == apart.state_dict().keys()
    for key, value in apart.state_dict().items():
        assert torch.equal(grouped.state_dict()[key], value), key
    assert grouped["prec"].state_dict().keys() == nm.MulticlassPrecision(num_classes=4, average=None).state_dict().keys()


@pytest.mark.parametrize("saved_groups,loaded_groups", [(True, True), (False, True), (True, False)])
def test_a_checkpoint_loads_into_a_fresh_collection_whatever_the_groups(saved_groups, loaded_groups):
    batches = _label_batches(5, 3)
    saved = _confmat_and_precision(saved_groups)
    for p, t in batches:
        saved.update(p, t)
    resumed = _confmat_and_precision(loaded_groups)
    resumed.load_state_dict(saved.state_dict())
    assert resumed.compute_groups == _confmat_and_precision(loaded_groups).compute_groups  # still grouped
    confmat, precision = _expected_confmat_and_precision(batches)
    values = resumed.compute()
    np.testing.assert_array_equal(values["cm"].numpy(), confmat)
    np.testing.assert_allclose(values["prec"].numpy(), precision, rtol=1e-6)


def test_a_checkpoint_after_a_member_reset_alone_resumes_in_a_fresh_collection():
    # the per-epoch pattern: one member reset on its own, the checkpoint, then the same code again
    first, second = _label_batches(7, 2), _label_batches(8, 2)
    saved = _confmat_and_precision()
    for p, t in first:
        saved.update(p, t)
    saved["prec"].reset()
    for p, t in second:
        saved.update(p, t)
    resumed = _confmat_and_precision()
    resumed.load_state_dict(saved.state_dict())
    assert resumed.compute_groups == saved.compute_groups == {0: ["cm"], 1: ["prec"]}
    confmat, _ = _expected_confmat_and_precision(first + second)
    _, precision = _expected_confmat_and_precision(second)
    values = resumed.compute()
    np.testing.assert_array_equal(values["cm"].numpy(), confmat)
    np.testing.assert_allclose(values["prec"].numpy(), precision, rtol=1e-6)
    for p, t in second:  # and it goes on counting apart
        resumed.update(p, t)
    _, precision = _expected_confmat_and_precision(second + second)
    np.testing.assert_allclose(resumed.compute()["prec"].numpy(), precision, rtol=1e-6)


def test_a_model_checkpoint_with_a_member_reset_alone_loads_into_a_fresh_model():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(2, 2)
            self.metrics = _confmat_and_precision()
            self.metrics.persistent(True)

    first, second = _label_batches(9, 2), _label_batches(10, 1)
    saved = Model()
    for p, t in first:
        saved.metrics.update(p, t)
    saved.metrics["prec"].reset()
    for p, t in second:
        saved.metrics.update(p, t)
    fresh = Model()
    result = fresh.load_state_dict(saved.state_dict())
    assert not result.missing_keys and not result.unexpected_keys
    confmat, _ = _expected_confmat_and_precision(first + second)
    _, precision = _expected_confmat_and_precision(second)
    values = fresh.metrics.compute()
    np.testing.assert_array_equal(values["cm"].numpy(), confmat)
    np.testing.assert_allclose(values["prec"].numpy(), precision, rtol=1e-6)
    untouched = Model()  # a checkpoint of a model whose metrics kept their group keeps it
    for p, t in first:
        untouched.metrics.update(p, t)
    again = Model()
    again.load_state_dict(untouched.state_dict())
    assert again.metrics.compute_groups == {0: ["cm", "prec"]}
    np.testing.assert_array_equal(again.metrics.compute()["cm"].numpy(), _expected_confmat_and_precision(first)[0])


def test_compute_before_update_names_the_metrics_not_updated():
    collection = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=3), "loss": nm.MeanMetric(),
                                      "sum": nm.SumMetric()})
    collection["acc"].update(torch.tensor([0, 1]), torch.tensor([0, 1]))
    with pytest.warns(UserWarning, match=r"MetricCollection.compute: (loss, sum|sum, loss) called before any update"):
        values = collection.compute()
    assert values["acc"].item() == 1.0


def test_a_weight_keyword_goes_only_to_the_metrics_that_take_it():
    # TorchMetrics hands each metric the keywords of its update(): a weighted loss beside accuracy
    collection = nm.MetricCollection({"acc": nm.MulticlassAccuracy(num_classes=4, average="micro"),
                                      "loss": nm.MeanMetric()})
    preds, target = torch.tensor([0, 1, 2, 3, 3]), torch.tensor([0, 1, 2, 2, 1])
    collection.update(preds=preds, target=target, value=torch.tensor(0.7), weight=torch.tensor(5.0))
    collection.update(preds=preds[:2], target=target[:2], value=torch.tensor(0.1), weight=torch.tensor(2.0))
    values = collection.compute()
    assert values["acc"].item() == pytest.approx(5 / 7)
    assert values["loss"].item() == pytest.approx((0.7 * 5 + 0.1 * 2) / 7)
    with pytest.raises(TypeError, match="MulticlassAccuracy.update: a weight was given"):
        nm.MulticlassAccuracy(num_classes=4).update(preds, target, weight=torch.ones(5))


def test_a_weight_keyword_skips_an_unweighted_subclass_updated_apart():
    # helper-51: a subclass with its own compute() is updated on its own, its keywords filtered by
    # its class's signature, which has a weight for every classification class: an unweighted one
    # got it and refused the batch
    class OwnCompute(nm.MulticlassF1Score):
        def compute(self):
            return super().compute()

    preds, target = torch.tensor([0, 1, 2, 3, 3]), torch.tensor([0, 1, 2, 2, 1])
    collection = nm.MetricCollection({"f1": OwnCompute(num_classes=4, average="micro"), "loss": nm.MeanMetric(),
                                      "wf1": OwnCompute(num_classes=4, average="micro", weighted=True)})
    collection.update(preds=preds, target=target, value=torch.full((5,), 0.5), weight=torch.tensor([1.0, 1, 1, 1, 6]))
    values = collection.compute()
    assert values["f1"].item() == pytest.approx(3 / 5) and values["wf1"].item() == pytest.approx(3 / 10)
    assert values["loss"].item() == pytest.approx(0.5)


def test_a_weight_keyword_weights_a_mean_but_not_a_sum():
    # TorchMetrics' SumMetric.update(value) takes no weight, so its collection never hands it one;
    # called directly, ours still takes one
    value, weight = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.0, 1.0, 2.0])
    collection = nm.MetricCollection({"s": nm.SumMetric(), "m": nm.MeanMetric()})
    collection.update(value=value, weight=weight)
    batch = collection(value=value, weight=weight)
    for values in (batch, {k: v / 2 for k, v in collection.compute().items()}):
        assert values["s"].item() == pytest.approx(6.0)
    assert collection.compute()["m"].item() == pytest.approx(8 / 3)
    alone = nm.SumMetric()
    alone.update(value, weight)
    assert alone.compute().item() == pytest.approx(8.0)


def test_a_partial_checkpoint_leaves_an_absent_member_reading_its_group():
    # strict=False without one member's keys: it reads what its group loads, as TorchMetrics' compute
    # groups make it, and its keys are reported missing
    batches = _label_batches(11, 3)
    saved = _confmat_and_precision()
    for p, t in batches:
        saved.update(p, t)
    partial = {k: v for k, v in saved.state_dict().items() if not k.startswith("prec.")}
    resumed = _confmat_and_precision()
    result = resumed.load_state_dict(partial, strict=False)
    assert sorted(result.missing_keys) == sorted(k for k in saved.state_dict() if k.startswith("prec."))
    assert resumed.compute_groups == {0: ["cm", "prec"]}
    confmat, precision = _expected_confmat_and_precision(batches)
    np.testing.assert_array_equal(resumed.compute()["cm"].numpy(), confmat)
    np.testing.assert_allclose(resumed.compute()["prec"].numpy(), precision, rtol=1e-6)


def test_a_key_that_is_not_a_string_is_unexpected_in_a_loose_load():
    c = _confmat_and_precision()
    c.update(*_label_batches(13, 1)[0])
    before = c.state_dict()
    with pytest.raises(ValueError, match="unexpected key '5'"):
        c.load_state_dict({**before, 5: torch.zeros(1)})
    result = c.load_state_dict({**before, 5: torch.zeros(1)}, strict=False)
    assert result.unexpected_keys == [5] and result.missing_keys == []
    assert all(torch.equal(before[k], v) for k, v in c.state_dict().items())


def test_a_member_sharing_a_confusion_matrix_merges_and_loads_alone_in_its_own_layout():
    c = _confmat_and_precision()
    batches = _label_batches(14, 2)
    c.update(*batches[0])
    other = nm.MulticlassPrecision(num_classes=4, average=None)
    other.update(*batches[1])
    c["prec"].merge_state(other)
    _, precision = _expected_confmat_and_precision(batches)
    np.testing.assert_allclose(c["prec"].compute().numpy(), precision, rtol=1e-6)
    assert c.compute_groups == {0: ["cm"], 1: ["prec"]}
    c = _confmat_and_precision()
    c.update(*batches[0])
    c["prec"].load_state_dict(other.state_dict())
    assert torch.equal(c["prec"].compute(), other.compute())
    assert c.compute_groups == {0: ["cm"], 1: ["prec"]}


def test_a_model_with_one_persistent_member_of_a_group_loads_its_checkpoint():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.metrics = _confmat_and_precision()
            self.metrics["prec"].persistent(True)

    batches = _label_batches(12, 2)
    saved = Model()
    for p, t in batches:
        saved.metrics.update(p, t)
    fresh = Model()
    result = fresh.load_state_dict(saved.state_dict())
    assert not result.missing_keys and not result.unexpected_keys
    _, precision = _expected_confmat_and_precision(batches)
    np.testing.assert_allclose(fresh.metrics["prec"].compute().numpy(), precision, rtol=1e-6)


def test_a_model_loading_weighted_counts_keeps_a_confusion_matrix_group():
    # a weighted tn derived from the matrix differs from the one counted directly in its last bits
    class Model(torch.nn.Module):
        def __init__(self, compute_groups=True):
            super().__init__()
            self.metrics = nm.MetricCollection(
                {"cm": nm.MulticlassConfusionMatrix(num_classes=3, weighted=True),
                 "prec": nm.MulticlassPrecision(num_classes=3, average=None, weighted=True)},
                compute_groups=compute_groups)
            self.metrics.persistent(True)

    g = torch.Generator().manual_seed(4)
    preds, target = torch.randint(0, 3, (64,), generator=g), torch.randint(0, 3, (64,), generator=g)
    weight = (torch.rand(64, generator=g, dtype=torch.float64) * 6).exp()
    saved = Model(compute_groups=False)
    saved.metrics.update(preds, target, weight)
    fresh = Model()
    fresh.load_state_dict(saved.state_dict())
    assert fresh.metrics.compute_groups == {0: ["cm", "prec"]}
    torch.testing.assert_close(fresh.metrics.compute()["prec"], saved.metrics.compute()["prec"])


def test_a_flag_left_by_a_parent_load_that_raised_never_skips_a_later_load():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.metrics = _confmat_and_precision()
            self.metrics.persistent(True)

    saved = Model()
    for p, t in _label_batches(13, 2):
        saved.metrics.update(p, t)
    fresh = Model()
    fresh.metrics["prec"]._loaded_by_its_collection = torch.zeros(())  # as a load that raised midway leaves it
    checkpoint = saved.state_dict()
    checkpoint["metrics.cm.confmat"] = torch.zeros(5, 5, dtype=torch.long)  # the collection's load fails
    with pytest.raises(RuntimeError, match="While loading metrics.cm"):
        fresh.load_state_dict(checkpoint)  # then each metric loads its own part, and reports
    assert fresh.metrics["prec"].update_count == 2
    np.testing.assert_allclose(fresh.metrics["prec"].compute().numpy(), saved.metrics["prec"].compute().numpy())


def test_metrics_absent_from_a_partial_checkpoint_read_the_one_present_whatever_its_place():
    def make():
        return nm.MetricCollection({"a": nm.MulticlassAccuracy(num_classes=4, average=None),
                                    "b": nm.MulticlassPrecision(num_classes=4, average=None),
                                    "c": nm.MulticlassRecall(num_classes=4, average=None)})
    batches = _label_batches(14, 2)
    saved = make()
    for p, t in batches:
        saved.update(p, t)
    for present in ("a", "b", "c"):
        fresh = make()
        fresh.load_state_dict({k: v for k, v in saved.state_dict().items() if k.startswith(present + ".")},
                              strict=False)
        assert fresh.compute_groups == {0: ["a", "b", "c"]}, present
        for name, value in saved.compute().items():
            torch.testing.assert_close(fresh.compute()[name], value)


class _Doubled(nm.SumMetric):
    def update(self, value):
        super().update(value * 2)


def test_a_subclass_under_two_names_is_updated_once_and_copies_as_one_metric():
    doubled = _Doubled()
    collection = nm.MetricCollection({"a": doubled, "b": doubled})
    collection.update(torch.tensor([1.0]))
    collection(torch.tensor([2.0]))
    assert collection.compute() == {"a": 6.0, "b": 6.0} and doubled.update_count == 2
    for copied in (copy.deepcopy(collection), pickled(collection)):
        assert copied["a"] is copied["b"] and copied.compute() == {"a": 6.0, "b": 6.0}
        copied.update(torch.tensor([1.0]))
        assert copied.compute()["b"].item() == 8.0 and collection.compute()["b"].item() == 6.0
