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
    with pytest.raises(ValueError, match="weight given, but the metric counts without weights"):
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
