"""nosync-metrics: TorchMetrics-compatible metrics whose update() never synchronizes.

Adopting it is an import change::

    from nosync_metrics import MeanMetric, MulticlassAccuracy, MetricCollection, count_syncs

State lives in tensors on the metric's device, allocated once; update() reads nothing back and
makes no tensor from host data. NaN values and bad labels are counted on the device and reported
by compute() or check(). count_syncs() counts the sync points of any block of code.
"""

import torch  # noqa: F401  (loads libtorch and its Python bindings before the extension)

from ._C import ClassificationMetric, Metric, ShapeError, __version__
from .aggregation import MaxMetric, MeanMetric, MinMetric, SumMetric
from .classification import (
    Accuracy,
    BinaryAccuracy,
    BinaryConfusionMatrix,
    BinaryF1Score,
    BinaryFBetaScore,
    BinaryPrecision,
    BinaryRecall,
    BinaryStatScores,
    ConfusionMatrix,
    F1Score,
    FBetaScore,
    MulticlassAccuracy,
    MulticlassConfusionMatrix,
    MulticlassF1Score,
    MulticlassFBetaScore,
    MulticlassPrecision,
    MulticlassRecall,
    MulticlassStatScores,
    MultilabelAccuracy,
    MultilabelConfusionMatrix,
    MultilabelF1Score,
    MultilabelFBetaScore,
    MultilabelPrecision,
    MultilabelRecall,
    MultilabelStatScores,
    Precision,
    Recall,
    StatScores,
)
from .collection import MetricCollection
from .metric import StateDictError
from .sync import count_syncs, sync_class_ops

__all__ = [
    "Accuracy",
    "BinaryAccuracy",
    "BinaryConfusionMatrix",
    "BinaryF1Score",
    "BinaryFBetaScore",
    "BinaryPrecision",
    "BinaryRecall",
    "BinaryStatScores",
    "ClassificationMetric",
    "ConfusionMatrix",
    "F1Score",
    "FBetaScore",
    "MaxMetric",
    "MeanMetric",
    "Metric",
    "MetricCollection",
    "MinMetric",
    "MulticlassAccuracy",
    "MulticlassConfusionMatrix",
    "MulticlassF1Score",
    "MulticlassFBetaScore",
    "MulticlassPrecision",
    "MulticlassRecall",
    "MulticlassStatScores",
    "MultilabelAccuracy",
    "MultilabelConfusionMatrix",
    "MultilabelF1Score",
    "MultilabelFBetaScore",
    "MultilabelPrecision",
    "MultilabelRecall",
    "MultilabelStatScores",
    "Precision",
    "Recall",
    "ShapeError",
    "StateDictError",
    "StatScores",
    "SumMetric",
    "count_syncs",
    "sync_class_ops",
]
