"""TorchMetrics' import path for MetricCollection (``torchmetrics.collections``): the class of
``nosync_metrics.MetricCollection``, so that porting ``from torchmetrics.collections import
MetricCollection`` is an import change."""

from .collection import MetricCollection

__all__ = ["MetricCollection"]
