"""The device path, on meta tensors: every update of bench/launch_bench.py's configurations (its
table's and its sweep's) is replay-invariant (two consecutive updates dispatch the same ops with the
same arguments, as CUDA-graph capture and torch.compile need) and dispatches no sync-class op; every
aggregator and swept collection keeps to its launch budget; and the launch counter itself counts
right on hand-made ATen sequences."""

import contextlib

import pytest
import torch

import launch_bench
from test_inputs import UNSIGNED

CONFIGS = launch_bench.configurations() + launch_bench.sweep_configurations()


@pytest.mark.parametrize("config", CONFIGS, ids=[c.name for c in CONFIGS])
def test_update_is_replay_invariant_without_sync(config):
    result = launch_bench.measure(config)
    assert result["error"] is None
    assert result["syncs"] == [0, 0]
    assert result["first_difference"] is None  # a growing state's rows aside (samplewise)
    assert result["replay_invariant"] != config.grows
    assert result["launching"][0] == result["launching"][1] > 0


# Issue 11's budget, launching ops per update: 10 for every aggregator in every NaN policy, 12 for
# every collection of the table and the sweep (each task, with and without weights, ignore_index,
# top_k, ...), but the table's rows that pass it, each at its count (README: what still passes it)
BUDGETED = [c for c in launch_bench.configurations() + launch_bench.sweep_configurations() if c.budget is not None]
OVER_BUDGET = {"multiclass C=1000 macro weighted, scores + float64 weight (128,)": 13}


@pytest.mark.parametrize("config", BUDGETED, ids=[c.name for c in BUDGETED])
def test_every_aggregator_and_collection_keeps_to_the_launch_budget(config):
    launching = launch_bench.measure(config)["launching"]
    if config.name in OVER_BUDGET:
        assert launching == [OVER_BUDGET[config.name]] * 2
    else:
        assert max(launching) <= config.budget, launching


def measured_clean(make, *inputs):
    """The launch results of `make`'s collection over meta tensors of the (shape, dtype) `inputs`,
    checked: no error, no sync-class op, replay-invariant."""
    def tensors():
        return tuple(launch_bench.meta(*shape, dtype=dtype) for shape, dtype in inputs)
    result = launch_bench.measure(launch_bench.Config("inputs", make, tensors, 12))
    assert result["error"] is None and result["first_difference"] is None and result["syncs"] == [0, 0]
    return result


BINARY_AND_MULTILABEL = [("Multilabel", dict(num_labels=100), (128, 100)), ("Binary", {}, (4096,))]


@pytest.mark.parametrize("task, options, shape", [
    ("Multiclass", dict(num_classes=1000), (128, 1000)),
    ("Multiclass", dict(num_classes=1000, top_k=5, ignore_index=0), (128, 1000)),
    *BINARY_AND_MULTILABEL,
])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("scores, target", [(torch.float16, torch.int64), (torch.bfloat16, torch.int64),
                                            (torch.float32, torch.int32), (torch.float32, torch.int8),
                                            (torch.float32, torch.uint8), (torch.float32, torch.bool),
                                            (torch.float16, torch.uint8)])
def test_other_score_and_target_dtypes_are_read_as_they_are(task, options, shape, weighted, scores, target):
    """Half-precision scores (AMP's) and integer targets other than int64 (bool as uint8, a view) are
    read as they are, by bucketize (binary, multilabel) or by max, the sort and the clamp
    (multiclass): the same ops as over float32 scores and int64 targets, but that multiclass
    half-precision scores beside float32 weights take an ne of their own (the weights are not
    checked in the scores' dtype)."""
    import nosync_metrics as nm

    make = launch_bench.collection(nm, task, weighted=weighted, **options)
    target_shape = shape[:1] if task == "Multiclass" else shape
    weight = [((shape[0],), torch.float32)] if weighted else []
    canonical = measured_clean(make, (shape, torch.float32), (target_shape, torch.int64), *weight)
    other = measured_clean(make, (shape, scores), (target_shape, target), *weight)
    extra = ["aten.ne.Tensor_out"] if task == "Multiclass" and scores != torch.float32 and weighted else []
    assert sorted(other["ops"]) == sorted(canonical["ops"] + extra)
    assert other["launching"] == [n + len(extra) for n in canonical["launching"]]


@pytest.mark.parametrize("task, options, shape", [*BINARY_AND_MULTILABEL,
                                                  ("Multiclass", dict(num_classes=1000), (128,)),
                                                  ("Multiclass", dict(num_classes=10, ignore_index=0), (128,))])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("labels", [torch.int32, torch.int16, torch.uint8, torch.bool])
def test_labels_of_other_integer_dtypes_are_read_as_they_are(task, options, shape, weighted, labels):
    """Label predictions and targets of int32, int16, uint8 or bool (a uint8 view) are read in their
    dtype (bucketize; multiclass: the clamps): the same ops as int64 ones."""
    import nosync_metrics as nm

    make = launch_bench.collection(nm, task, weighted=weighted, **options)
    weight = [((shape[0],), torch.float32)] if weighted else []
    canonical = measured_clean(make, (shape, torch.int64), (shape, torch.int64), *weight)
    other = measured_clean(make, (shape, labels), (shape, labels), *weight)
    assert other["ops"] == canonical["ops"] and other["launching"] == canonical["launching"]


@pytest.mark.skipif(not UNSIGNED, reason="uint16, uint32 and uint64 are PyTorch 2's (test-torch2.sh runs this)")
@pytest.mark.parametrize("task, options, shape", BINARY_AND_MULTILABEL)
@pytest.mark.parametrize("target", UNSIGNED)
def test_pytorch2_unsigned_targets_cost_a_cast(task, options, shape, target):
    """PyTorch 2's uint16, uint32 and uint64, which bucketize does not take, are made int64 first."""
    import nosync_metrics as nm

    make = launch_bench.collection(nm, task, **options)
    canonical = measured_clean(make, (shape, torch.float32), (shape, torch.int64))
    other = measured_clean(make, (shape, torch.float32), (shape, target))
    assert other["ops"] == ["aten._to_copy.default"] + canonical["ops"]


@pytest.mark.parametrize("top_k, options, bound", [(1, {"ignore_index": 0}, 131072), (3, {}, 52428)])
def test_weighted_tallies_give_way_to_zeroing_past_their_bound(top_k, options, bound):
    """A weighted multiclass update tallies in one where and one mm (12 launching ops) up to the rows
    whose where stays within 2^22 values (16 rows of the batch a slot, top_k + 1 slots, one more with
    top_k > 1); a larger batch zeroes the ignored rows (top_k 1) or takes the maximum of the sort's
    ends (top_k > 1) instead: one op more."""
    import nosync_metrics as nm

    counts = []
    for m in (bound, bound + 1):
        make = launch_bench.collection(nm, "Multiclass", weighted=True, num_classes=50, top_k=top_k, **options)
        inputs = (lambda m=m: (launch_bench.meta(m, 50), launch_bench.meta(m, dtype=torch.int64),
                               launch_bench.meta(m)))
        counts.append(launch_bench.measure(launch_bench.Config("bound", make, inputs, 12))["launching"])
    assert counts == [[12, 12], [13, 13]]


@pytest.mark.parametrize("options", [{}, {"ignore_index": 0}, {"weighted": True},
                                     {"weighted": True, "ignore_index": 0}])
def test_top_k_over_fewer_classes_than_its_rows_sorts_a_padded_copy(options):
    """top_k > 1 sorts into an index buffer whose columns hold the class rows, 2k + 2 of them (3k + 4
    with an ignore_index: 12 or 19 at top_k = 5); over one class fewer the scores are sorted from a
    copy padded to that width: one copy_ more than over as many classes as rows, which keep to the
    budget (README: what still passes it)."""
    import nosync_metrics as nm

    weighted = options.get("weighted", False)
    rows = 19 if "ignore_index" in options else 12
    results = {}
    for classes in (rows - 1, rows):
        make = launch_bench.collection(nm, "Multiclass", num_classes=classes, top_k=5, **options)
        inputs = (lambda c=classes: (launch_bench.meta(128, c), launch_bench.meta(128, dtype=torch.int64))
                  + ((launch_bench.meta(128),) if weighted else ()))
        results[classes] = launch_bench.measure(launch_bench.Config(f"C={classes}", make, inputs, 12))
    padded, unpadded = results[rows - 1], results[rows]
    assert padded["error"] is None and unpadded["error"] is None
    assert padded["launching"] == [n + 1 for n in unpadded["launching"]]
    assert padded["ops"].count("aten.copy_.default") == unpadded["ops"].count("aten.copy_.default") + 1
    assert max(unpadded["launching"]) <= 12
    assert max(padded["launching"]) == (12 if options == {} else 13)


@pytest.mark.parametrize("task, options, shape", [
    ("Multiclass", dict(num_classes=1000), (128, 1000)),
    ("Multiclass", dict(num_classes=1000, top_k=5, ignore_index=0), (128, 1000)),
    *BINARY_AND_MULTILABEL,
])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_weights_are_read_as_they_are(task, options, shape, dtype):
    """float16 and bfloat16 weights are read as they are (bucketized in their dtype; multiclass ones
    checked with float32 scores, which hold them): the same ops as float32 weights."""
    import nosync_metrics as nm

    make = launch_bench.collection(nm, task, weighted=True, **options)
    target_shape = shape[:1] if task == "Multiclass" else shape
    canonical, half = (measured_clean(make, (shape, torch.float32), (target_shape, torch.int64), ((shape[0],), weight))
                       for weight in (torch.float32, dtype))
    assert half["ops"] == canonical["ops"] and half["launching"] == canonical["launching"]


@pytest.mark.parametrize("options", [dict(num_classes=1000), dict(num_classes=1000, top_k=5, ignore_index=0),
                                     dict(num_classes=None, average="micro")])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_scores_check_weights_of_their_dtype(options, dtype):
    """Multiclass float16 and bfloat16 scores check weights of their own dtype with their NaN ne, as
    float32 scores check float32 weights: the same ops (but float16 on a CPU before PyTorch 2.1,
    whose CPU clamp takes no float16)."""
    import nosync_metrics as nm

    make = launch_bench.collection(nm, "Multiclass", weighted=True, **options)
    canonical, half = (measured_clean(make, ((128, 1000), scores), ((128,), torch.int64), ((128,), scores))
                       for scores in (torch.float32, dtype))
    assert half["ops"] == canonical["ops"] and half["launching"] == canonical["launching"]
    assert max(half["launching"]) <= 12


@pytest.mark.parametrize("task, options, shape, rows, weight", [
    ("Multilabel", dict(num_labels=100), (128, 100, 4), (512, 100), "sample"),
    ("Multilabel", dict(num_labels=100), (128, 100, 4), (512, 100), "entry"),
    ("Multilabel", dict(num_labels=10), (16, 10, 8, 8), (1024, 10), None),
    ("Binary", dict(), (16, 8, 8), (1024,), "sample"),
    ("Multiclass", dict(num_classes=10), (16, 10, 8, 8), (1024, 10), "sample"),
    ("Multilabel", dict(num_labels=10, multidim_average="samplewise"), (16, 10, 8), None, None),
    ("Multilabel", dict(num_labels=10, multidim_average="samplewise"), (16, 10, 8, 8), None, None),
])
def test_extra_dimensions_are_read_where_they_lie(task, options, shape, rows, weight):
    """Binary (N, X...) and multilabel (N, L, X...) inputs are counted in place, their labels not
    brought last, and a weight per sample is not repeated over its entries (multiclass too): no
    copy, and the ops of the same collection over the entries as rows (samplewise, which has no
    such rows: 11, as its table row)."""
    import nosync_metrics as nm

    make = launch_bench.collection(nm, task, weighted=weight is not None, **options)
    grows = options.get("multidim_average") == "samplewise"

    def measured(preds):
        target = preds[:1] + preds[2:] if task == "Multiclass" else preds
        weights = {"sample": (preds[0],), "entry": target, None: None}[weight]  # rows: a weight per row
        inputs = lambda: ((launch_bench.meta(*preds), launch_bench.meta(*target, dtype=torch.int64))  # noqa: E731
                          + ((launch_bench.meta(*weights),) if weights else ()))
        result = launch_bench.measure(launch_bench.Config("extra dimensions", make, inputs, 12, grows=grows))
        assert result["error"] is None and result["syncs"] == [0, 0]
        return result

    extra = measured(shape)
    assert not any(op in ("aten.clone.default", "aten.copy_.default") for op in extra["ops"])
    expected = [11, 11] if rows is None else measured(rows)["launching"]
    assert extra["launching"] == expected and max(expected) <= 12


@pytest.mark.parametrize("weight, options", [
    *((weight, options) for weight in (None, "sample", "entry") for options in (dict(), dict(ignore_index=255))),
    (None, dict(multidim_average="samplewise")),  # (which counts without weights)
])
def test_multilabel_entries_laid_out_labels_last_are_read_in_place(weight, options):
    """Multilabel (N, L, H, W) inputs in channels_last (labels last in memory), as a channels_last
    model and its masks give them, are read in that order: the ops of contiguous inputs, no copy.
    With the scores alone so, one of the two is copied, either way round."""
    import nosync_metrics as nm

    make = launch_bench.collection(nm, "Multilabel", num_labels=5, weighted=weight is not None, **options)
    grows = options.get("multidim_average") == "samplewise"

    def measured(preds_format, target_format):
        def inputs():
            preds = launch_bench.meta(8, 5, 16, 16).contiguous(memory_format=preds_format)
            target = launch_bench.meta(8, 5, 16, 16, dtype=torch.uint8).contiguous(memory_format=target_format)
            weights = {"sample": launch_bench.meta(8), "entry": launch_bench.meta(8, 5, 16, 16), None: None}[weight]
            if weight == "entry":
                weights = weights.contiguous(memory_format=target_format)
            return (preds, target) + ((weights,) if weights is not None else ())
        result = launch_bench.measure(launch_bench.Config("channels_last", make, inputs, 12, grows=grows))
        assert result["error"] is None and result["syncs"] == [0, 0]
        assert grows or result["first_difference"] is None
        return result

    copies = lambda result: sum(op == "aten.copy_.default" for op in result["ops"])  # noqa: E731
    contiguous = measured(torch.contiguous_format, torch.contiguous_format)
    labels_last = measured(torch.channels_last, torch.channels_last)
    assert labels_last["ops"] == contiguous["ops"] and copies(labels_last) == 0
    assert max(labels_last["launching"]) <= 12
    scores_alone = measured(torch.channels_last, torch.contiguous_format)
    assert scores_alone["launching"] == [n + 1 for n in contiguous["launching"]] and copies(scores_alone) == 1


@pytest.mark.parametrize("task, options, preds, target, weight, count, copies", [
    ("Multiclass", dict(num_classes=21, top_k=3, ignore_index=255), (4, 21, 32, 32), (4, 32, 32), None, 13, 1),
    ("Multiclass", dict(num_classes=21, top_k=3), (4, 21, 32, 32), (4, 32, 32), (4, 32, 32), 13, 1),
    ("Multiclass", dict(num_classes=10, top_k=2, multidim_average="samplewise"), (16, 10, 8), (16, 8), None, 13, 1),
    ("Multiclass", dict(num_classes=10, top_k=2, ignore_index=0, multidim_average="samplewise"), (16, 10, 8), (16, 8),
     None, 14, 1),
])
def test_extra_dimensions_that_no_flat_view_reaches_are_copied(task, options, preds, target, weight, count, copies):
    """Multiclass scores with extra dimensions are copied into the sort's padded buffer under
    top_k > 1: the counts README's "what still passes it" gives."""
    import nosync_metrics as nm

    make = launch_bench.collection(nm, task, weighted=weight is not None, **options)

    def inputs():
        return ((launch_bench.meta(*preds), launch_bench.meta(*target, dtype=torch.int64))
                + ((launch_bench.meta(*weight),) if weight else ()))
    grows = options.get("multidim_average") == "samplewise"
    result = launch_bench.measure(launch_bench.Config("extra dimensions", make, inputs, 12, grows=grows))
    assert result["error"] is None and result["syncs"] == [0, 0]
    assert result["launching"] == [count, count]
    assert sum(op in ("aten.clone.default", "aten.copy_.default") for op in result["ops"]) == copies


def logged(operation):
    with launch_bench.LaunchLog() as log:
        operation()
    return log


@pytest.fixture
def x():
    return torch.empty(8, 4, device="meta")


def test_views_launch_nothing_and_ops_launch_one_each(x):
    assert logged(lambda: x.add(1).mul(2).view(-1)).launching == ["aten.add.Tensor", "aten.mul.Tensor"]
    assert logged(lambda: x.view(-1)).launching == []
    assert logged(lambda: x[1:].t().unsqueeze(0).expand(2, 4, 7)).launching == []


def test_reshape_of_a_strided_view_copies_once(x):
    log = logged(lambda: x.t().reshape(-1))  # clone, then _unsafe_view of the copy (no kernel)
    assert log.launching == ["aten.clone.default"]
    assert [op.name for op in log.ops] == ["aten.t.default", "aten.clone.default", "aten._unsafe_view.default"]


def test_in_place_and_out_ops_launch(x):
    assert logged(lambda: x.add_(1)).launching == ["aten.add_.Tensor"]
    out = torch.empty(8, 4, device="meta")
    assert logged(lambda: torch.mul(x, 2, out=out)).launching == ["aten.mul.out"]


def test_allocations_and_host_tensors_launch_nothing(x):
    log = logged(lambda: (torch.empty(3, device="meta"), torch.empty_like(x), x.new_empty(2), torch.ones(3).add(1)))
    assert log.launching == []
    assert len(log.ops) == 5  # empty, empty_like, new_empty, ones, add: all seen, none launching


def test_host_scalar_tensor_is_an_argument_not_a_launch(x):
    log = logged(lambda: x.add(torch.tensor(2.0)))
    assert log.launching == ["aten.add.Tensor"]
    assert log.syncs == []


def test_sync_class_ops_are_counted_even_when_meta_refuses_them(x):
    log = launch_bench.LaunchLog()
    with contextlib.suppress(NotImplementedError), log:  # torch 1.13 has no meta kernel for nonzero
        x.nonzero()
    assert log.syncs == ["aten.nonzero.default"]
    assert log.launching == ["aten.nonzero.default"]


def test_copies_between_host_and_device_are_sync_class(x):
    assert logged(lambda: torch.ones(3).to("meta")).syncs == ["aten._to_copy.default"]
    assert logged(lambda: x.to(torch.float64)).syncs == []
    assert logged(lambda: x.to(torch.float64)).launching == ["aten._to_copy.default"]


def test_signature_keeps_scalars_and_shapes_and_host_values(x):
    def signature(operation):
        return logged(operation).signature

    assert signature(lambda: x.add(1)) == signature(lambda: x.add(1))
    assert signature(lambda: x.add(1)) != signature(lambda: x.add(2))
    assert signature(lambda: x.sum(0)) != signature(lambda: torch.empty(8, 5, device="meta").sum(0))
    assert signature(lambda: x.add(torch.tensor(1.0))) != signature(lambda: x.add(torch.tensor(2.0)))
    assert signature(lambda: x.add(float("nan"))) == signature(lambda: x.add(float("nan")))
    assert signature(lambda: x.add(1))[0] == ("aten.add.Tensor", (("tensor", "torch.float32", (8, 4), "meta"), 1), ())


def test_first_difference_names_the_op():
    assert launch_bench.first_difference([("a", 1)], [("a", 1)]) is None
    assert launch_bench.first_difference([("a", 1), ("b", 2)], [("a", 1), ("b", 3)]) == (1, "('b', 2)", "('b', 3)")
    assert launch_bench.first_difference([("a", 1)], []) == (0, "('a', 1)", "None")


def test_table_reports_counts_budget_and_reference():
    row = {"configuration": "MeanMetric warn, value (4096,)", "launching": [39, 39], "syncs": [0, 0],
           "replay_invariant": True, "budget": 10, "budget_met": False, "reference": "12 (2 syncs)", "error": None}
    assert launch_bench.table_row(row) == (
        "| MeanMetric warn, value (4096,) | 39 | 0 | yes | no (≤ 10) | 12 (2 syncs) |")
    assert launch_bench.problems([row]) == []
    assert launch_bench.problems([dict(row, syncs=[1, 1])]) == [
        "MeanMetric warn, value (4096,): sync-class ops [1, 1]"]
    grown = dict(row, grows=True, replay_invariant=False, first_difference=None)
    assert "| no: its state grows |" in launch_bench.table_row(grown)
    assert launch_bench.problems([grown]) == []
    assert launch_bench.problems([dict(grown, first_difference=(3, "a", "b"))]) == [
        "MeanMetric warn, value (4096,): not replay-invariant at (3, 'a', 'b')"]


class ReadsBack:
    """A metric whose update reads a value back to the host."""

    def to(self, device):
        return self

    def update(self, value):
        value.sum().item()


class CountsOnTheHost:
    """A metric whose update passes a host counter to a kernel: a replay would freeze the counter."""

    def to(self, device):
        self.total, self.updates = torch.zeros((), device=device), 0
        return self

    def update(self, value):
        self.updates += 1
        self.total.add_(value.sum(), alpha=self.updates)


def measured(metric_class):
    inputs = lambda: (torch.empty(4, device="meta"),)  # noqa: E731
    return launch_bench.measure(launch_bench.Config(metric_class.__name__, metric_class, inputs, 10))


def test_measure_reports_a_sync_class_op_as_an_error():
    result = measured(ReadsBack)
    assert result["error"] == "sync-class op aten._local_scalar_dense.default (meta has no data for it)"
    assert launch_bench.problems([result]) == [
        "ReadsBack: sync-class op aten._local_scalar_dense.default (meta has no data for it)"]


def test_measure_finds_an_argument_that_changes_between_updates():
    result = measured(CountsOnTheHost)
    assert result["launching"] == [2, 2]  # sum, add_
    assert not result["replay_invariant"]
    scalar = "('tensor', 'torch.float32', (), 'meta')"
    assert result["first_difference"] == (1, f"('aten.add_.Tensor', ({scalar}, {scalar}), (('alpha', 2),))",
                                          f"('aten.add_.Tensor', ({scalar}, {scalar}), (('alpha', 3),))")


def test_copies_of_small_batches_and_masks_of_large_ones():
    """An unweighted update adds k + 1 copies of its pieces (top_k = k; no op masks the dropped rows)
    while they stay within 2^22 (9 per row and copy); a larger batch adds one copy, A + B * wrong,
    and masks the dropped rows (one op more; top_k > 1 two: wrong is every flag)."""
    import nosync_metrics as nm

    def measured_rows(k, m):
        make = launch_bench.collection(nm, "Multiclass", num_classes=3, top_k=k)
        inputs = lambda: (launch_bench.meta(m, 3), launch_bench.meta(m, dtype=torch.int64))  # noqa: E731
        return launch_bench.measure(launch_bench.Config(f"top_k={k}, {m} rows", make, inputs, 12))

    for k, more in ((1, ["aten.masked_fill_.Scalar"]), (2, ["aten.all.out", "aten.masked_fill_.Scalar"])):
        small, large = measured_rows(k, 128), measured_rows(k, 240000)  # 9 * 2 * 240000 > 2^22
        assert small["error"] is None and large["error"] is None
        assert not set(more) & set(small["ops"]) and set(more) <= set(large["ops"])
        assert large["launching"] == [n + len(more) for n in small["launching"]]
