#!/usr/bin/env python3
"""Kernel launches per update on the device path, counted on meta tensors; and replay invariance.

On a GPU every ATen op that computes something is a kernel launch, so the number of such ops one
update() dispatches is its launch cost, whatever the device. This script counts them without a GPU:
each metric is moved to the meta device (``metric.to('meta')``), given meta inputs, and its updates
run under a TorchDispatchMode (torch 1.13 and 2.x) that logs every ATen op that reaches the
dispatcher, the C++ library's included. Each configuration gets one warm-up update (not counted;
a growing state, GROWING_WARM_UP), then two counted ones.

An op is *launching* when
  * it is not a view: no return of its schema carries a read-only alias annotation (``Tensor(a)``:
    view, slice, select, expand, _reshape_alias, detach, lift_fresh, ...), nor is it _unsafe_view
    (a view whose schema says nothing);
  * it is not a pure allocation: empty, empty_like, empty_strided, new_empty, new_empty_strided and
    resize_ reserve memory and launch nothing;
  * it returns or writes a tensor on a non-CPU device (so the CPU "wrapped number" tensors made for a
    Python scalar, scalar_tensor or lift_fresh of a host value, do not count: a kernel takes them
    as arguments), or it is a sync-class op that reads a device tensor (it launches a copy to the
    host).
A *sync-class* op makes the host wait for the device: it reads a value back (_local_scalar_dense,
item, is_nonzero, equal, allclose), its output size depends on the data (nonzero, masked_select,
unique, bincount, ...), or it copies between the host and the device. On meta most of them raise
(there is no data to read); the op is logged before it runs, so it is still counted, and the
configuration is reported as an error.

An update is *replay-invariant* when two consecutive updates dispatch the same ops with the same
non-tensor arguments: the signature of an update is the list of (op, arguments), with each tensor
replaced by (dtype, shape, device type) and Python numbers, lists, strings and None kept exactly.
A small CPU tensor also keeps its values: a kernel receives a CPU scalar as an argument, so a
captured CUDA graph (or torch.compile) would replay it frozen. Equal signatures are what CUDA-graph
capture and torch.compile need to replay an update correctly.

    PYTHONPATH=build/python /usr/bin/python3 bench/launch_bench.py              # the table
    PYTHONPATH=build/python /usr/bin/python3 bench/launch_bench.py --json FILE  # and the results
    PYTHONPATH=build/python /usr/bin/python3 bench/launch_bench.py --check      # exit 1 on a sync-class
                                         # op, an error or an update that is not replay-invariant

The budget (launching ops per update: 10 for an aggregator, 12 for a collection) is reported, not
checked. A few forward() rows (calling the metric, as Lightning modules do: it accumulates and
computes the batch's values) have no budget; they are counted to watch them. TorchMetrics 1.6
figures were counted the same way, on meta, and are quoted from issue 11.

Under the table, the sweep: every collection the classification options make (per task: weights,
ignore_index, top_k, average, labels or scores, a ConfusionMatrix), measured and checked (--check)
as the rows are, summed up in a few lines: the most launching ops per task and each collection over
budget.
"""

import argparse
import dataclasses
import functools
import itertools
import json
import math
import sys
from typing import Callable, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

# ---------------------------------------------------------------- what launches, what syncs

#: Ops that produce a device tensor but launch no kernel, with the reason.
NO_KERNEL = {
    "aten::empty": "allocates only",
    "aten::empty_like": "allocates only",
    "aten::empty_strided": "allocates only",
    "aten::new_empty": "allocates only",
    "aten::new_empty_strided": "allocates only",
    "aten::resize_": "allocates (or keeps) storage and writes nothing",
    "aten::_unsafe_view": "a view, though its schema has no alias annotation",
}

#: Ops that make the host wait for the device, with the reason.
SYNC_CLASS = {
    "aten::_local_scalar_dense": "copies one value to the host: item(), float(t), int(t)",
    "aten::item": "reads a scalar back to the host",
    "aten::is_nonzero": "bool(t) reads the value back to branch on it",
    "aten::equal": "returns a host bool",
    "aten::allclose": "returns a host bool",
    "aten::nonzero": "output size depends on the data",
    "aten::nonzero_numpy": "output size depends on the data",
    "aten::argwhere": "output size depends on the data",
    "aten::masked_select": "output size depends on the data",
    "aten::_unique": "output size depends on the data",
    "aten::_unique2": "output size depends on the data",
    "aten::unique_dim": "output size depends on the data",
    "aten::unique_consecutive": "output size depends on the data",
    "aten::unique_dim_consecutive": "output size depends on the data",
    "aten::bincount": "reads the input's maximum back to size its output",
    "aten::histc": "with min == max it reads the data's range back",
    "aten::repeat_interleave": "without output_size it reads the sum of repeats back",
}

#: Ops that are sync-class when they copy between the host and the device.
COPIES = {"aten::copy_", "aten::_to_copy", "aten::_copy_from", "aten::_copy_from_and_resize"}

#: CPU tensors up to this many elements keep their values in a replay signature.
HOST_VALUES_KEPT = 16


def tensors(value):
    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]


def on_device(value):
    """Whether any tensor in `value` (a tensor, or nested lists, tuples, dicts) is off the CPU."""
    return any(t.device.type != "cpu" for t in tensors(value))


def is_view(func):
    return any(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)


def written_arguments(func, args, kwargs):
    """The arguments the schema marks as written (``Tensor(a!)``): in-place and out= ops."""
    written = []
    for position, argument in enumerate(func._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        if argument.name in kwargs:
            written.append(kwargs[argument.name])
        elif position < len(args):
            written.append(args[position])
    return written


def copies_across(args, kwargs):
    """Whether a copy goes between the host and a device (device= is how _to_copy names its target)."""
    on_host = {t.device.type == "cpu" for t in tensors(args)}
    if kwargs.get("device") is not None:
        on_host.add(torch.device(kwargs["device"]).type == "cpu")
    return len(on_host) > 1


def is_sync_class(func, args, kwargs):
    name = func._schema.name
    if name in COPIES:
        return copies_across(args, kwargs)
    if name == "aten::repeat_interleave" and kwargs.get("output_size") is not None:
        return False
    return name in SYNC_CLASS and on_device((args, kwargs))


def is_launching(func, args, kwargs, out, sync):
    if is_view(func) or func._schema.name in NO_KERNEL:
        return False
    return sync or on_device(out) or on_device(written_arguments(func, args, kwargs))


# ---------------------------------------------------------------- replay signatures

def normalized(value):
    """`value` with tensors replaced by what a replay may depend on; hashable, comparable."""
    if isinstance(value, torch.Tensor):
        described = ("tensor", str(value.dtype), tuple(value.shape), value.device.type)
        if value.device.type == "cpu" and value.numel() <= HOST_VALUES_KEPT:
            described += (normalized(value.flatten().tolist()),)
        return described
    if isinstance(value, (list, tuple)):
        return tuple(normalized(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((key, normalized(v)) for key, v in value.items()))
    if isinstance(value, float) and math.isnan(value):
        return "nan"  # nan != nan: two updates passing NaN pass the same thing
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)  # dtype, device, layout, memory_format, ...


@dataclasses.dataclass
class Op:
    name: str  # the overload, as str(func) names it: "aten.add_.Tensor"
    launching: bool
    sync: bool
    signature: tuple


class LaunchLog(TorchDispatchMode):
    """Logs every ATen op dispatched while it is active (``with LaunchLog() as log:``)."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        sync = is_sync_class(func, args, kwargs)
        signature = (str(func), normalized(args), normalized(kwargs))
        try:
            out = func(*args, **kwargs)
        except Exception:  # on meta, a sync-class op raises: it is logged all the same
            self.ops.append(Op(str(func), is_launching(func, args, kwargs, None, sync), sync, signature))
            raise
        self.ops.append(Op(str(func), is_launching(func, args, kwargs, out, sync), sync, signature))
        return out

    @property
    def launching(self):
        return [op.name for op in self.ops if op.launching]

    @property
    def syncs(self):
        return [op.name for op in self.ops if op.sync]

    @property
    def signature(self):
        return [op.signature for op in self.ops]


def first_difference(a, b):
    """(index, entry of a, entry of b) where two signatures first differ; None if they are equal."""
    for index in range(max(len(a), len(b))):
        left = a[index] if index < len(a) else None
        right = b[index] if index < len(b) else None
        if left != right:
            return index, repr(left), repr(right)
    return None


# ---------------------------------------------------------------- configurations

AGGREGATOR_BUDGET = 10
COLLECTION_BUDGET = 12
NAN_STRATEGIES = [("warn", "warn"), ("error", "error"), ("ignore", "ignore"), ("disable", "disable"),
                  ("replace(0.0)", 0.0)]

#: TorchMetrics 1.6, counted the same way on meta (issue 11).
TORCHMETRICS_REFERENCE = {
    "MeanMetric warn, value (4096,)": "12 (2 syncs)",
    "MeanMetric disable, value + weight (4096,)": "6",
    "multiclass C=1000 macro, scores (128, 1000)": "17 (1 sync: bincount)",
    "binary, scores (4096,)": "32",
}


@dataclasses.dataclass(frozen=True)
class Config:
    name: str
    make: Callable  # () -> a metric or a MetricCollection, on the CPU
    inputs: Callable  # () -> the update's arguments, meta tensors
    budget: Optional[int]  # None: no budget (forward)
    grows: bool = False  # the state gains rows each update (samplewise): each update writes further on
    call: str = "update"  # or "forward": accumulates and computes the batch's value
    sweep: bool = False  # one of the sweep's, not a row of the table: summed up under it

    @property
    def reference(self) -> Optional[str]:
        return TORCHMETRICS_REFERENCE.get(self.name)


def meta(*shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device="meta")


def aggregator_configs(nm):
    inputs = [("value (4096,)", lambda: (meta(4096),), ("MeanMetric", "SumMetric", "MinMetric", "MaxMetric")),
              ("value + weight (4096,)", lambda: (meta(4096), meta(4096)), ("MeanMetric", "SumMetric")),
              ("loss ()", lambda: (meta(),), ("MeanMetric", "SumMetric", "MinMetric", "MaxMetric"))]
    configs = []
    for class_name in ("MeanMetric", "SumMetric", "MinMetric", "MaxMetric"):
        for label, strategy in NAN_STRATEGIES:
            make = functools.partial(getattr(nm, class_name), nan_strategy=strategy)
            configs += [Config(f"{class_name} {label}, {input_name}", make, make_inputs, AGGREGATOR_BUDGET)
                        for input_name, make_inputs, takers in inputs if class_name in takers]
    # float32 metrics (dtype=torch.float32): they accumulate in float64 and round their value
    for class_name in ("MeanMetric", "SumMetric"):
        make = functools.partial(getattr(nm, class_name), dtype=torch.float32)
        configs += [Config(f"{class_name} warn dtype=float32, {input_name}", make, make_inputs, AGGREGATOR_BUDGET)
                    for input_name, make_inputs, _ in inputs[:2]]
    return configs


def collection(nm, task, *extra, **options):
    """A maker of a MetricCollection of TorchMetrics' task-specific Accuracy, Precision, Recall and
    F1Score (and the `extra` classes, such as ConfusionMatrix), all made with `options`."""
    names = ["Accuracy", "Precision", "Recall", "F1Score", *extra]
    return lambda: nm.MetricCollection([getattr(nm, task + name)(**options) for name in names])


def scores_and_labels(classes):
    return lambda: (meta(128, classes), meta(128, dtype=torch.int64))


def collection_configs(nm):
    c1000 = dict(num_classes=1000)
    rows = [
        ("multiclass C=1000 macro, scores (128, 1000)", collection(nm, "Multiclass", **c1000), scores_and_labels(1000)),
        ("multiclass C=1000 macro top_k=5, scores", collection(nm, "Multiclass", top_k=5, **c1000),
         scores_and_labels(1000)),
        ("multiclass C=1000 micro, scores", collection(nm, "Multiclass", average="micro", **c1000),
         scores_and_labels(1000)),
        ("multiclass num_classes=None micro, scores (128, 1000)",
         collection(nm, "Multiclass", num_classes=None, average="micro"), scores_and_labels(1000)),
        ("multiclass num_classes=None micro ignore_index=-1, labels (128,)",
         collection(nm, "Multiclass", num_classes=None, average="micro", ignore_index=-1),
         lambda: (meta(128, dtype=torch.int64), meta(128, dtype=torch.int64))),
        ("multiclass C=1000 macro ignore_index=0, scores", collection(nm, "Multiclass", ignore_index=0, **c1000),
         scores_and_labels(1000)),
        ("multiclass C=1000 macro top_k=5 ignore_index=0, scores",
         collection(nm, "Multiclass", top_k=5, ignore_index=0, **c1000), scores_and_labels(1000)),
        ("multiclass C=1000 macro, labels (128,)", collection(nm, "Multiclass", **c1000),
         lambda: (meta(128, dtype=torch.int64), meta(128, dtype=torch.int64))),
        ("binary, scores (4096,)", collection(nm, "Binary"), lambda: (meta(4096), meta(4096, dtype=torch.int64))),
        # a column of two-class probabilities (probs[:, 1]): strided, copied once into a buffer that
        # bucketize reads as it is (it would copy it itself, an op the count would not see)
        ("binary, scores a column of (4096, 2)", collection(nm, "Binary"),
         lambda: (meta(4096, 2)[:, 1], meta(4096, dtype=torch.int64))),
        ("multilabel L=100 macro, scores (128, 100)", collection(nm, "Multilabel", num_labels=100),
         lambda: (meta(128, 100), meta(128, 100, dtype=torch.int64))),
        ("multiclass C=10 macro + ConfusionMatrix, scores (128, 10)",
         collection(nm, "Multiclass", "ConfusionMatrix", num_classes=10), scores_and_labels(10)),
        ("multiclass C=21 macro, segmentation scores (8, 21, 64, 64)", collection(nm, "Multiclass", num_classes=21),
         lambda: (meta(8, 21, 64, 64), meta(8, 64, 64, dtype=torch.int64))),
        # weights are ours (weighted=True; TorchMetrics' classification has none): float32, one per sample
        ("multiclass C=1000 macro weighted, scores + weight (128,)",
         collection(nm, "Multiclass", weighted=True, **c1000),
         lambda: (meta(128, 1000), meta(128, dtype=torch.int64), meta(128))),
        ("multiclass C=1000 macro weighted ignore_index=0, scores + weight (128,)",
         collection(nm, "Multiclass", weighted=True, ignore_index=0, **c1000),
         lambda: (meta(128, 1000), meta(128, dtype=torch.int64), meta(128))),
        ("multiclass C=1000 macro weighted top_k=5, scores + weight (128,)",
         collection(nm, "Multiclass", weighted=True, top_k=5, **c1000),
         lambda: (meta(128, 1000), meta(128, dtype=torch.int64), meta(128))),
        # float64 weights beside float32 scores: float32 cannot hold every weight, so the weights take
        # an ne of their own (the scores' NaN check holds them otherwise)
        ("multiclass C=1000 macro weighted, scores + float64 weight (128,)",
         collection(nm, "Multiclass", weighted=True, **c1000),
         lambda: (meta(128, 1000), meta(128, dtype=torch.int64), meta(128, dtype=torch.float64))),
        ("binary weighted, scores + weight (4096,)", collection(nm, "Binary", weighted=True),
         lambda: (meta(4096), meta(4096, dtype=torch.int64), meta(4096))),
        ("multilabel L=100 macro weighted, scores + weight (128,)",
         collection(nm, "Multilabel", num_labels=100, weighted=True),
         lambda: (meta(128, 100), meta(128, 100, dtype=torch.int64), meta(128))),
        # AMP's float16 scores and uint8 masks are read in their dtype, as float32 scores and int64 targets
        ("binary, float16 scores + uint8 target (4096,)", collection(nm, "Binary"),
         lambda: (meta(4096, dtype=torch.float16), meta(4096, dtype=torch.uint8))),
        ("multilabel L=100 macro weighted, float16 scores + weight (128,)",
         collection(nm, "Multilabel", num_labels=100, weighted=True),
         lambda: (meta(128, 100, dtype=torch.float16), meta(128, 100, dtype=torch.int64), meta(128))),
        ("multiclass C=21 macro ignore_index=255, segmentation float16 scores + uint8 target (8, 21, 64, 64)",
         collection(nm, "Multiclass", num_classes=21, ignore_index=255),
         lambda: (meta(8, 21, 64, 64, dtype=torch.float16), meta(8, 64, 64, dtype=torch.uint8))),
        # a channels_last model's scores and masks, labels last in memory: read in that order, no copy
        ("multilabel L=5 macro weighted ignore_index=255, channels_last segmentation float16 scores + uint8 "
         "target + weight (8, 5, 64, 64)",
         collection(nm, "Multilabel", num_labels=5, weighted=True, ignore_index=255),
         lambda: (meta(8, 5, 64, 64, dtype=torch.float16).contiguous(memory_format=torch.channels_last),
                  meta(8, 5, 64, 64, dtype=torch.uint8).contiguous(memory_format=torch.channels_last), meta(8))),
    ]
    # samplewise: the state gains a row per sample, written in place where the last update's end, so
    # no replay; the ops are the same otherwise
    growing = [
        ("multiclass C=10 samplewise, scores (128, 10, 16)",
         collection(nm, "Multiclass", num_classes=10, multidim_average="samplewise"),
         lambda: (meta(128, 10, 16), meta(128, 16, dtype=torch.int64))),
        ("binary samplewise, scores (128, 32)", collection(nm, "Binary", multidim_average="samplewise"),
         lambda: (meta(128, 32), meta(128, 32, dtype=torch.int64))),
    ]
    return ([Config(name, make, inputs, COLLECTION_BUDGET) for name, make, inputs in rows] +
            [Config(name, make, inputs, COLLECTION_BUDGET, grows=True) for name, make, inputs in growing])


def forward_configs(nm):
    """forward() (the Lightning idiom: calling the metric), which also computes the batch's values:
    no budget, counted to watch it."""
    rows = [("MeanMetric warn, value (4096,), forward()", nm.MeanMetric, lambda: (meta(4096),)),
            ("MaxMetric warn, value (4096,), forward()", nm.MaxMetric, lambda: (meta(4096),)),
            ("multiclass C=1000 macro, scores (128, 1000), forward()",
             collection(nm, "Multiclass", num_classes=1000), scores_and_labels(1000)),
            ("binary, scores (4096,), forward()", collection(nm, "Binary"),
             lambda: (meta(4096), meta(4096, dtype=torch.int64)))]
    return [Config(name, make, inputs, None, call="forward") for name, make, inputs in rows]


def sweep_collection(nm, task, matrix, **options):
    """A maker of the collection of `task`'s Accuracy, Precision, Recall and F1Score made with
    `options`, and (`matrix`) its ConfusionMatrix, made with those it takes."""
    def make():
        metrics = [getattr(nm, task + name)(**options) for name in ("Accuracy", "Precision", "Recall", "F1Score")]
        if matrix:
            taken = {k: v for k, v in options.items() if k not in ("average", "top_k")}
            metrics.append(getattr(nm, task + "ConfusionMatrix")(**taken))
        return nm.MetricCollection(metrics)
    return make


def sweep_name(task, options, labels, weighted, matrix, shape):
    """As the table's rows are named: "multiclass C=1000 micro top_k=5 weighted, scores + weight (128, 1000)"."""
    short = {"num_classes": "C=", "num_labels": "L=", "average": ""}
    words = [task] + [f"{short.get(k, k + '=')}{v}" for k, v in options.items()] + (["weighted"] if weighted else [])
    words += ["+ ConfusionMatrix"] if matrix else []
    return f"{' '.join(words)}, {'labels' if labels else 'scores'}{' + weight' if weighted else ''} {shape}"


def sweep_configs(nm):
    """The collections the options make, per task: weights, ignore_index (0, so that random targets
    hit it), top_k (multiclass), average, labels or scores, with and without a ConfusionMatrix (it has
    no top_k: it joins top_k 1 only); num_classes=None and samplewise are the table's rows alone. The
    table's rows pick some; the sweep sums them all up under it, and the tests check each like a row."""
    configs = []
    tasks = [("multiclass", "Multiclass", dict(num_classes=1000), (128, 1000), (1, 5), ("macro", "micro")),
             ("binary", "Binary", {}, (4096,), (1,), (None,)),
             ("multilabel", "Multilabel", dict(num_labels=100), (128, 100), (1,), ("macro", "micro"))]
    for name, task, sizes, shape, top_ks, averages in tasks:
        target_shape = shape[:1] if name == "multiclass" else shape
        for weighted, ignore, labels, matrix, top_k, average in itertools.product(
                (False, True), (None, 0), (False, True), (False, True), top_ks, averages):
            if top_k > 1 and (labels or matrix):
                continue
            options = dict(sizes)
            if average:
                options["average"] = average
            if top_k > 1:
                options["top_k"] = top_k
            if ignore is not None:
                options["ignore_index"] = ignore
            preds = (target_shape, torch.int64) if labels else (shape, torch.float32)

            def inputs(preds=preds, target_shape=target_shape, weighted=weighted):
                return ((meta(*preds[0], dtype=preds[1]), meta(*target_shape, dtype=torch.int64))
                        + ((meta(target_shape[0]),) if weighted else ()))
            make = sweep_collection(nm, task, matrix, weighted=weighted, **options)
            shown = tuple(target_shape[:1]) if weighted else tuple(preds[0])  # as the table's rows
            configs.append(Config(sweep_name(name, options, labels, weighted, matrix, shown), make, inputs,
                                  COLLECTION_BUDGET, sweep=True))
    return configs


def configurations():
    """Every configuration of the table (the tests check each one); imports nosync_metrics."""
    import nosync_metrics as nm

    return aggregator_configs(nm) + collection_configs(nm) + forward_configs(nm)


def sweep_configurations(with_table_rows=False):
    """The sweep's configurations (the tests check each one too), less those the table has (by name)
    unless `with_table_rows`; imports nosync_metrics."""
    import nosync_metrics as nm

    rows = {c.name for c in configurations()}
    return [c for c in sweep_configs(nm) if with_table_rows or c.name not in rows]


# ---------------------------------------------------------------- measuring

def failure(error, logs):
    syncs = logs[-1].syncs if logs else []
    if syncs:
        return f"sync-class op {syncs[-1]} (meta has no data for it)"
    return f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"


# A growing state's rows buffer doubles when an update's rows do not fit (on updates 1, 2, 3, 5, 9, ...
# of one batch size), with two more ops then (a zeros and a copy_): updates 6 and 7 are counted.
GROWING_WARM_UP = 5


def measure(config):
    """One configuration on meta: warm-up updates (not counted), then two counted ones."""
    result = {"configuration": config.name, "budget": config.budget, "reference": config.reference, "error": None}
    logs = []
    try:
        metric = config.make().to("meta")
        inputs = config.inputs()
        # the first update is a warm-up: the work of a first update is not counted
        for _ in range((GROWING_WARM_UP if config.grows else 1) + 2):
            logs.append(LaunchLog())
            with logs[-1]:
                getattr(metric, config.call)(*inputs)
    except Exception as error:  # a sync-class op raises on meta: it is reported with the rest
        result.update(error=failure(error, logs), launching=[], syncs=[len(log.syncs) for log in logs[-2:]],
                      replay_invariant=False, grows=config.grows, budget_met=False, ops=[], first_difference=None)
        return result
    counted = logs[-2:]
    counts = [len(log.launching) for log in counted]
    # a growing state's updates view more rows each time, and write theirs further on: their launching
    # ops alone are compared
    signatures = [[op.signature for op in log.ops if op.launching or not config.grows] for log in counted]
    difference = first_difference(*signatures)
    result.update(launching=counts, syncs=[len(log.syncs) for log in counted],
                  replay_invariant=difference is None and not config.grows, grows=config.grows,
                  budget_met=None if config.budget is None else max(counts) <= config.budget,
                  ops=counted[0].launching, first_difference=difference)
    return result


def measure_all():
    """The table's results, then the sweep's; each says whether it is of the sweep ("swept": some
    table rows are too) and a row of the table ("sweep": false)."""
    swept = {c.name for c in sweep_configurations(with_table_rows=True)}
    return [dict(measure(c), sweep=c.sweep, swept=c.name in swept) for c in configurations() + sweep_configurations()]


def problems(results):
    """What --check refuses: errors, sync-class ops, updates that are not replay-invariant."""
    found = []
    for r in results:
        if r["error"]:
            found.append(f"{r['configuration']}: {r['error']}")
        elif any(r["syncs"]):
            found.append(f"{r['configuration']}: sync-class ops {r['syncs']}")
        elif r.get("first_difference") is not None:
            found.append(f"{r['configuration']}: not replay-invariant at {r['first_difference']}")
    return found


# ---------------------------------------------------------------- report

def yes_no(flag):
    return "yes" if flag else "no"


def count_cell(counts):
    return str(counts[0]) if len(set(counts)) == 1 else " / ".join(map(str, counts))


def budget_cell(r):
    return "no budget" if r["budget"] is None else f"{yes_no(r['budget_met'])} (≤ {r['budget']})"


def table_row(r):
    if r["error"]:
        return f"| {r['configuration']} | error: {r['error']} | | no | no | {r['reference'] or ''} |"
    return (f"| {r['configuration']} | {count_cell(r['launching'])} | {count_cell(r['syncs'])} | "
            f"{'no: its state grows' if r.get('grows') else yes_no(r['replay_invariant'])} | {budget_cell(r)} | "
            f"{r['reference'] or ''} |")


def sweep_summary(swept):
    """The sweep's results in a few lines: how many, the most launching ops per task, the problems
    and the collections over budget."""
    if not swept:
        return ""
    most = {}
    for r in swept:
        task = r["configuration"].split()[0].rstrip(",")
        most[task] = max(most.get(task, 0), max(r["launching"] or [0]))
    over = [r for r in swept if not r["error"] and not r["budget_met"]]
    lines = [f"Sweep: {len(swept)} collections (every task with and without weights, ignore_index, a "
             "ConfusionMatrix; labels and scores; top_k 1 and 5 and macro and micro averages where the task "
             f"has them): {len(problems(swept))} with an error, a sync-class op or an update that is not "
             "replay-invariant; the most launching ops per update: "
             + ", ".join(f"{task} {n}" for task, n in most.items())
             + f"; {len(over)} over the budget of {COLLECTION_BUDGET}" + (":" if over else ".")]
    lines += [f"- {r['configuration']}: {count_cell(r['launching'])}" for r in over]
    return "\n".join(lines)


def markdown_table(results):
    lines = ["| configuration | launching ops per update | sync-class ops | replay-invariant | budget met | "
             "TorchMetrics 1.6 |", "|---|---:|---:|---|---|---|"]
    table = "\n".join(lines + [table_row(r) for r in results if not r.get("sweep")])
    summary = sweep_summary([r for r in results if r.get("swept")])
    return table + ("\n\n" + summary if summary else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="also write the results (with each update's launching ops) here")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 on an error, a sync-class op or an update that is not replay-invariant")
    args = parser.parse_args()
    results = measure_all()
    return report(markdown_table(results), results, args.json, problems(results) if args.check else [])


def report(table, results, json_path, found):
    """Prints the table, writes the results to json_path (if any) and the problems found to stderr;
    the exit status: 1 if there are any."""
    print(table)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(results, f, indent=1)
    for problem in found:
        print(problem, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
