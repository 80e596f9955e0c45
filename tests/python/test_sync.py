"""count_syncs: zero around every update, agreement with torch.profiler, strict mode, host reads,
reuse of one counter, all threads."""

import itertools
import operator
import threading

import numpy
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import nosync_metrics as nm

SYNC_OPS = {name for name, _ in nm.sync_class_ops()}


def _classification_configs():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(16, 5, generator=g)
    target = torch.randint(0, 5, (16,), generator=g)
    binary = torch.randn(32, generator=g)
    binary_target = torch.randint(0, 2, (32,), generator=g)
    ml = torch.rand(8, 4, generator=g)
    ml_target = torch.randint(0, 2, (8, 4), generator=g)
    weights16, weights32, weights8 = torch.rand(16), torch.rand(32), torch.rand(8)
    for cls_name, options in itertools.product(
            ["Accuracy", "Precision", "Recall", "F1Score", "StatScores", "ConfusionMatrix"],
            [dict(), dict(ignore_index=1), dict(weighted=True), dict(validate_args=False)]):
        weighted = options.get("weighted", False)
        mc_opts = dict(options, num_classes=5)
        for extra, preds in [(dict(), scores), (dict(), scores.argmax(1))] + (
                [(dict(top_k=2), scores)] if cls_name != "ConfusionMatrix" else []):
            yield (getattr(nm, "Multiclass" + cls_name)(**mc_opts, **extra), preds, target,
                   weights16 if weighted else None)
        yield getattr(nm, "Binary" + cls_name)(**options), binary, binary_target, weights32 if weighted else None
        yield (getattr(nm, "Multilabel" + cls_name)(num_labels=4, **options), ml, ml_target,
               weights8 if weighted else None)


@pytest.mark.parametrize("case", list(_classification_configs()), ids=lambda c: repr(c[0]))
def test_every_classification_update_counts_zero(case):
    metric, preds, target, weight = case
    bad = target.clone()
    bad[0] = 3 if target.dim() == 1 and preds.dim() == 1 and preds.dtype != torch.long else 7
    with nm.count_syncs() as syncs:
        metric.update(preds, target, weight)
        metric.update(preds, bad, weight)  # bad input is counted on the device, not read back
    assert syncs.total == 0, syncs.by_op


@pytest.mark.parametrize("cls", [nm.MeanMetric, nm.SumMetric, nm.MinMetric, nm.MaxMetric])
@pytest.mark.parametrize("strategy", ["error", "warn", "ignore", "disable", 0.5])
def test_every_aggregator_update_counts_zero(cls, strategy):
    metric = cls(nan_strategy=strategy)
    values = [torch.rand(()), torch.randn(64), torch.tensor([1.0, float("nan")]), 2.5, 3,
              torch.randn(8, 8).t(), torch.randn(16).to(torch.bfloat16)]
    weighted = cls in (nm.MeanMetric, nm.SumMetric)
    with nm.count_syncs() as syncs:
        for v in values:
            metric.update(v, 0.5) if weighted else metric.update(v)
        if weighted:
            metric.update(torch.randn(4, 3), torch.rand(3))
    assert syncs.total == 0, syncs.by_op


def test_collection_update_counts_zero():
    collection = nm.MetricCollection([nm.MulticlassAccuracy(num_classes=10), nm.MulticlassF1Score(num_classes=10),
                                      nm.MulticlassConfusionMatrix(num_classes=10)])
    with nm.count_syncs() as syncs:
        collection.update(torch.randn(32, 10), torch.randint(0, 10, (32,)))
    assert syncs.total == 0


def _sync_heavy_block():
    """Sync-class ops that do not call one another, so every call is an outermost one."""
    x = torch.randn(32)
    torch.ops.aten._local_scalar_dense(x.sum())  # a value read back
    x[x > 0]                                     # nonzero
    torch.unique(torch.arange(10) % 3)           # _unique2
    torch.bincount(torch.arange(6))              # bincount
    torch.tensor(1.5)                            # lift_fresh
    torch.scalar_tensor(2.0)                     # scalar_tensor
    torch.equal(x, x)                            # equal
    nm.MeanMetric().update(x)                    # ours: none
    nm.MulticlassF1Score(num_classes=4).update(torch.randn(8, 4), torch.randint(0, 4, (8,)))


# Ops that are sync-class only with certain arguments (copy_ between devices, repeat_interleave
# without output_size, histc with min == max): the profiler records no devices, and the block
# above makes none of them in a syncing form.
CONDITIONAL = {"aten::copy_", "aten::repeat_interleave", "aten::histc"}


def test_agrees_with_an_independent_torch_profiler_count():
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with nm.count_syncs() as syncs:
            _sync_heavy_block()
    expected = {}
    for event in prof.events():
        if event.name in SYNC_OPS and event.name not in CONDITIONAL:
            expected[event.name] = expected.get(event.name, 0) + 1
    assert syncs.by_op == expected
    assert syncs.total == 7


def test_an_op_inside_another_counts_once_under_the_outer_name():
    x = torch.randn(4)
    with nm.count_syncs() as syncs:
        float(x.sum())  # item, which calls _local_scalar_dense
        if x.sum() > 0:  # is_nonzero, which calls item
            pass
        torch.allclose(x, x)  # allclose, which calls item
    assert syncs.by_op == {"aten::item": 1, "aten::is_nonzero": 1, "aten::allclose": 1}


def test_strict_raises_at_the_first_sync_op():
    x = torch.randn(4)
    with pytest.raises(RuntimeError, match="aten::item is a sync-class op, outside any metric call"):
        with nm.count_syncs(strict=True):
            y = x * 2           # runs
            y.sum().item()      # raises here
            pytest.fail("the line after the sync op ran")
    assert x.sum().item() == pytest.approx(float(x.sum()))  # strict mode ended with the block


def test_strict_lets_metric_updates_run():
    metric = nm.MulticlassF1Score(num_classes=4)
    with nm.count_syncs(strict=True) as syncs:
        metric.update(torch.randn(8, 4), torch.randint(0, 4, (8,)))
    assert syncs.total == 0 and metric.update_count == 1


def test_decorator_adds_up_and_counters_nest():
    counter = nm.count_syncs()

    @counter
    def step():
        torch.ones(()).item()

    step()
    step()
    assert counter.total == 2 and counter.by_op == {"aten::item": 2}
    with nm.count_syncs() as outer:
        with nm.count_syncs() as inner:
            torch.ones(()).item()
        torch.ones(()).item()
    assert inner.total == 1 and outer.total == 2


def test_lists_its_ops():
    assert {"aten::item", "aten::nonzero", "aten::bincount", "aten::_unique2", "aten::lift_fresh",
            "aten::scalar_tensor", "aten::copy_"} <= SYNC_OPS
    assert {"Tensor.tolist", "Tensor.numpy", "Tensor.__array__", "Tensor.cpu", "Tensor.to"} <= SYNC_OPS


# Reads that dispatch no sync-class op on the CPU and would sync on an accelerator.
HOST_READS = [
    ("Tensor.tolist", lambda t: t.tolist()),
    ("Tensor.numpy", lambda t: t.numpy()),
    ("Tensor.__array__", numpy.asarray),  # through numpy(): counted once, as the outer read
    ("Tensor.cpu", lambda t: t.cpu()),
    ("Tensor.to", lambda t: t.to("cpu")),
    ("Tensor.to", lambda t: t.to(device=torch.device("cpu"), dtype=torch.float64)),
    ("Tensor.to", lambda t: t.to(torch.zeros(1))),
    ("Tensor.to", lambda t: t.to("cpu", copy=True)),
    ("Tensor.to", lambda t: t.to("cpu", torch.float64, False, True)),  # copy=True, positional
]
HOST_READ_METHODS = ["tolist", "numpy", "__array__", "cpu", "to"]


@pytest.mark.parametrize("name, read", HOST_READS, ids=lambda v: v if isinstance(v, str) else "")
def test_counts_each_host_read_once_by_name(name, read):
    t = torch.arange(3.0)
    with nm.count_syncs() as syncs:
        read(t)
        read(t)
    assert syncs.by_op == {name: 2}


def test_to_without_the_host_is_no_host_read():
    t = torch.arange(3.0)
    with nm.count_syncs() as syncs:
        t.to(torch.float64)
        t.to(dtype=torch.int32, copy=True)
        t.to(torch.int32, False, True)
        t.to("meta")  # another device: the copy is the op that counts
    assert syncs.by_op == {"aten::copy_": 1}


def test_scalar_conversions_count_as_the_ops_they_dispatch():
    s, i = torch.tensor(2.0), torch.tensor(1)
    with nm.count_syncs() as syncs:
        float(s), int(s), complex(s), operator.index(i)
        bool(s)
    assert syncs.by_op == {"aten::item": 4, "aten::is_nonzero": 1}


def test_host_reads_are_wrapped_only_while_a_counter_is_open():
    originals = {name: getattr(torch.Tensor, name) for name in HOST_READ_METHODS}
    t = torch.arange(3.0)
    with nm.count_syncs() as syncs:
        assert torch.Tensor.tolist is not originals["tolist"]
        t.tolist()
    t.tolist(), t.cpu(), numpy.asarray(t)
    assert syncs.total == 1
    assert {name: getattr(torch.Tensor, name) for name in HOST_READ_METHODS} == originals
    assert all(getattr(torch.Tensor, name) is original for name, original in originals.items())


def test_host_reads_stay_wrapped_until_the_last_counter_closes():
    original = torch.Tensor.tolist
    opened, close = threading.Event(), threading.Event()

    def other_thread():
        with nm.count_syncs():
            opened.set()
            close.wait()

    thread = threading.Thread(target=other_thread)
    thread.start()
    opened.wait()
    with nm.count_syncs() as syncs:
        torch.arange(2).tolist()
    assert torch.Tensor.tolist is not original  # the other thread's counter is still open
    close.set()
    thread.join()
    assert torch.Tensor.tolist is original and syncs.by_op == {"Tensor.tolist": 1}


def test_a_host_read_of_a_thread_without_a_counter_is_not_counted():
    with nm.count_syncs() as syncs:
        _in_another_thread(lambda: torch.arange(2).tolist())
    assert syncs.total == 0


def test_strict_raises_at_a_host_read_naming_it():
    with pytest.raises(RuntimeError, match=r"Tensor.tolist reads tensor data on the host, a sync on an "
                                           r"accelerator, outside any metric call"):
        with nm.count_syncs(strict=True) as syncs:
            torch.arange(3).tolist()
    assert syncs.by_op == {"Tensor.tolist": 1}


def test_the_read_back_of_compute_is_a_host_read_on_the_cpu_too():
    """compute() reads the update count and the tally back in one copy per state: on the CPU it
    dispatches nothing, on an accelerator it waits; counted on every device, so a strict block that
    passes on the CPU passes on a GPU."""
    collection = nm.MetricCollection({"loss": nm.MeanMetric(), "acc": nm.MulticlassAccuracy(num_classes=3),
                                      "f1": nm.MulticlassF1Score(num_classes=3)})
    collection.update(value=torch.ones(2), preds=torch.tensor([0, 2]), target=torch.tensor([0, 1]))
    with nm.count_syncs() as syncs:
        collection.compute()
    assert syncs.by_op == {"Tensor.cpu": 2}  # the loss's state, and the one acc and f1 share
    with pytest.raises(RuntimeError, match=r"Tensor.cpu reads tensor data on the host, a sync on an accelerator, "
                                           r"inside metrics::.*compute"):
        with nm.count_syncs(strict=True):
            collection.compute()


def test_the_reads_of_a_load_are_host_reads_on_the_cpu_too():
    """load_state_dict reads the version (item()), the description, the counts it checks and the
    tally (one read: update count, bad-input counts and first bad update) on the host."""
    metric = nm.MeanMetric()
    metric.update(torch.ones(3))
    saved = metric.state_dict()
    with nm.count_syncs() as syncs:
        metric.load_state_dict(saved)
    assert syncs.by_op == {"Tensor.cpu": 5, "aten::item": 1}
    collection = nm.MetricCollection({"loss": metric})
    for loaded in (metric, collection):  # the innermost call: the metric's
        with pytest.raises(RuntimeError, match="aten::item is a sync-class op, inside metrics::Mean::load_state_dict$"):
            with nm.count_syncs(strict=True):
                loaded.load_state_dict(loaded.state_dict())


def test_one_counter_entered_inside_itself_counts_once():
    counter = nm.count_syncs()
    with counter:
        with counter:
            torch.ones(()).item()
        torch.ones(()).item()  # still open
    torch.ones(()).item()
    assert counter.by_op == {"aten::item": 2}

    @counter
    def countdown(n):
        torch.ones(()).item()
        if n:
            countdown(n - 1)

    countdown(2)
    assert counter.total == 5


def test_one_counter_counts_each_thread_it_is_open_on():
    counter = nm.count_syncs()
    both_open = threading.Barrier(2)

    @counter
    def work():
        both_open.wait()
        torch.ones(()).item()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter.by_op == {"aten::item": 2}


def _in_another_thread(fn):
    thread = threading.Thread(target=fn)
    thread.start()
    thread.join()


def _item_and_tolist():
    torch.ones(()).item()
    torch.arange(2).tolist()


def test_all_threads_counts_the_ops_and_reads_of_other_threads():
    with nm.count_syncs(all_threads=True) as everywhere, nm.count_syncs() as here:
        _in_another_thread(_item_and_tolist)
        torch.ones(()).item()
    assert here.by_op == {"aten::item": 1}
    assert everywhere.by_op == {"aten::item": 2, "Tensor.tolist": 1}
    _in_another_thread(_item_and_tolist)  # closed: its observer is gone
    assert everywhere.total == 3


def test_all_threads_entered_from_two_threads_counts_each_op_once():
    everywhere = nm.count_syncs(all_threads=True)
    with everywhere:
        _in_another_thread(everywhere(_item_and_tolist))
    assert everywhere.by_op == {"aten::item": 1, "Tensor.tolist": 1}


def test_all_threads_refuses_strict():
    original = torch.Tensor.tolist
    with pytest.raises(ValueError, match="strict and all_threads cannot be combined"):
        with nm.count_syncs(strict=True, all_threads=True):
            pass
    assert torch.Tensor.tolist is original
