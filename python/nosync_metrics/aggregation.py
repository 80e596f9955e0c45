"""TorchMetrics' aggregators (MeanMetric, SumMetric, MinMetric, MaxMetric) on the C++ ones."""

from . import _C
from .metric import _P, arg, metric_class

_PARAMETERS = [arg("nan_strategy", "warn"), arg("dtype", None, _P.KEYWORD_ONLY), arg("device", None, _P.KEYWORD_ONLY)]


def _aggregator(name, base, doc):
    def construct(self, a):
        base.__init__(self, a["nan_strategy"], dtype=a["dtype"], device=a["device"])

    return metric_class(name, base, _PARAMETERS, construct, doc)


MeanMetric = _aggregator("MeanMetric", _C.MeanMetric, _C.MeanMetric.__doc__)
SumMetric = _aggregator("SumMetric", _C.SumMetric, _C.SumMetric.__doc__)
MinMetric = _aggregator("MinMetric", _C.MinMetric, _C.MinMetric.__doc__)
MaxMetric = _aggregator("MaxMetric", _C.MaxMetric, _C.MaxMetric.__doc__)
