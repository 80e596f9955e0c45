"""MetricCollection, as in TorchMetrics: named metrics updated and computed together.

With ``compute_groups=True`` (the default), nosync-metrics' classification metrics whose counting
options match share one state, worked out from their options when they are added (no trial
update, no comparison of states, no sync); each state is updated once per batch. Other metrics
are updated one by one with the same arguments.
"""

from . import _C


class MetricCollection:
    def __init__(self, metrics, *additional_metrics, prefix=None, postfix=None, compute_groups=True):
        self.prefix = self._check_affix(prefix, "prefix")
        self.postfix = self._check_affix(postfix, "postfix")
        self._compute_groups = bool(compute_groups)
        self._metrics = {}
        self._shared = _C.ClassificationCollection()
        self._shared_names = []
        self._other_names = []
        self.add_metrics(metrics, *additional_metrics)

    @staticmethod
    def _check_affix(value, name):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"MetricCollection: expected `{name}` to be a string, got {type(value)}")
        return value

    def add_metrics(self, metrics, *additional_metrics):
        """Adds metrics: a dict (names from its keys), or metrics (named after their class)."""
        if isinstance(metrics, dict):
            if additional_metrics:
                raise ValueError("MetricCollection: give further metrics inside the dict, not after it")
            named = list(metrics.items())
        else:
            items = list(metrics) if isinstance(metrics, (list, tuple)) else [metrics]
            named = [(type(m).__name__, m) for m in items + list(additional_metrics)]
        for name, metric in named:
            self._add(name, metric)

    def _add(self, name, metric):
        if not isinstance(name, str):
            raise ValueError(f"MetricCollection: metric names must be strings, got {name!r}")
        if name in self._metrics:
            raise ValueError(f"MetricCollection: encountered two metrics both named {name}")
        if not callable(getattr(metric, "update", None)) or not callable(getattr(metric, "compute", None)):
            raise ValueError(f"MetricCollection: {name} is not a metric (it needs update() and compute())")
        self._metrics[name] = metric
        if self._compute_groups and isinstance(metric, _C.ClassificationMetric):
            self._shared.add(name, metric)
            self._shared_names.append(name)
        else:
            self._other_names.append(name)

    def _key(self, name):
        return f"{self.prefix or ''}{name}{self.postfix or ''}"

    def update(self, *args, **kwargs):
        """Updates every metric with the same arguments; shared states once each."""
        if self._shared_names:
            self._shared.update(*args, **kwargs)
        for name in self._other_names:
            self._metrics[name].update(*args, **kwargs)

    def compute(self):
        """name -> value, in the order the metrics were added (prefix and postfix applied)."""
        shared = self._shared.compute() if self._shared_names else {}
        return {self._key(name): shared[name] if name in shared else self._metrics[name].compute()
                for name in self._metrics}

    def forward(self, *args, **kwargs):
        """Accumulates, and returns each metric's value on this batch alone."""
        shared = self._shared.forward(*args, **kwargs) if self._shared_names else {}
        return {self._key(name): shared[name] if name in shared else self._metrics[name](*args, **kwargs)
                for name in self._metrics}

    __call__ = forward

    def reset(self):
        self._shared.reset()
        for name in self._other_names:
            self._metrics[name].reset()

    def to(self, device):
        for metric in self._metrics.values():
            metric.to(device)
        return self

    def state_dict(self):
        return {f"{name}.{key}": value for name, metric in self._metrics.items()
                for key, value in metric.state_dict().items()}

    def load_state_dict(self, state_dict):
        parts = {name: {} for name in self._metrics}
        for key, value in state_dict.items():
            name, _, state = key.partition(".")
            if name not in parts:
                raise ValueError(f"MetricCollection.load_state_dict: unexpected key '{key}'")
            parts[name][state] = value
        for name, part in parts.items():  # check on copies first: a bad dict changes nothing
            self._metrics[name].clone().load_state_dict(part)
        for name, part in parts.items():
            self._metrics[name].load_state_dict(part)

    def clone(self, prefix=None, postfix=None):
        """A deep copy (sharing states between the same metrics), with an optional new prefix/postfix."""
        fresh = {}
        for name, metric in self._metrics.items():
            fresh[name] = metric.clone()
            fresh[name].reset()  # fresh metrics can share states; the states are loaded below
        copy = MetricCollection(fresh, prefix=prefix if prefix is not None else self.prefix,
                                postfix=postfix if postfix is not None else self.postfix,
                                compute_groups=self._compute_groups)
        copy.load_state_dict(self.state_dict())
        return copy

    def check(self):
        """Raises or warns if any metric's update() counted bad input."""
        if self._shared_names:
            self._shared.check()
        for name in self._other_names:
            if hasattr(self._metrics[name], "check"):
                self._metrics[name].check()

    @property
    def compute_groups(self):
        """{group: [names]}: the metrics that share a state, as TorchMetrics reports them."""
        groups = [list(g) for g in self._shared.groups()] if self._shared_names else []
        groups += [[name] for name in self._other_names]
        return dict(enumerate(groups))

    def keys(self):
        return [self._key(name) for name in self._metrics]

    def values(self):
        return list(self._metrics.values())

    def items(self):
        return [(self._key(name), metric) for name, metric in self._metrics.items()]

    def __getitem__(self, name):
        return self._metrics[name]

    def __contains__(self, name):
        return name in self._metrics

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return len(self._metrics)

    def __repr__(self):
        inner = ",\n".join(f"  {name}: {metric!r}" for name, metric in self._metrics.items())
        return f"MetricCollection(\n{inner}\n)"
