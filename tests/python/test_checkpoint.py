"""Checkpoints: torch.save of state_dict() resumes exactly; the wrong metric or a damaged file is refused."""

import re

import pytest
import torch

import nosync_metrics as nm
from nosync_metrics import _C


def _batches(n=6):
    g = torch.Generator().manual_seed(5)
    return [(torch.randn(12, 4, generator=g), torch.randint(0, 4, (12,), generator=g),
             torch.rand(12, generator=g, dtype=torch.float64)) for _ in range(n)]


def _collection():
    return nm.MetricCollection({"loss": nm.MeanMetric(), "acc": nm.MulticlassAccuracy(num_classes=4),
                                "cm": nm.MulticlassConfusionMatrix(num_classes=4)})


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_resuming_from_torch_save_equals_an_uninterrupted_run(tmp_path):
    batches = _batches()
    uninterrupted, first = _collection(), _collection()
    for preds, target, loss in batches:
        uninterrupted.update(value=loss, preds=preds, target=target)
    for preds, target, loss in batches[:3]:
        first.update(value=loss, preds=preds, target=target)
    torch.save(first.state_dict(), tmp_path / "ckpt.pt")
    resumed = _collection()
    resumed.load_state_dict(torch.load(tmp_path / "ckpt.pt"))
    for preds, target, loss in batches[3:]:
        resumed.update(value=loss, preds=preds, target=target)
    assert _same(resumed.state_dict(), uninterrupted.state_dict())
    for key, value in uninterrupted.compute().items():
        assert torch.equal(resumed.compute()[key], value)


def test_state_dicts_record_the_format_version_and_the_metric():
    state = nm.MulticlassAccuracy(num_classes=4).state_dict()
    assert state["_version"].item() == 5
    text = bytes(state["_metric"].tolist()).decode()
    assert text.startswith("MulticlassAccuracy(num_classes=4, top_k=1, average=macro")


def test_another_metric_or_other_options_are_refused_and_change_nothing(tmp_path):
    acc = nm.MulticlassAccuracy(num_classes=4)
    preds, target, _ = _batches(1)[0]
    acc.update(preds, target)
    torch.save(acc.state_dict(), tmp_path / "acc.pt")
    for other, difference in [(nm.MulticlassPrecision(num_classes=4), "MulticlassPrecision"),
                              (nm.MulticlassAccuracy(num_classes=4, average="micro"), "average=micro"),
                              (nm.MulticlassAccuracy(num_classes=4, top_k=2), "top_k=2")]:
        other.update(preds, target)
        before = other.state_dict()
        with pytest.raises(ValueError, match="the state is of another metric"):
            other.load_state_dict(torch.load(tmp_path / "acc.pt"))
        with pytest.raises(ValueError, match=difference):
            _C.load_checkpoint(other, str(tmp_path / "acc.pt"))
        assert _same(other.state_dict(), before)


@pytest.mark.parametrize("make", [lambda: nm.MulticlassAccuracy(num_classes=4), _collection])
def test_a_refused_dict_raises_what_nn_module_raises_and_changes_nothing(make):
    """A missing or unexpected key is a StateDictError: a RuntimeError, as torch.nn.Module's
    load_state_dict raises (and TorchMetrics' with it), and a ValueError, as before. load_state_dict()
    returns nn.Module's type. (state_dict() stays a plain dict: LibTorch's pickle reader, which
    load_checkpoint uses, cannot read the OrderedDict nn.Module gives.)"""
    preds, target, loss = _batches(1)[0]
    metric = make()
    metric.update(preds=preds, target=target, **({"value": loss} if isinstance(metric, nm.MetricCollection) else {}))
    saved = metric.state_dict()
    assert type(saved) is dict
    counts = next(key for key in saved if key.endswith("tp"))
    for bad in [{**saved, "foo": torch.zeros(1)}, {k: v for k, v in saved.items() if k != counts}]:
        with pytest.raises(RuntimeError, match="load_state_dict: (unexpected key 'foo'|missing key)") as caught:
            make().load_state_dict(bad)
        assert isinstance(caught.value, ValueError) and type(caught.value) is nm.StateDictError
    with pytest.raises(nm.StateDictError, match="missing key|holds no key"):
        metric.load_state_dict({})
    assert _same(metric.state_dict(), saved)
    fresh = make()
    matched = fresh.load_state_dict(saved)
    assert type(matched) is torch.nn.modules.module._IncompatibleKeys and matched == ([], [])
    assert _same(fresh.state_dict(), saved)
    partial = make().load_state_dict({counts: saved[counts], "foo": torch.zeros(1)}, strict=False)
    assert type(partial) is torch.nn.modules.module._IncompatibleKeys
    assert partial.missing_keys == [key for key in saved if key != counts] and partial.unexpected_keys == ["foo"]


@pytest.mark.parametrize("make, who", [(lambda: nm.MulticlassAccuracy(num_classes=4), "MulticlassAccuracy"),
                                       (_collection, r"the part of '\w+' .*: \w+"), (nm.MeanMetric, "Mean")])
def test_a_sparse_tensor_in_a_dict_is_refused_by_name_and_changes_nothing(make, who):
    """A sparse tensor holds no strided values to check or copy: it was a bare RuntimeError from deep
    in the load ("Cannot access data pointer"), naming neither metric nor key."""
    preds, target, loss = _batches(1)[0]
    metric = make()
    if isinstance(metric, nm.MeanMetric):
        metric.update(loss)
    else:
        extra = {"value": loss} if isinstance(metric, nm.MetricCollection) else {}
        metric.update(preds=preds, target=target, **extra)
    saved = metric.state_dict()
    counts = [k for k, v in saved.items() if v.dim() > 0 and not nm.metric.is_description(k)][-1]
    for key in [k for k in saved if nm.metric.is_description(k)] + [counts]:
        bad = {**saved, key: saved[key].to_sparse()}
        state = key.rsplit(".", 1)[-1]
        with pytest.raises(nm.StateDictError, match=rf"{who}\.load_state_dict: '{state}' has layout Sparse; expected a"):
            metric.load_state_dict(bad)
        if not isinstance(metric, nm.MetricCollection):
            with pytest.raises(ValueError, match=f"'{state}' has layout Sparse; expected a dense tensor"):
                metric.merge_state(bad)
        assert _same(metric.state_dict(), saved)


@pytest.mark.parametrize("make", [lambda: nm.MulticlassAccuracy(num_classes=4), _collection])
@pytest.mark.parametrize("description", ["_metric", "_version"])
def test_a_strict_load_needs_the_descriptions_as_a_parent_modules_does(make, description):
    """A strict load names a missing "_metric" or "_version" (which say what the state is of, so
    that a state of other options is refused) and changes nothing, as a parent module's strict load
    of the metric does; strict=False loads the rest and reports the key missing."""
    preds, target, loss = _batches(1)[0]
    metric = make()
    metric.update(preds=preds, target=target, **({"value": loss} if isinstance(metric, nm.MetricCollection) else {}))
    saved = metric.state_dict()
    key = next(k for k in saved if k.endswith(description))
    without = {k: v for k, v in saved.items() if k != key}
    fresh = make()
    before = fresh.state_dict()
    with pytest.raises(nm.StateDictError, match=f"load_state_dict: missing key '{re.escape(key)}'"):
        fresh.load_state_dict(without)
    assert _same(fresh.state_dict(), before)
    parent = torch.nn.Module()
    parent.metric = make()
    parent.metric.persistent(True)
    with pytest.raises(RuntimeError, match=f'Missing key\\(s\\) in state_dict: "metric.{re.escape(key)}"'):
        parent.load_state_dict({"metric." + k: v for k, v in without.items()})
    assert fresh.load_state_dict(without, strict=False) == ([key], [])
    assert _same(fresh.state_dict(), saved)
    # another missing key, or a metric's whole part, is named by the load, as without the check
    counts = next(k for k in saved if k.endswith("tp"))
    with pytest.raises(nm.StateDictError, match=f"missing key '{re.escape(counts[counts.find('.') + 1:])}'"):
        make().load_state_dict({k: v for k, v in without.items() if k != counts})
    if isinstance(metric, nm.MetricCollection):
        name = counts.split(".")[0]
        with pytest.raises(nm.StateDictError, match=f"holds no key of metric '{name}'"):
            make().load_state_dict({k: v for k, v in saved.items() if not k.startswith(name + ".")})


def test_damaged_files_are_refused_and_change_nothing(tmp_path):
    acc = nm.MulticlassAccuracy(num_classes=4)
    path = tmp_path / "acc.pt"
    _C.save_checkpoint(acc, str(path))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    before = acc.state_dict()
    with pytest.raises(ValueError, match="MulticlassAccuracy.load_checkpoint: .* is not a readable checkpoint"):
        _C.load_checkpoint(acc, str(path))
    with pytest.raises(Exception):
        torch.load(path)
    assert _same(acc.state_dict(), before)


def test_cpp_and_python_checkpoints_are_one_format(tmp_path):
    acc = nm.MulticlassAccuracy(num_classes=4)
    preds, target, _ = _batches(1)[0]
    acc.update(preds, target)
    _C.save_checkpoint(acc, str(tmp_path / "from_cpp.pt"))
    from_cpp = nm.MulticlassAccuracy(num_classes=4)
    # torch 2.6+ loads weights-only by default, which refuses the type tags of torch's C++ pickler.
    from_cpp.load_state_dict(torch.load(tmp_path / "from_cpp.pt", weights_only=False))
    torch.save(acc.state_dict(), tmp_path / "from_python.pt")
    from_python = nm.MulticlassAccuracy(num_classes=4)
    _C.load_checkpoint(from_python, str(tmp_path / "from_python.pt"))
    assert _same(from_cpp.state_dict(), acc.state_dict()) and _same(from_python.state_dict(), acc.state_dict())


def _refused(metric, state, message):
    before = metric.state_dict()
    with pytest.raises(ValueError, match=message):
        metric.load_state_dict(state)
    assert _same(metric.state_dict(), before)


def test_weighted_counts_below_0_are_refused_and_change_nothing():
    preds, target, weight = _batches(1)[0]
    for make in (lambda: nm.MulticlassPrecision(num_classes=4, weighted=True),
                 lambda: nm.MulticlassConfusionMatrix(num_classes=4, weighted=True),
                 lambda: nm.BinaryRecall(weighted=True)):
        source, metric = make(), make()
        binary = isinstance(source, nm.BinaryRecall)
        args = (preds[:, 0].sigmoid(), (target > 1).long(), weight) if binary else (preds, target, weight)
        source.update(*args)
        metric.update(*args)
        for name in [k for k in source.state_dict() if k in ("tp", "fp", "fn", "confmat") or (binary and k == "tn")]:
            for bad, shown in [(-5.0, "-5"), (-1e-300, "-1e-300")]:
                state = source.state_dict()
                state[name] = state[name].clone().view(-1).index_fill(0, torch.tensor([0]), bad).view_as(state[name])
                _refused(metric, state, f"'{name}' holds {shown}; a sum of weights is not below 0")


def test_weighted_counts_an_overflow_left_load_and_compute_reports_it():
    # weights at float64's maximum: tp overflows to inf and tn, the kept weight less each class's, to
    # inf - inf = NaN for class 0 and inf for class 1 (on both paths); a collection whose
    # ConfusionMatrix shares the state derives fp the same way
    preds, target, weight = torch.zeros(2, 2), torch.zeros(2, dtype=torch.long), torch.full((2,), 1e308, dtype=torch.float64)
    stats = nm.MulticlassStatScores(num_classes=2, average=None, weighted=True)
    stats.update(preds, target, weight)
    state = stats.state_dict()
    assert state["tp"][0] == float("inf") and state["tn"][0].isnan() and state["tn"][1] == float("inf")
    on_aten = nm.MulticlassStatScores(num_classes=2, average=None, weighted=True)
    on_aten.update(torch._neg_view(-preds), target, weight)  # negative-bit scores: the ATen path on the CPU
    assert on_aten.state_dict()["tn"].isnan().tolist() == [True, False]
    loaded = nm.MulticlassStatScores(num_classes=2, average=None, weighted=True)
    loaded.load_state_dict(state)
    assert all(torch.equal(a, b) or (a.isnan() == b.isnan()).all() for a, b in zip(loaded.state_dict().values(), state.values()))
    with pytest.raises(ValueError, match="overflowed float64"):
        loaded.compute()
    both = nm.MetricCollection({"cm": nm.MulticlassConfusionMatrix(num_classes=2, weighted=True),
                                "precision": nm.MulticlassPrecision(num_classes=2, weighted=True)})
    both.update(preds, target, weight)
    assert both.state_dict()["precision.tp"][0] == float("inf")  # (fp = column sum - diagonal = NaN)


def test_a_weighted_multiclass_tn_a_rounding_below_0_loads():
    # class 0 in every row: its tn is the kept weight less each row's, two float64 sums in two orders
    g = torch.Generator().manual_seed(0)
    source = nm.MulticlassStatScores(num_classes=3, average=None, weighted=True)
    preds, target = torch.randn(20, 3, generator=g), torch.randint(0, 3, (20,), generator=g)
    target[torch.rand(20, generator=g) < 0.5] = 0
    preds[target != 0, 0] = 10.0
    source.update(preds, target, weight=torch.rand(20, generator=g, dtype=torch.float64) * 10)
    state = source.state_dict()
    assert -1e-12 < state["tn"][0] < 0  # what the two sums leave of 0
    loaded = nm.MulticlassStatScores(num_classes=3, average=None, weighted=True)
    loaded.load_state_dict(state)
    assert _same(loaded.state_dict(), state)
    state["tn"] = state["tn"].clone().index_fill(0, torch.tensor([0]), float("nan"))
    state["tn"] = state["tn"].clone().index_fill(0, torch.tensor([0]), -5.0)
    loaded.load_state_dict(state)  # (signed: not checked for a sign)


def test_a_tally_that_updates_cannot_leave_is_refused_and_changes_nothing():
    mean = nm.MeanMetric()
    mean.update(torch.tensor([1.0, float("nan"), 3.0]), torch.tensor([1.0, 1.0, float("inf")]))
    mean.update(torch.tensor([2.0]))
    good = mean.state_dict()
    assert good["bad_input_counts"].tolist() == [1, 2, 1] and good["first_bad_update"].item() == 0

    def edited(**entries):
        state = dict(good)
        state.update({k: torch.tensor(v, dtype=good[k].dtype).view_as(good[k]) for k, v in entries.items()})
        return state

    m = nm.MeanMetric()
    m.update(torch.tensor([3.0]))
    _refused(m, edited(bad_input_counts=[2, 1, 1]), "'bad_input_counts' holds 2 then 1: its counts are cumulative")
    _refused(m, edited(bad_input_counts=[1, 2, 3]), "counts 3 updates with bad input, more than the 2 of 'update_count'")
    _refused(m, edited(first_bad_update=[2]), "'first_bad_update' names update 2, but 'update_count' is 2")
    _refused(m, edited(bad_input_counts=[0, 0, 0]), "counts no update with bad input, but 'first_bad_update' names update 0")
    clean = edited(bad_input_counts=[0, 0, 0], first_bad_update=[2**62])  # (2^62: none)
    m.load_state_dict(clean)
    assert _same(m.state_dict(), clean)


def test_a_partial_dict_is_checked_with_the_metrics_own_tally():
    m = nm.MeanMetric()
    for i in range(8):
        m.update(torch.tensor([float("nan") if i == 7 else 1.0]))
    before = m.state_dict()
    with pytest.raises(ValueError, match="'first_bad_update' names update 7, but 'update_count' is 5"):
        m.load_state_dict({"update_count": torch.tensor(5.0, dtype=torch.float64)}, strict=False)
    assert _same(m.state_dict(), before)
    m.load_state_dict({"update_count": torch.tensor(9.0, dtype=torch.float64)}, strict=False)
    assert m.state_dict()["update_count"].item() == 9 and m.state_dict()["first_bad_update"].item() == 7
