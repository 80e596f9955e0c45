"""TorchMetrics' aggregators (MeanMetric, SumMetric, MinMetric, MaxMetric) on the C++ ones.

Values come back in the metric's dtype, as TorchMetrics' do: torch.get_default_dtype() when it is
made, then what set_dtype() chooses. ``dtype=`` (ours: TorchMetrics has none; float64 or float32)
chooses the values' dtype until set_dtype(), and a C++ metric's: MinMetric and MaxMetric keep their
state in it, MeanMetric and SumMetric accumulate in float64 whatever it is and round their value.
"""

import numbers

import torch

from . import _C
from .metric import _P, arg, check_device, check_real, metric_class

_PARAMETERS = [arg("nan_strategy", "warn"), arg("dtype", None, _P.KEYWORD_ONLY), arg("device", None, _P.KEYWORD_ONLY)]
_WEIGHTED_UPDATE = [arg("value"), arg("weight", 1.0)]  # SumMetric's weight is ours: the sum of value * weight
_UPDATE = [arg("value")]
_NAN_STRATEGIES = ("error", "warn", "ignore", "disable")
_UPDATE_DOC = ("Accumulates value (a tensor, a number, a NumPy array or a list){}. NaN values are handled by "
               "nan_strategy. Never synchronizes.")


def _construct(base):
    def construct(self, a):
        who = type(self).__name__
        nan_strategy = a["nan_strategy"]
        if isinstance(nan_strategy, bool) or not isinstance(nan_strategy, (str, numbers.Real)) or (
                isinstance(nan_strategy, str) and nan_strategy not in _NAN_STRATEGIES):
            raise ValueError(f"{who}: Arg `nan_strategy` should either be a float or one of "
                             f"{list(_NAN_STRATEGIES)} but got {nan_strategy!r}.")
        if not isinstance(nan_strategy, str):
            nan_strategy = check_real(who, "nan_strategy", nan_strategy)
        if a["dtype"] is not None and not isinstance(a["dtype"], torch.dtype):
            raise TypeError(f"{who}: dtype must be a torch.dtype, got {a['dtype']!r} ({type(a['dtype']).__name__})")
        base.__init__(self, nan_strategy, dtype=a["dtype"], device=check_device(who, "device", a["device"]))
        if a["dtype"] is not None:
            self._dtype = a["dtype"]

    return construct


def _aggregator(name, base, update, full_state_update):
    # TorchMetrics 1.6's BaseAggregator: is_differentiable and higher_is_better None; Max and Min
    # set full_state_update = True.
    attributes = {"is_differentiable": None, "higher_is_better": None, "full_state_update": full_state_update}
    doc = _UPDATE_DOC.format(", weighted by weight" if len(update) > 1 else "")
    return metric_class(name, base, _PARAMETERS, _construct(base), base.__doc__, update=update, update_doc=doc,
                        attributes=attributes, options={"nan_strategy": _P.empty})


MeanMetric = _aggregator("MeanMetric", _C.MeanMetric, _WEIGHTED_UPDATE, False)
SumMetric = _aggregator("SumMetric", _C.SumMetric, _WEIGHTED_UPDATE, False)
MinMetric = _aggregator("MinMetric", _C.MinMetric, _UPDATE, True)
MaxMetric = _aggregator("MaxMetric", _C.MaxMetric, _UPDATE, True)
