"""What every nosync_metrics metric class adds to its C++ metric: TorchMetrics' constructor
arguments (kept for clone() and repr()) and TorchMetrics' distributed behaviour."""

import inspect

from . import _C
from .distributed import Syncable

_P = inspect.Parameter


def arg(name, default=_P.empty, kind=_P.POSITIONAL_OR_KEYWORD):
    return _P(name, kind, default=default)


#: TorchMetrics' distributed keyword arguments, taken by every metric.
DISTRIBUTED = [arg("sync_on_compute", True, _P.KEYWORD_ONLY), arg("dist_sync_on_step", False, _P.KEYWORD_ONLY),
               arg("process_group", None, _P.KEYWORD_ONLY)]


class PythonMetric(Syncable):
    """Mixed into every metric class in front of its C++ base.

    With torch.distributed initialized and more than one rank, compute() returns the value over
    every rank (``sync_on_compute=True``, the default) and leaves the local state as it was;
    forward() returns the batch value over every rank with ``dist_sync_on_step=True``.
    """

    def _core_for_sync(self):
        return self

    def _sync_group(self):
        return getattr(self, "_sync_group_override", None) or self.process_group

    def _sync_name(self):
        return self.metric_name

    def compute(self):
        if self.sync_on_compute and self._sync_cache is None and self._world_size() > 1:
            return self._synced_core().compute()
        return super().compute()

    def forward(self, *args, **kwargs):
        if not (self.dist_sync_on_step and self._world_size() > 1):
            return super().forward(*args, **kwargs)
        batch = self.clone()
        batch.reset()
        batch.update(*args, **kwargs)
        self._merge_appended(batch)
        return batch._synced_core().compute()

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def clone(self):
        """A deep copy: same arguments, same state."""
        copy = type(self)(**self._arguments)
        copy.to(self.device)
        copy.load_state_dict(self.state_dict())
        return copy

    def __copy__(self):
        return self.clone()

    def __deepcopy__(self, memo):
        return self.clone()

    def __repr__(self):
        shown = ", ".join(f"{k}={v!r}" for k, v in self._arguments.items()
                          if k in self._shown_always or v != self._defaults[k])
        return f"{type(self).__name__}({shown})"


def metric_class(name, base, parameters, construct, doc, shown_always=()):
    """A class named `name` on the C++ metric `base`, whose __init__ takes `parameters`
    (TorchMetrics' names and defaults) plus DISTRIBUTED, and calls construct(self, arguments)."""
    signature = inspect.Signature([arg("self")] + list(parameters) + DISTRIBUTED)

    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        del arguments["self"]
        construct(self, arguments)
        self.lock_updates(True)  # update() releases the GIL: Python threads may update at once
        self._arguments = arguments
        self.sync_on_compute = bool(arguments["sync_on_compute"])
        self.dist_sync_on_step = bool(arguments["dist_sync_on_step"])
        self.process_group = arguments["process_group"]

    __init__.__signature__ = signature
    defaults = {p.name: p.default for p in signature.parameters.values() if p.name != "self"}
    namespace = {"__init__": __init__, "__doc__": doc, "__module__": "nosync_metrics", "_defaults": defaults,
                 "_shown_always": tuple(shown_always)}
    return type(name, (PythonMetric, base), namespace)
