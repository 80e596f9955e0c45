"""Bad input raises ValueError / TypeError / IndexError with the metric and the argument named,
and leaves the state exactly as it was."""

import pytest
import torch

import nosync_metrics as nm


def _same_state(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_aggregator_errors():
    m = nm.MeanMetric()
    m.update(torch.tensor([1.0, 2.0]))
    before = m.state_dict()
    with pytest.raises(ValueError, match=r"Mean.update: weight of shape \[2\] is not broadcastable to value of shape \[3\]"):
        m.update(torch.ones(3), torch.ones(2))
    with pytest.raises(TypeError, match="Mean.update: value has dtype ComplexFloat"):
        m.update(torch.ones(3, dtype=torch.complex64))
    with pytest.raises(TypeError, match="Mean.update: value must be a torch.Tensor, a number, a NumPy array or scalar, "
                                        "or a list, got <class 'str'>"):
        m.update("1.0")
    with pytest.raises(TypeError, match="Mean.update: weight could not be read as a tensor"):
        m.update(torch.ones(2), [1.0, "x"])
    with pytest.raises(ValueError, match="Mean.update: value is on meta but the metric's state is on cpu"):
        m.update(torch.ones(2, device="meta"))
    with pytest.raises(ValueError, match="MeanMetric: Arg `nan_strategy` should either .* but got 'skip'"):
        nm.MeanMetric(nan_strategy="skip")
    with pytest.raises(TypeError, match="Mean: dtype must be float64 or float32"):
        nm.MeanMetric(dtype=torch.float16)
    # a ValueError, as TorchMetrics raises it
    with pytest.raises(ValueError, match="MeanMetric.merge_state: expected incoming state to be an instance of "
                                         "MeanMetric, got SumMetric"):
        m.merge_state(nm.SumMetric())
    assert _same_state(m.state_dict(), before)


def test_classification_errors():
    m = nm.MulticlassPrecision(num_classes=3)
    m.update(torch.tensor([0, 1]), torch.tensor([0, 2]))
    before = m.state_dict()
    with pytest.raises(ValueError, match=r"MulticlassPrecision.update: preds has shape \[4, 3\] but target has \[3\]"):
        m.update(torch.randn(4, 3), torch.tensor([0, 1, 2]))
    with pytest.raises(TypeError, match="target has dtype ComplexFloat"):
        m.update(torch.tensor([0, 1]), torch.tensor([0.0, 1.0], dtype=torch.cfloat))
    with pytest.raises(TypeError, match=r"a weight was given \(the third argument or weight=\), but the metric counts "
                       "without weights"):
        m.update(torch.tensor([0, 1]), torch.tensor([0, 1]), torch.ones(2))
    assert _same_state(m.state_dict(), before)
    with pytest.raises(ValueError, match="MulticlassAccuracy: num_classes must be at least 2"):
        nm.MulticlassAccuracy(num_classes=1)
    with pytest.raises(ValueError, match="MulticlassRecall: top_k = 5 is larger than num_classes = 3"):
        nm.MulticlassRecall(num_classes=3, top_k=5)
    with pytest.raises(ValueError, match=r"BinaryF1Score: threshold must be in \[0, 1\]"):
        nm.BinaryF1Score(threshold=1.5)
    with pytest.raises(ValueError, match="average must be 'micro', 'macro', 'weighted', 'none' or None"):
        nm.MulticlassF1Score(num_classes=3, average="samples")
    with pytest.raises(ValueError, match="multidim_average must be 'global' or 'samplewise'"):
        nm.MulticlassF1Score(num_classes=3, multidim_average="per_sample")
    with pytest.raises(ValueError, match="normalize must be"):
        nm.MulticlassConfusionMatrix(num_classes=3, normalize="rows")
    # num_classes defaults to None, as in TorchMetrics 1.6.3, which only average="micro" takes
    with pytest.raises(ValueError, match="MulticlassAccuracy: num_classes can only be None"):
        nm.MulticlassAccuracy()
    with pytest.raises(TypeError):
        nm.MulticlassF1Score()  # required there, as in TorchMetrics


SHAPE_MISMATCHES = {  # TorchMetrics raises a RuntimeError for each (its _check_same_shape, or a torch op)
    "binary": (nm.BinaryAccuracy, (torch.rand(8, 1), torch.randint(0, 2, (8,))), "preds has shape"),
    "multilabel": (lambda: nm.MultilabelF1Score(3), (torch.rand(4, 3), torch.randint(0, 2, (4, 2))), "preds has shape"),
    "multiclass batch": (lambda: nm.MulticlassAccuracy(3), (torch.randn(8, 3), torch.randint(0, 3, (7,))),
                         "preds has shape"),
    "multiclass labels": (lambda: nm.MulticlassRecall(3), (torch.tensor([0, 1]), torch.tensor([0, 1, 2])),
                          "preds has shape"),
    "weighted classes": (lambda: nm.MulticlassPrecision(3, weighted=True),
                         (torch.tensor([0, 1]), torch.tensor([0, 1]), torch.ones(3)), "weight has shape"),
    "mean weight": (nm.MeanMetric, (torch.ones(3), torch.ones(2)), "is not broadcastable"),
}


@pytest.mark.parametrize("case", SHAPE_MISMATCHES)
def test_shapes_that_do_not_fit_raise_a_shape_error_a_value_and_runtime_error(case):
    make, args, message = SHAPE_MISMATCHES[case]
    metric = make()
    before = metric.state_dict()
    with pytest.raises(nm.ShapeError, match=message) as raised:
        metric.update(*args)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, RuntimeError)
    assert str(raised.value).startswith(type(metric).__name__.replace("Metric", "") if case == "mean weight"
                                        else type(metric).__name__)
    with pytest.raises(RuntimeError, match=message):  # as a TorchMetrics user catches it
        metric(*args)
    assert _same_state(metric.state_dict(), before)


FORWARD_REFUSALS = {  # refused by the bindings' conversion, the argument binding or the metric's checks
    "weight shape": (nm.MeanMetric, (torch.ones(3),), {"weight": torch.ones(2)}),
    "string": (nm.MeanMetric, ("1.0",), {}),
    "None": (nm.MeanMetric, (None, torch.ones(2)), {}),
    "int too large": (nm.MeanMetric, (10**400,), {}),
    "unexpected keyword": (lambda: nm.MulticlassAccuracy(3), (torch.zeros(2, dtype=torch.long),) * 2, {"bogus": 1}),
    "preds shape": (lambda: nm.MulticlassAccuracy(3), (torch.ones(3, 2), torch.zeros(3, dtype=torch.long)), {}),
    "collection member": (lambda: nm.MetricCollection({"m": nm.MeanMetric()}), (torch.ones(3), torch.ones(2)), {}),
    "collection argument": (lambda: nm.MetricCollection({"m": nm.MeanMetric()}), (), {"value": "x"}),
}


@pytest.mark.parametrize("case", FORWARD_REFUSALS)
def test_forward_names_itself_where_it_refuses_an_argument(case):
    make, args, kwargs = FORWARD_REFUSALS[case]
    _refused_as_update_renamed(make(), args, kwargs)


class _Twice(nm.MeanMetric):
    def compute(self):
        return 2 * super().compute()


def test_forward_names_itself_where_a_grouped_metric_or_a_subclass_refuses():
    """A metric sharing its state in a compute group checks the batch before it takes a state of its
    own; a subclass's forward() runs its update(), the generated one here."""
    grouped = nm.MetricCollection({"a": nm.MeanMetric(), "b": nm.MeanMetric()})
    for metric in (grouped["a"], _Twice(), nm.MetricCollection({"twice": _Twice()})):
        _refused_as_update_renamed(metric, (torch.ones(3), torch.ones(2)), {})
        _refused_as_update_renamed(metric, ("x",), {})
    assert grouped.compute_groups == {0: ["a", "b"]}  # (refused before it left its group)


def _refused_as_update_renamed(metric, args, kwargs):
    before = metric.state_dict()
    with pytest.raises(Exception) as by_update:
        metric.update(*args, **kwargs)
    with pytest.raises(type(by_update.value)) as by_forward:
        metric(*args, **kwargs)
    update_message = str(by_update.value)
    assert ".update: " in update_message
    assert str(by_forward.value) == update_message.replace(".update: ", ".forward: ", 1)
    with pytest.raises(type(by_update.value), match=".update: "):  # the next update's refusal names update again
        metric.update(*args, **kwargs)
    assert _same_state(metric.state_dict(), before)


def test_deferred_reports_become_warnings_or_errors():
    m = nm.MeanMetric()
    m.update(torch.tensor([float("nan"), 1.0]))
    with pytest.warns(UserWarning, match="Mean: 1 NaN value in 1 update, first at update 0"):
        m.check()
    c = nm.BinaryAccuracy()
    c.update(torch.tensor([0.2, 0.9]), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="BinaryAccuracy: 1 target not 0 or 1 in 1 update"):
        c.compute()


def test_a_null_metric_is_rejected():
    from nosync_metrics import _C
    c = _C.MetricCollectionCore()
    with pytest.raises(ValueError, match="is null"):
        c.add("x", None)


@pytest.mark.parametrize("make, args", [
    (lambda: nm.MulticlassAccuracy(num_classes=3), lambda p, t: (p, t)),
    (lambda: nm.MulticlassAccuracy(num_classes=3, weighted=True), lambda p, t: (p, t, torch.ones(len(t)))),
    (lambda: nm.MeanMetric(), lambda p, t: (p[:, 0], torch.ones(len(t)))),
], ids=["preds", "weighted", "Mean"])
@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_sparse_mkldnn_and_nested_inputs_are_refused_naming_the_argument(make, args):
    preds, target = torch.randn(6, 3), torch.randint(0, 3, (6,))
    m = make()
    m.update(*args(preds, target))
    before = m.state_dict()
    dense = args(preds, target)
    for i, arg in enumerate(dense):
        name = ["value", "weight"][i] if isinstance(m, nm.MeanMetric) else ["preds", "target", "weight"][i]
        for strange, layout in [(arg.to_sparse(), "Sparse"), (arg.float().to_mkldnn(), "Mkldnn")]:
            with pytest.raises(TypeError, match=f"{name} has layout {layout}; expected a dense tensor"):
                m.update(*dense[:i], strange, *dense[i + 1:])
        nested = torch.nested.nested_tensor([arg, arg]) if hasattr(torch, "nested") else None
        if nested is not None and i == 0:
            with pytest.raises(TypeError, match=f"{name} is a nested tensor; expected a dense tensor"):
                m.update(nested, *dense[1:])
    assert _same_state(m.state_dict(), before)


def test_an_int_beyond_float64_is_refused_naming_the_argument():
    m = nm.MeanMetric()
    m.update(1.0)
    before = m.state_dict()
    with pytest.raises(ValueError, match="Mean.update: value is an int too large for a float64"):
        m.update(10**400)
    with pytest.raises(ValueError, match="Mean.update: weight is an int too large for a float64"):
        m.update(torch.ones(2), 10**400)
    with pytest.raises(ValueError, match="MetricCollection.update: value is an int too large for a float64"):
        nm.MetricCollection([nm.MeanMetric()]).update(value=10**400)
    assert _same_state(m.state_dict(), before)


@pytest.mark.parametrize("byte, shown", [(0xFF, r"\\xff"), (0, r"\\x00")], ids=["not UTF-8", "NUL"])
def test_a_header_edited_into_bytes_that_are_not_printable_is_quoted_escaped(byte, shown):
    m = nm.MulticlassAccuracy(num_classes=3)
    state = m.state_dict()
    header = state["_metric"].clone()
    header[5] = byte
    state["_metric"] = header
    before = m.state_dict()
    with pytest.raises(ValueError, match=r"MulticlassAccuracy.load_state_dict: the state is of another metric: "
                                         r"it has 'Multi" + shown + r"lassAccuracy\(num_classes=3.*' against"):
        m.load_state_dict(state)
    assert _same_state(m.state_dict(), before)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch without CUDA")
@pytest.mark.parametrize("make, message", [
    (lambda: nm.MeanMetric(device="cuda"), "Mean: could not allocate the state on cuda"),
    (lambda: nm.MulticlassAccuracy(num_classes=5, device="cuda"),
     "MulticlassAccuracy: could not allocate the state for num_classes = 5 on cuda"),
    (lambda: nm.MulticlassAccuracy(num_classes=None, average="micro", device="cuda"),
     "MulticlassAccuracy: could not allocate the state for num_classes = None on cuda"),
    (lambda: nm.MultilabelF1Score(num_labels=4, device="cuda"),
     "MultilabelF1Score: could not allocate the state for num_labels = 4 on cuda"),
    (lambda: nm.BinaryAccuracy(device="cuda"), "BinaryAccuracy: could not allocate the state on cuda"),
])
def test_a_metric_that_cannot_allocate_its_state_says_which(make, message):
    with pytest.raises(RuntimeError, match=message):
        make()


def test_bad_input_of_a_meta_metric_says_it_holds_no_values():
    m = nm.MulticlassAccuracy(num_classes=3, device="meta")
    with pytest.raises(ValueError, match="MulticlassAccuracy.bad_input: the state is on meta, which holds no values"):
        m.bad_input()


def test_an_int_beyond_float64_as_an_option_is_refused_naming_it():
    with pytest.raises(ValueError, match="MeanMetric: nan_strategy is an int too large for a float64"):
        nm.MeanMetric(nan_strategy=10**400)
    with pytest.raises(ValueError, match="BinaryAccuracy: threshold is an int too large for a float64"):
        nm.BinaryAccuracy(threshold=10**400)
    assert nm.MeanMetric(nan_strategy=2).nan_strategy == 2  # an int within range is a replacement, as before
