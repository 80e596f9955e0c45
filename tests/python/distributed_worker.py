"""One rank of a gloo job on 127.0.0.1, started by test_distributed.py:
python distributed_worker.py SCENARIO RANK WORLD INIT_FILE OUT_FILE. Writes its results with torch.save."""

import copy
import gc
import os
import sys
import warnings
import weakref

import torch
import torch.distributed as dist

import nosync_metrics as nm
from round_trips import pickled

BATCHES = 7
CLASSES = 5


def batch(i):
    """Batch i of the global stream: sizes differ, so ranks hold uneven amounts of data."""
    g = torch.Generator().manual_seed(100 + i)
    n = 3 + 4 * i
    return {"value": torch.randn(n, generator=g, dtype=torch.float64),
            "preds": torch.randn(n, CLASSES, generator=g),
            "target": torch.randint(0, CLASSES, (n,), generator=g),
            "binary_preds": torch.rand(n, generator=g),
            "binary_target": torch.randint(0, 2, (n,), generator=g),
            "multilabel_preds": torch.rand(n, 3, generator=g),
            "multilabel_target": torch.randint(0, 2, (n, 3), generator=g),
            "sample_preds": torch.randn(n, CLASSES, 4, generator=g),
            "sample_target": torch.randint(0, CLASSES, (n, 4), generator=g)}


def mine(rank, world):
    """Rank r takes batches i with i % world == r, except the last rank of three, which takes none."""
    if world == 3 and rank == 2:
        return []
    takers = world - 1 if world == 3 else world
    return [i for i in range(BATCHES) if i % takers == rank]


def metrics():
    """Every metric kind, each with the arguments it takes from a batch."""
    return {
        "mean": (nm.MeanMetric(), ["value"]),
        "sum": (nm.SumMetric(), ["value"]),
        "min": (nm.MinMetric(), ["value"]),
        "max": (nm.MaxMetric(), ["value"]),
        "accuracy": (nm.MulticlassAccuracy(num_classes=CLASSES), ["preds", "target"]),
        "precision": (nm.MulticlassPrecision(num_classes=CLASSES, average="micro"), ["preds", "target"]),
        "recall": (nm.MulticlassRecall(num_classes=CLASSES, top_k=2), ["preds", "target"]),
        "f1": (nm.MulticlassF1Score(num_classes=CLASSES, average=None), ["preds", "target"]),
        "fbeta": (nm.MulticlassFBetaScore(0.5, num_classes=CLASSES), ["preds", "target"]),
        "stat_scores": (nm.MulticlassStatScores(num_classes=CLASSES), ["preds", "target"]),
        "confmat": (nm.MulticlassConfusionMatrix(num_classes=CLASSES), ["preds", "target"]),
        "binary_accuracy": (nm.BinaryAccuracy(), ["binary_preds", "binary_target"]),
        "multilabel_f1": (nm.MultilabelF1Score(num_labels=3), ["multilabel_preds", "multilabel_target"]),
        # rows per sample, gathered in rank order
        "samplewise_f1": (nm.MulticlassF1Score(num_classes=CLASSES, multidim_average="samplewise"),
                          ["sample_preds", "sample_target"]),
    }


def collection():
    return nm.MetricCollection({"loss": nm.MeanMetric(), "accuracy": nm.MulticlassAccuracy(num_classes=CLASSES),
                                "precision": nm.MulticlassPrecision(num_classes=CLASSES),
                                "recall": nm.MulticlassRecall(num_classes=CLASSES),
                                "f1": nm.MulticlassF1Score(num_classes=CLASSES)})


def feed_collection(c, b):
    c.update(value=b["value"], preds=b["preds"], target=b["target"])


def every_metric(rank, world):
    ms, c = metrics(), collection()
    for i in mine(rank, world):
        b = batch(i)
        for metric, keys in ms.values():
            metric.update(*[b[k] for k in keys])
        feed_collection(c, b)
    local_counts = {name: m.update_count for name, (m, _) in ms.items()}
    out = {name: m.compute() for name, (m, _) in ms.items()}
    out.update({"collection/" + k: v for k, v in c.compute().items()})
    # local state is left as it was: local accumulation goes on
    out["local_counts_kept"] = all(m.update_count == local_counts[n] for n, (m, _) in ms.items())
    return out


def watch_collectives(seen):
    """From now on (the worker's process ends after its scenario), dist.all_reduce and
    dist.all_gather call seen(name, positional arguments) first."""
    for name in ("all_reduce", "all_gather"):
        original = getattr(dist, name)

        def watched(*args, _original=original, _name=name, **kwargs):
            seen(_name, args)
            return _original(*args, **kwargs)

        setattr(dist, name, watched)


def counted_collectives(compute):
    """The all-reduces and all-gathers that compute() issues."""
    counts = {"all_reduce": 0, "all_gather": 0}

    def count(name, _):
        counts[name] += 1

    watch_collectives(count)
    compute()
    return counts


def count_collectives(rank, world):
    c = collection()
    for i in mine(rank, world):
        feed_collection(c, batch(i))
    return counted_collectives(c.compute)


def count_samplewise_collectives(rank, world):
    m = nm.MulticlassF1Score(num_classes=CLASSES, multidim_average="samplewise")
    for i in mine(rank, world):
        m.update(batch(i)["sample_preds"], batch(i)["sample_target"])
    return counted_collectives(m.compute)


def collective_tensors_kept(rank, world):
    """How many of the tensors that a sync hands to gloo collectives live on after it, and after
    the next sync: a gloo worker must not be the one to free them (nosync_metrics.distributed says
    why). The first sync gathers rows too (samplewise F1), the next is a collection's."""
    handed = []
    watch_collectives(lambda _, args: handed[-1].extend(
        weakref.ref(t) for a in args for t in (a if isinstance(a, list) else [a])))
    samplewise, c = nm.MulticlassF1Score(num_classes=CLASSES, multidim_average="samplewise"), collection()
    for i in mine(rank, world):
        samplewise.update(batch(i)["sample_preds"], batch(i)["sample_target"])
        feed_collection(c, batch(i))
    alive = []
    for compute in (samplewise.compute, c.compute):
        handed.append([])
        compute()
        gc.collect()
        alive.append([sum(ref() is not None for ref in refs) for refs in handed])
    return {"handed": [len(refs) for refs in handed], "alive": alive}


class DoubledSum(nm.SumMetric):
    def update(self, value):
        super().update(value * 2)


def subclass_sync(rank, world):
    """A subclass with its own update(), alone and in collections: forward gives this rank's batch
    unless dist_sync_on_step, compute() every rank's, sync() reduces once."""
    value = torch.tensor([float(rank + 1)])
    out = {"alone_forward": DoubledSum()(value)}
    c = nm.MetricCollection({"doubled": DoubledSum(), "plain": nm.SumMetric()})
    out["forward"] = c(value)
    out["compute"] = c.compute()
    with c.sync_context():
        out["synced"] = c.compute()
    on_step = {"dist_sync_on_step": True, "sync_on_compute": False}
    step = nm.MetricCollection({"doubled": DoubledSum(**on_step), "plain": nm.SumMetric(**on_step)})
    out["forward_on_step"] = step(value)
    return out


def compute_error(held, error):
    """{"error": the message of the `error` that held.compute() raised, or None}."""
    try:
        held.compute()
    except error as e:
        return {"error": str(e)}
    return {"error": None}


def mismatch(rank, world):
    return compute_error(nm.MulticlassAccuracy(num_classes=CLASSES + rank), ValueError)


def metric_against_collection(rank, world):
    """A metric on rank 0, a collection on the others: a ValueError on every rank, not a backend abort."""
    held = nm.SumMetric() if rank == 0 else nm.MetricCollection({"SumMetric": nm.SumMetric()})
    held.update(torch.tensor([1.0]))
    return compute_error(held, ValueError)


def nan_extremes(rank, world):
    """Min and Max that keep NaN (nan_strategy="disable"), with a NaN on rank 1 only; alone and in a collection."""
    value = torch.tensor([float("nan") if rank == 1 else float(rank)])
    out = {}
    for name in ("MinMetric", "MaxMetric"):
        m = getattr(nm, name)(nan_strategy="disable")
        m.update(value)
        out[name] = m.compute()
    c = nm.MetricCollection({"min": nm.MinMetric(nan_strategy="disable"), "max": nm.MaxMetric(nan_strategy="disable")})
    c.update(value)
    out["collection"] = c.compute()
    return out


def world_group_spelled_twice(rank, world):
    """A collection whose members name the default group as None and as dist.group.WORLD."""
    c = nm.MetricCollection({"a": nm.SumMetric(), "b": nm.SumMetric(process_group=dist.group.WORLD)})
    c.update(float(rank + 1))
    return c.compute()


def sync_api(rank, world):
    out = {}
    m = nm.SumMetric()
    m.update(torch.tensor([float(rank + 1)]))
    with m.sync_context():
        out["inside_total"] = m.state_dict()["total"].clone()
        out["inside_count"] = m.update_count
    out["after_total"] = m.state_dict()["total"].clone()
    m.sync()
    out["synced_total"] = m.state_dict()["total"].clone()
    m.unsync()
    out["unsynced_total"] = m.state_dict()["total"].clone()
    try:
        m.unsync()
    except RuntimeError as e:
        out["double_unsync"] = str(e)
    step = nm.MeanMetric(dist_sync_on_step=True)
    out["step"] = step(torch.tensor([float(rank)], dtype=torch.float64))
    out["step_count"] = step.update_count
    steps = nm.MetricCollection({"mean": nm.MeanMetric(dist_sync_on_step=True),
                                 "max": nm.MaxMetric(dist_sync_on_step=True)})
    out["collection_step"] = steps(torch.tensor([float(rank), 10.0 * rank], dtype=torch.float64))
    out["collection_step_count"] = steps["mean"].update_count
    local = nm.MeanMetric(sync_on_compute=False)
    local.update(float(rank))
    out["unsynced_compute"] = local.compute()
    return out


def subgroup(rank, world):
    group = dist.new_group([0, 1])  # every rank takes part in making it
    if rank == 2:
        return {}
    m = nm.SumMetric(process_group=group)
    m.update(float(rank + 1))
    c = nm.MetricCollection({"sum": nm.SumMetric(process_group=group)})
    c.update(float(10 * (rank + 1)))
    return {"sum": m.compute(), "collection": c.compute()["sum"]}


def no_rows(rank, world):
    """Samplewise states with no rows on any rank (reset, or a batch of no samples) sync to no rows."""
    m = nm.MulticlassAccuracy(num_classes=3, multidim_average="samplewise")
    m.update(torch.tensor([[0, 1]]), torch.tensor([[0, 1]]))
    out = {"with_rows": m.compute()}
    m.reset()
    out["after_reset"] = m.compute()
    c = nm.MetricCollection({"rows": nm.MulticlassAccuracy(num_classes=3, multidim_average="samplewise"),
                             "sum": nm.SumMetric()})
    c.update(preds=torch.zeros(0, 2, dtype=torch.long), target=torch.zeros(0, 2, dtype=torch.long),
             value=float(rank + 1))
    out["collection"] = c.compute()
    return out


def mixed_flags(rank, world):
    """Each member of a collection syncs by its own flags, as TorchMetrics computes each metric."""
    value = float(rank + 1)
    c = nm.MetricCollection({"global": nm.SumMetric(), "local": nm.SumMetric(sync_on_compute=False)})
    c.update(value)
    out = {"compute": c.compute()}
    step = nm.MetricCollection({"step": nm.SumMetric(dist_sync_on_step=True), "nostep": nm.SumMetric()})
    out["forward"] = step(value)
    out["forward_counts"] = [step["step"].update_count, step["nostep"].update_count]
    return out


def local_collections(rank, world):
    """A collection none of whose metrics syncs computes on rank 0 alone (no collective: rank 1 never
    computes it); a metric whose distributed_available_fn says no keeps its own value beside one that
    syncs; an empty collection computes and syncs."""
    value = float(rank + 1)
    local = nm.MetricCollection({"sum": nm.SumMetric(sync_on_compute=False),
                                 "max": nm.MaxMetric(sync_on_compute=False)})
    local.update(value)
    out = {"local": local.compute() if rank == 0 else None}
    unavailable = nm.MetricCollection({"global": nm.SumMetric(),
                                       "local": nm.SumMetric(distributed_available_fn=lambda: False)})
    unavailable.update(value)
    out["unavailable"] = unavailable.compute()
    empty = nm.MetricCollection({})
    with empty.sync_context():
        out["empty"] = empty.compute()
    return out


def refused(call):
    try:
        call()
    except RuntimeError as e:
        return str(e)
    return None


def synced_together(rank, world):
    """A collection and its metrics see each other's sync: inside the collection's, a metric computes
    every rank's value once, and refuses forward, reset and sync; inside a metric's, the collection
    refuses compute and sync; a collection's reset leaves its metric reset. Nothing is lost."""
    value = float(rank + 1)
    c = nm.MetricCollection({"s": nm.SumMetric(), "t": nm.SumMetric()})
    c.update(value)
    out = {}
    with c.sync_context():
        out["collection"] = c.compute()
        out["member"] = c["s"].compute()
        out["member_forward"] = refused(lambda: c["s"](100.0))
        out["member_reset"] = refused(c["s"].reset)
        out["member_sync"] = refused(c["s"].sync)
    with c["s"].sync_context():
        out["in_member"] = refused(c.compute)
        out["sync_in_member"] = refused(c.sync)
        out["forward_in_member"] = refused(lambda: c(100.0))
    out["after"] = c.compute()
    with c["t"].sync_context():
        c.reset()
    out["reset_count"] = c["t"].update_count
    # held otherwise: by two collections, by a nested collection, updated apart (a subclass's own update)
    m = nm.SumMetric()
    first, second = nm.MetricCollection({"m": m}), nm.MetricCollection({"m": m})
    m.update(value)
    with first.sync_context():
        out["two_member"] = m.compute()
        out["two_other"] = refused(second.compute)
        out["two_other_sync"] = refused(second.sync)
        out["two_other_reset"] = refused(second.reset)
        out["two_reset"] = refused(m.reset)
        out["two_count_in_sync"] = m.update_count  # (a reset let through would show 0 here)
        out["add_in_sync"] = refused(lambda: first.add_metrics({"n": nm.SumMetric()}))
        copied, cloned = copy.deepcopy(first), first.clone()  # a copy of a synced collection is synced too
        out["copy_member"] = [copied["m"].compute(), cloned["m"].compute()]
        out["copy_forward"] = refused(lambda: copied["m"](100.0))
        # a copy of the metric alone holds every rank's state, synced as the metric is: with the local
        # state to unsync() to
        alone = [m.clone(), copy.deepcopy(m), pickled(m)]
        out["alone_in_sync"] = [a.compute() for a in alone] + [refused(lambda: alone[0](100.0))]
        shallow = copy.copy(first)  # the same metric object: synced through first alone
        out["shallow_in_sync"] = [shallow["m"] is m, refused(shallow.compute)]
    for a in alone:
        a.unsync()
    out["alone_after"] = [a.compute() for a in alone]
    out["two_after"] = m.compute()
    out["shallow_after"] = [shallow.compute()["m"], refused(shallow.unsync)]
    inner = nm.MetricCollection({"m": nm.SumMetric()})
    outer = nm.MetricCollection([inner, nm.MaxMetric()])
    inner.update(value)
    with inner.sync_context():
        out["nested_member"] = inner["m"].compute()
        out["nested_outer"] = refused(outer.compute)
        out["nested_reset"] = refused(inner["m"].reset)
    # an outer collection's metric that shares its state with a nested one's sees the nested one's sync
    inner = nm.MetricCollection({"m": nm.SumMetric()})
    mate = nm.SumMetric()
    outer = nm.MetricCollection([inner, mate])
    outer.update(value)
    with inner.sync_context():
        out["mate_shares"] = outer.compute_groups == {0: ["m", "SumMetric"]}
        out["mate"] = mate.compute()
        mate_copy = mate.clone()
    out["mate_copy"] = [mate_copy.compute(), mate_copy.unsync(), mate_copy.compute()][::2]
    with inner.sync_context():
        out["mate_forward"] = refused(lambda: mate(100.0))
        inner.reset()  # unsyncs first: the state the mate shares takes its local value back
    out["mate_after_reset"] = [inner["m"].update_count, mate.update_count, mate.compute()]
    apart = nm.MetricCollection({"own": ComputedMean()})
    apart.update(value)
    with apart.sync_context():
        out["apart_member"] = apart["own"].compute()
        out["apart_forward"] = refused(lambda: apart["own"](100.0))
        apart_copy = apart["own"].clone()
    out["apart_copy"] = [apart_copy.compute(), apart_copy.unsync(), apart_copy.compute()][::2]
    out["apart_after"] = apart.compute()
    # copies inside the sync of a collection whose group shares one state between metrics of other keys
    grouped = nm.MetricCollection({"cm": nm.MulticlassConfusionMatrix(num_classes=4),
                                   "p": nm.MulticlassPrecision(num_classes=4)})
    grouped.update(torch.tensor([0, 1, 2, 3]), torch.tensor([0, 1, 1, 3] if rank == 0 else [0, 1, 2, 3]))
    with grouped.sync_context():
        copies = [copy.deepcopy(grouped["p"]), copy.deepcopy(grouped["cm"]), grouped.clone()]
        out["grouped_in_sync"] = [copies[0].compute(), grouped["p"].compute()]
    for copied in copies:
        copied.unsync()
    out["grouped_after"] = [copies[0].compute(), copies[2].compute()["p"], grouped["p"].compute(),
                            copies[1].compute(), grouped["cm"].compute()]
    # a collection's sync reduces every state, one whose distributed_available_fn says no too, and
    # leaves its groups as they were
    mixed = nm.MetricCollection({"global": nm.SumMetric(),
                                 "local": nm.SumMetric(distributed_available_fn=lambda: False)})
    mixed.update(value)
    groups = mixed.compute_groups
    with mixed.sync_context():
        out["mixed_in_sync"] = mixed.compute()
    out["mixed_after"] = mixed.compute()
    out["mixed_groups_kept"] = mixed.compute_groups == groups
    return out


def synced_state_changes(rank, world):
    """reset() in sync_context() stays reset; forward() on a synced state raises and counts nothing."""
    out = {}
    m = nm.SumMetric()
    m.update(float(rank + 1))
    with m.sync_context():
        m.reset()
    out["reset_count"] = m.update_count
    m.update(float(rank + 1))
    for name, metric in (("metric", m), ("collection", nm.MetricCollection({"sum": nm.SumMetric()}))):
        metric.sync()
        try:
            metric(float(rank + 1))
            out[name] = None
        except RuntimeError as e:
            out[name] = str(e)
        metric.unsync()
        metric.sync(should_sync=False)  # a no-op, even beside sync() ... unsync() of another block
    out["total"] = m.compute()
    return out


def groups_differ(rank, world):
    """The same metrics grouped otherwise on one rank (a member loaded alone there, or
    compute_groups off) sync each metric's own state, as TorchMetrics does."""
    def make(compute_groups=True):
        return nm.MetricCollection({"accuracy": nm.MulticlassAccuracy(num_classes=CLASSES),
                                    "f1": nm.MulticlassF1Score(num_classes=CLASSES)}, compute_groups=compute_groups)
    split, flat = make(), make(compute_groups=rank != 0)
    for i in mine(rank, world):
        b = batch(i)
        for c in (split, flat):
            c.update(b["preds"], b["target"])
    if rank == 0:
        split["accuracy"].load_state_dict(split["accuracy"].state_dict())  # alone on rank 0 only: its own state
    out = {"groups": [split.compute_groups, flat.compute_groups], "split": split.compute(), "flat": flat.compute()}
    with split.sync_context():
        out["synced"] = split.compute()
    return out


def bad_input(rank, world):
    m = nm.MeanMetric(nan_strategy="error")
    m.update(torch.tensor([1.0, float("nan")] if rank == 1 else [2.0]))
    return compute_error(m, RuntimeError)


class ComputedMean(nm.MeanMetric):
    def compute(self):
        return super().compute() * 1


def bad_input_on_step(rank, world):
    """forward() with dist_sync_on_step over a NaN on rank 1 (nan_strategy="error"): the batch's value
    over every rank's good values, then compute() reports the NaN; alone, as a subclass, in a collection."""
    value = torch.tensor([1.0, float("nan")] if rank == 1 else [2.0])
    on_step = {"nan_strategy": "error", "dist_sync_on_step": True}
    out = {}
    for name, held in (("metric", nm.MeanMetric(**on_step)), ("subclass", ComputedMean(**on_step)),
                       ("collection", nm.MetricCollection({"mean": nm.MeanMetric(**on_step)}))):
        out[name] = held(value)
        out[name + "_error"] = compute_error(held, RuntimeError)["error"]
        out[name + "_refused"] = refused(lambda: held(torch.ones(3), torch.ones(2)))  # its batch's update's
    return out


def nested_sync(rank, world):
    """A nested collection whose metrics share its outer collection's C x C state computes over
    every rank and forwards with dist_sync_on_step, while the outer one lives and after."""
    inner = nm.MetricCollection({"prec": nm.MulticlassPrecision(num_classes=CLASSES, average=None),
                                 "rec": nm.MulticlassRecall(num_classes=CLASSES, average=None)})
    outer = nm.MetricCollection([inner, nm.MulticlassConfusionMatrix(num_classes=CLASSES)])
    for i in mine(rank, world):
        b = batch(i)
        inner.update(b["preds"], b["target"])
    out = {"alive": inner.compute()}
    del outer
    gc.collect()
    out["gone"] = inner.compute()
    step = nm.MetricCollection({"prec": nm.MulticlassPrecision(num_classes=CLASSES, average=None,
                                                               dist_sync_on_step=True)})
    step_outer = nm.MetricCollection([step, nm.MulticlassConfusionMatrix(num_classes=CLASSES)])
    b = batch(rank)
    out["step"] = step(b["preds"], b["target"])
    out["step_count"] = step_outer["MulticlassConfusionMatrix"].update_count
    return out


def main():
    scenario, rank, world, init_file, out_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    warnings.simplefilter("ignore")
    torch.save(globals()[scenario](rank, world), out_file)
    dist.barrier()  # every rank has its result
    # Leave without tearing gloo down: its teardown is not under test, and under PyTorch 2.6 it can
    # deadlock after collectives outside a sync (nosync_metrics.distributed says why), such as a
    # mismatch's all_gather_object.
    sys.stdout.flush()
    os._exit(0)

if __name__ == "__main__":
    main()
