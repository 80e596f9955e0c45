"""Type stubs for nosync_metrics: TorchMetrics-compatible metrics whose update() never synchronizes.

Every runtime signature is checked against these by tests/python/test_stubs.py.
"""

import contextlib
from typing import Any, Callable, ClassVar, Dict, ItemsView, Iterator, KeysView, List, Literal, Mapping
from typing import Optional, Sequence, Tuple, TypeVar, Union, ValuesView

import torch
from torch import Tensor
from torch.nn.modules.module import _IncompatibleKeys

_Self = TypeVar("_Self")
_Task = Literal["binary", "multiclass", "multilabel"]
_Average = Optional[Literal["micro", "macro", "weighted", "none"]]
_MultidimAverage = Literal["global", "samplewise"]
_Normalize = Optional[Literal["true", "pred", "all", "none"]]
_NanStrategy = Union[Literal["error", "warn", "ignore", "disable"], float]
_Device = Union[str, torch.device, int, None]
_AvailableFn = Optional[Callable[[], bool]]
_Value = Union[Tensor, float, int, bool, Sequence[float], Any]  # Any: a NumPy array or scalar

__version__: str

class ShapeError(ValueError, RuntimeError):
    """Inputs whose shapes do not fit together (preds and target, a weight and the values)."""

class StateDictError(ValueError, RuntimeError):
    """A state dict that load_state_dict refuses (a missing or unexpected key, a value that does not fit)."""

class Metric(torch.nn.Module):
    """Base of every nosync-metrics metric; a torch.nn.Module, as TorchMetrics' Metric."""

    is_differentiable: ClassVar[Optional[bool]]
    higher_is_better: ClassVar[Optional[bool]]
    full_state_update: ClassVar[Optional[bool]]
    plot_lower_bound: ClassVar[Optional[float]]
    plot_upper_bound: ClassVar[Optional[float]]
    plot_legend_name: ClassVar[Optional[str]]
    compute_on_cpu: bool
    dist_sync_on_step: bool
    process_group: Optional[Any]
    dist_sync_fn: None
    distributed_available_fn: Callable[[], bool]
    sync_on_compute: bool
    compute_with_cache: bool

    @property
    def device(self) -> torch.device:
        """The device of the state."""
    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the metric's floating values (torch.get_default_dtype() when made, or set_dtype()'s)."""
    @property
    def update_count(self) -> int:
        """Updates since the metric was made or last reset (read back from the metric's device)."""
    @property
    def update_called(self) -> bool:
        """Whether update() or forward() ran since the metric was made or last reset."""
    @property
    def metric_name(self) -> str:
        """The name used in messages, e.g. 'MulticlassAccuracy'."""
    def update(self, *args: Any, **kwargs: Any) -> None:
        """Accumulates a batch. Never synchronizes."""
    def compute(self) -> Tensor:
        """The value over every update since the last reset, on the metric's device."""
    def forward(self, *args: Any, **kwargs: Any) -> Tensor:
        """Accumulates the batch, as update() does, and returns the value of this batch alone."""
    def __call__(self, *args: Any, **kwargs: Any) -> Tensor:
        """forward(): accumulates the batch and returns its value."""
    def reset(self) -> None:
        """Restores the state the metric was made with."""
    def set_dtype(self: _Self, dst_type: Union[str, torch.dtype]) -> _Self:
        """From now on every value comes back in dst_type; the state keeps its own dtype."""
    def type(self: _Self, dst_type: Union[str, torch.dtype]) -> _Self:
        """Does nothing, as in TorchMetrics: set_dtype() chooses the values' dtype."""
    def float(self: _Self) -> _Self:
        """Does nothing, as in TorchMetrics: set_dtype() chooses the values' dtype."""
    def double(self: _Self) -> _Self:
        """Does nothing, as in TorchMetrics: set_dtype() chooses the values' dtype."""
    def half(self: _Self) -> _Self:
        """Does nothing, as in TorchMetrics: set_dtype() chooses the values' dtype."""
    def merge_state(self, incoming_state: Union[Metric, Mapping[str, Tensor], Sequence[Any]]) -> None:
        """Folds in a metric of the same class and options, a state dict, or a list of them."""
    def persistent(self, mode: bool = False) -> None:
        """Whether a parent module's state_dict() holds this metric's state."""
    def state_dict(  # type: ignore[override]
        self, destination: Optional[Dict[str, Tensor]] = None, prefix: str = "", keep_vars: bool = False
    ) -> Dict[str, Tensor]:
        """name -> tensor: a copy of every state tensor and the metric's description."""
    def load_state_dict(  # type: ignore[override]
        self, state_dict: Mapping[str, Tensor], strict: bool = True, assign: bool = False
    ) -> _IncompatibleKeys:
        """Loads a dict from state_dict(), checking every key before changing any."""
    def to(self: _Self, *args: Any, **kwargs: Any) -> _Self:
        """Moves the state to a device, given as torch.nn.Module.to takes it."""
    def cpu(self: _Self) -> _Self:
        """to("cpu")."""
    def cuda(self: _Self, device: Union[int, torch.device, None] = None) -> _Self:
        """to("cuda") (or to CUDA device `device`)."""
    def check(self) -> None:
        """Raises or warns, as compute() would, if an update counted bad input."""
    def bad_input(self) -> Dict[str, Any]:
        """What the updates counted as bad input: {"counts": {...}, "updates": n, "first_update": i}."""
    def lock_updates(self, on: bool) -> None:
        """Whether update() takes a lock, so that several threads may update at once."""
    def clone(self: _Self) -> _Self:
        """A deep copy: same arguments, same state."""
    def sync(
        self,
        dist_sync_fn: None = None,
        process_group: Optional[Any] = None,
        should_sync: bool = True,
        distributed_available: _AvailableFn = None,
    ) -> None:
        """Replaces the local state by the state reduced over every rank; unsync() restores it."""
    def unsync(self, should_unsync: bool = True) -> None:
        """Restores the local state that sync() replaced."""
    def sync_context(
        self,
        dist_sync_fn: None = None,
        process_group: Optional[Any] = None,
        should_sync: bool = True,
        should_unsync: bool = True,
        distributed_available: _AvailableFn = None,
    ) -> contextlib.AbstractContextManager[Any]:
        """Synced state inside the block, local state after it."""

class ClassificationMetric(Metric):
    """Base of the classification metrics."""

    def update(self, preds: Tensor, target: Tensor, weight: Optional[Tensor] = None) -> None:
        """Counts a batch (with weighted=True, a weight per sample). Never synchronizes."""

class MetricCollection(torch.nn.Module):
    """Named metrics updated and computed together (TorchMetrics' MetricCollection)."""

    prefix: Optional[str]
    postfix: Optional[str]

    def __init__(
        self,
        metrics: Union[Metric, MetricCollection, Sequence[Union[Metric, MetricCollection]],
                       Dict[str, Union[Metric, MetricCollection]]],
        *additional_metrics: Union[Metric, MetricCollection],
        prefix: Optional[str] = None,
        postfix: Optional[str] = None,
        compute_groups: Union[bool, List[List[str]]] = True,
    ) -> None: ...
    def add_metrics(
        self,
        metrics: Union[Metric, MetricCollection, Sequence[Union[Metric, MetricCollection]],
                       Dict[str, Union[Metric, MetricCollection]]],
        *additional_metrics: Union[Metric, MetricCollection],
    ) -> None:
        """Adds metrics: a dict (names from its keys), or metrics (named after their class); a nested
        collection's metrics join under their keys in it."""
    def add_module(self, name: str, module: Optional[torch.nn.Module]) -> None:
        """torch.nn.Module's way in (add_module, register_module, an attribute set to a module): as
        add_metrics({name: module}), as TorchMetrics' collection (an nn.ModuleDict) takes a metric so."""
    def update(self, *args: Any, **kwargs: Any) -> None:
        """Updates every metric with the same arguments (keywords each by the names it takes)."""
    def compute(self) -> Dict[str, Tensor]:
        """name -> value, in the order the metrics were added (prefix and postfix applied)."""
    def forward(self, *args: Any, **kwargs: Any) -> Dict[str, Tensor]:
        """Accumulates, and returns each metric's value on this batch alone."""
    def __call__(self, *args: Any, **kwargs: Any) -> Dict[str, Tensor]:
        """forward()."""
    def reset(self) -> None:
        """Resets every metric."""
    def to(self: _Self, *args: Any, **kwargs: Any) -> _Self:
        """Moves every metric's state to a device, given as torch.nn.Module.to takes it."""
    def set_dtype(self: _Self, dst_type: Union[str, torch.dtype]) -> _Self:
        """set_dtype(dst_type) on every metric, as in TorchMetrics."""
    def persistent(self, mode: bool = True) -> None:
        """Sets persistent(mode) on every metric (True by default, as in TorchMetrics)."""
    def state_dict(  # type: ignore[override]
        self, destination: Optional[Dict[str, Tensor]] = None, prefix: str = "", keep_vars: bool = False
    ) -> Dict[str, Tensor]:
        """"<name>.<state>" -> tensor, for every metric."""
    def load_state_dict(  # type: ignore[override]
        self, state_dict: Mapping[str, Tensor], strict: bool = True, assign: bool = False
    ) -> _IncompatibleKeys:
        """Checks every part before loading any: a bad dict changes nothing."""
    def merge_state(self, other: MetricCollection) -> None:
        """Folds in a collection with the same metrics and groups; `other` is unchanged."""
    def clone(self: _Self, prefix: Optional[str] = None, postfix: Optional[str] = None) -> _Self:
        """A deep copy, with an optional new prefix/postfix."""
    def check(self) -> None:
        """Raises or warns if any metric's update() counted bad input."""
    @property
    def compute_groups(self) -> Dict[int, List[str]]:
        """{group: [names]}: the metrics that share a state (also when a list of groups was given)."""
    def keys(self, keep_base: bool = False) -> KeysView[str]:
        """The metrics' keys, with prefix and postfix (the names they were added under with keep_base=True)."""
    def items(self, keep_base: bool = False, copy_state: bool = True) -> ItemsView[str, Metric]:
        """(key, metric) pairs, as keys() names them."""
    def values(self, copy_state: bool = True) -> ValuesView[Metric]:
        """The metrics, in the order they were added."""
    def __getitem__(self, key: str, copy_state: bool = True) -> Metric:
        """The metric under `key`, given with or without prefix and postfix."""
    def __contains__(self, name: object) -> bool:
        """Whether a metric was added under `name`."""
    def __iter__(self) -> Iterator[str]:
        """The keys."""
    def __len__(self) -> int:
        """The number of metrics."""
    def sync(
        self,
        dist_sync_fn: None = None,
        process_group: Optional[Any] = None,
        should_sync: bool = True,
        distributed_available: _AvailableFn = None,
    ) -> None:
        """Replaces the local state by the state reduced over every rank; unsync() restores it."""
    def unsync(self, should_unsync: bool = True) -> None:
        """Restores the local state that sync() replaced."""
    def sync_context(
        self,
        dist_sync_fn: None = None,
        process_group: Optional[Any] = None,
        should_sync: bool = True,
        should_unsync: bool = True,
        distributed_available: _AvailableFn = None,
    ) -> contextlib.AbstractContextManager[Any]:
        """Synced state inside the block, local state after it."""

class count_syncs(contextlib.ContextDecorator):  # noqa: N801
    """Counts the ATen ops (and host reads) that would make the host wait for an accelerator."""

    strict: bool
    cuda_sync_debug: bool
    all_threads: bool

    def __init__(
        self, strict: bool = False, cuda_sync_debug: bool = False, all_threads: bool = False
    ) -> None: ...
    def __enter__(self: _Self) -> _Self: ...
    def __exit__(self, *exc: Any) -> bool: ...
    @property
    def total(self) -> int:
        """Sync-class ops counted so far (including a block still running)."""
    @property
    def by_op(self) -> Dict[str, int]:
        """{op name: count}, e.g. {'aten::item': 2}."""
    @property
    def cuda_syncs(self) -> int:
        """Synchronizations CUDA's sync debug mode reported (0 without CUDA)."""

def sync_class_ops() -> List[Tuple[str, str]]:
    """The ops count_syncs counts: a list of (name, why)."""

class Accuracy(Metric):
    """Accuracy(task=...): a task class."""

    def __new__(
        cls,
        task: _Task,
        threshold: float = 0.5,
        num_classes: Optional[int] = None,
        num_labels: Optional[int] = None,
        average: _Average = "micro",
        multidim_average: _MultidimAverage = "global",
        top_k: int = 1,
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        **kwargs: Any,
    ) -> Union[BinaryAccuracy, MulticlassAccuracy, MultilabelAccuracy]: ...


class BinaryAccuracy(ClassificationMetric):
    """Accuracy (TorchMetrics' semantics; macro by default)."""

    def __init__(
        self,
        threshold: float = 0.5,
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        *,
        zero_division: float = 0,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def threshold(self) -> float: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...


class BinaryConfusionMatrix(ClassificationMetric):
    """Confusion matrix: rows are targets, columns predictions."""

    def __init__(
        self,
        threshold: float = 0.5,
        ignore_index: Optional[int] = None,
        normalize: _Normalize = None,
        validate_args: bool = True,
        *,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def threshold(self) -> float: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def normalize(self) -> _Normalize: ...
    @property
    def validate_args(self) -> bool: ...


class BinaryF1Score(ClassificationMetric):
    """F1 score."""

    def __init__(
        self,
        threshold: float = 0.5,
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        zero_division: float = 0,
        *,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def threshold(self) -> float: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...
    @property
    def beta(self) -> float: ...


class BinaryFBetaScore(ClassificationMetric):
    """F-beta score."""

    def __init__(
        self,
        beta: float,
        threshold: float = 0.5,
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        zero_division: float = 0,
        *,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def beta(self) -> float: ...
    @property
    def threshold(self) -> float: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...


class BinaryPrecision(ClassificationMetric):
    """Precision tp / (tp + fp)."""

    def __init__(
        self,
        threshold: float = 0.5,
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        *,
        zero_division: float = 0,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def threshold(self) -> float: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...


class BinaryRecall(ClassificationMetric):
    """Recall tp / (tp + fn)."""

    def __init__(
        self,
        threshold: float = 0.5,
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        *,
        zero_division: float = 0,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def threshold(self) -> float: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...


class BinaryStatScores(ClassificationMetric):
    """[tp, fp, tn, fn, support] (TorchMetrics' StatScores)."""

    def __init__(
        self,
        threshold: float = 0.5,
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        *,
        zero_division: float = 0,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def threshold(self) -> float: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...


class ConfusionMatrix(Metric):
    """ConfusionMatrix(task=...): a task class."""

    def __new__(
        cls,
        task: _Task,
        threshold: float = 0.5,
        num_classes: Optional[int] = None,
        num_labels: Optional[int] = None,
        normalize: _Normalize = None,
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        **kwargs: Any,
    ) -> Union[BinaryConfusionMatrix, MulticlassConfusionMatrix, MultilabelConfusionMatrix]: ...


class F1Score(Metric):
    """F1Score(task=...): a task class."""

    def __new__(
        cls,
        task: _Task,
        threshold: float = 0.5,
        num_classes: Optional[int] = None,
        num_labels: Optional[int] = None,
        average: _Average = "micro",
        multidim_average: _MultidimAverage = "global",
        top_k: int = 1,
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        zero_division: float = 0,
        **kwargs: Any,
    ) -> Union[BinaryF1Score, MulticlassF1Score, MultilabelF1Score]: ...


class FBetaScore(Metric):
    """FBetaScore(task=..., beta=...): a task class."""

    def __new__(
        cls,
        task: _Task,
        beta: float = 1.0,
        threshold: float = 0.5,
        num_classes: Optional[int] = None,
        num_labels: Optional[int] = None,
        average: _Average = "micro",
        multidim_average: _MultidimAverage = "global",
        top_k: int = 1,
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        zero_division: float = 0,
        **kwargs: Any,
    ) -> Union[BinaryFBetaScore, MulticlassFBetaScore, MultilabelFBetaScore]: ...


class MaxMetric(Metric):
    """Largest value seen; -inf with no data."""

    def __init__(
        self,
        nan_strategy: _NanStrategy = "warn",
        *,
        dtype: Optional[torch.dtype] = None,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    def update(self, value: _Value) -> None:
        """Accumulates value. Never synchronizes."""
    @property
    def nan_strategy(self) -> _NanStrategy: ...


class MeanMetric(Metric):
    """Weighted mean sum(w * x) / sum(w), float64 accumulators. NaN with no data."""

    def __init__(
        self,
        nan_strategy: _NanStrategy = "warn",
        *,
        dtype: Optional[torch.dtype] = None,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    def update(self, value: _Value, weight: _Value = 1.0) -> None:
        """Accumulates value, weighted by weight. Never synchronizes."""
    @property
    def nan_strategy(self) -> _NanStrategy: ...


class MinMetric(Metric):
    """Smallest value seen; inf with no data."""

    def __init__(
        self,
        nan_strategy: _NanStrategy = "warn",
        *,
        dtype: Optional[torch.dtype] = None,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    def update(self, value: _Value) -> None:
        """Accumulates value. Never synchronizes."""
    @property
    def nan_strategy(self) -> _NanStrategy: ...


class MulticlassAccuracy(ClassificationMetric):
    """Accuracy (TorchMetrics' semantics; macro by default)."""

    def __init__(
        self,
        num_classes: Optional[int] = None,
        top_k: int = 1,
        average: _Average = "macro",
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        *,
        zero_division: float = 0,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def num_classes(self) -> Optional[int]: ...
    @property
    def top_k(self) -> int: ...
    @property
    def average(self) -> _Average: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...


class MulticlassConfusionMatrix(ClassificationMetric):
    """Confusion matrix: rows are targets, columns predictions."""

    def __init__(
        self,
        num_classes: int,
        ignore_index: Optional[int] = None,
        normalize: _Normalize = None,
        validate_args: bool = True,
        *,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def num_classes(self) -> int: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def normalize(self) -> _Normalize: ...
    @property
    def validate_args(self) -> bool: ...


class MulticlassF1Score(ClassificationMetric):
    """F1 score."""

    def __init__(
        self,
        num_classes: Optional[int],
        top_k: int = 1,
        average: _Average = "macro",
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        zero_division: float = 0,
        *,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def num_classes(self) -> Optional[int]: ...
    @property
    def top_k(self) -> int: ...
    @property
    def average(self) -> _Average: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...
    @property
    def beta(self) -> float: ...


class MulticlassFBetaScore(ClassificationMetric):
    """F-beta score."""

    def __init__(
        self,
        beta: float,
        num_classes: Optional[int],
        top_k: int = 1,
        average: _Average = "macro",
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        zero_division: float = 0,
        *,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def beta(self) -> float: ...
    @property
    def num_classes(self) -> Optional[int]: ...
    @property
    def top_k(self) -> int: ...
    @property
    def average(self) -> _Average: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...


class MulticlassPrecision(ClassificationMetric):
    """Precision tp / (tp + fp)."""

    def __init__(
        self,
        num_classes: Optional[int] = None,
        top_k: int = 1,
        average: _Average = "macro",
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        *,
        zero_division: float = 0,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def num_classes(self) -> Optional[int]: ...
    @property
    def top_k(self) -> int: ...
    @property
    def average(self) -> _Average: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...


class MulticlassRecall(ClassificationMetric):
    """Recall tp / (tp + fn)."""

    def __init__(
        self,
        num_classes: Optional[int] = None,
        top_k: int = 1,
        average: _Average = "macro",
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        *,
        zero_division: float = 0,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def num_classes(self) -> Optional[int]: ...
    @property
    def top_k(self) -> int: ...
    @property
    def average(self) -> _Average: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...


class MulticlassStatScores(ClassificationMetric):
    """[tp, fp, tn, fn, support] (TorchMetrics' StatScores)."""

    def __init__(
        self,
        num_classes: Optional[int] = None,
        top_k: int = 1,
        average: _Average = "macro",
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        *,
        zero_division: float = 0,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def num_classes(self) -> Optional[int]: ...
    @property
    def top_k(self) -> int: ...
    @property
    def average(self) -> _Average: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...


class MultilabelAccuracy(ClassificationMetric):
    """Accuracy (TorchMetrics' semantics; macro by default)."""

    def __init__(
        self,
        num_labels: int,
        threshold: float = 0.5,
        average: _Average = "macro",
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        *,
        zero_division: float = 0,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def num_labels(self) -> int: ...
    @property
    def threshold(self) -> float: ...
    @property
    def average(self) -> _Average: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...


class MultilabelConfusionMatrix(ClassificationMetric):
    """Confusion matrix: rows are targets, columns predictions."""

    def __init__(
        self,
        num_labels: int,
        threshold: float = 0.5,
        ignore_index: Optional[int] = None,
        normalize: _Normalize = None,
        validate_args: bool = True,
        *,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def num_labels(self) -> int: ...
    @property
    def threshold(self) -> float: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def normalize(self) -> _Normalize: ...
    @property
    def validate_args(self) -> bool: ...


class MultilabelF1Score(ClassificationMetric):
    """F1 score."""

    def __init__(
        self,
        num_labels: int,
        threshold: float = 0.5,
        average: _Average = "macro",
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        zero_division: float = 0,
        *,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def num_labels(self) -> int: ...
    @property
    def threshold(self) -> float: ...
    @property
    def average(self) -> _Average: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...
    @property
    def beta(self) -> float: ...


class MultilabelFBetaScore(ClassificationMetric):
    """F-beta score."""

    def __init__(
        self,
        beta: float,
        num_labels: int,
        threshold: float = 0.5,
        average: _Average = "macro",
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        zero_division: float = 0,
        *,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def beta(self) -> float: ...
    @property
    def num_labels(self) -> int: ...
    @property
    def threshold(self) -> float: ...
    @property
    def average(self) -> _Average: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...


class MultilabelPrecision(ClassificationMetric):
    """Precision tp / (tp + fp)."""

    def __init__(
        self,
        num_labels: int,
        threshold: float = 0.5,
        average: _Average = "macro",
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        *,
        zero_division: float = 0,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def num_labels(self) -> int: ...
    @property
    def threshold(self) -> float: ...
    @property
    def average(self) -> _Average: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...


class MultilabelRecall(ClassificationMetric):
    """Recall tp / (tp + fn)."""

    def __init__(
        self,
        num_labels: int,
        threshold: float = 0.5,
        average: _Average = "macro",
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        *,
        zero_division: float = 0,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def num_labels(self) -> int: ...
    @property
    def threshold(self) -> float: ...
    @property
    def average(self) -> _Average: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...


class MultilabelStatScores(ClassificationMetric):
    """[tp, fp, tn, fn, support] (TorchMetrics' StatScores)."""

    def __init__(
        self,
        num_labels: int,
        threshold: float = 0.5,
        average: _Average = "macro",
        multidim_average: _MultidimAverage = "global",
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        *,
        zero_division: float = 0,
        weighted: bool = False,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    @property
    def num_labels(self) -> int: ...
    @property
    def threshold(self) -> float: ...
    @property
    def average(self) -> _Average: ...
    @property
    def multidim_average(self) -> str: ...
    @property
    def ignore_index(self) -> Optional[int]: ...
    @property
    def validate_args(self) -> bool: ...
    @property
    def zero_division(self) -> float: ...


class Precision(Metric):
    """Precision(task=...): a task class."""

    def __new__(
        cls,
        task: _Task,
        threshold: float = 0.5,
        num_classes: Optional[int] = None,
        num_labels: Optional[int] = None,
        average: _Average = "micro",
        multidim_average: _MultidimAverage = "global",
        top_k: int = 1,
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        **kwargs: Any,
    ) -> Union[BinaryPrecision, MulticlassPrecision, MultilabelPrecision]: ...


class Recall(Metric):
    """Recall(task=...): a task class."""

    def __new__(
        cls,
        task: _Task,
        threshold: float = 0.5,
        num_classes: Optional[int] = None,
        num_labels: Optional[int] = None,
        average: _Average = "micro",
        multidim_average: _MultidimAverage = "global",
        top_k: int = 1,
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        **kwargs: Any,
    ) -> Union[BinaryRecall, MulticlassRecall, MultilabelRecall]: ...


class StatScores(Metric):
    """StatScores(task=...): a task class."""

    def __new__(
        cls,
        task: _Task,
        threshold: float = 0.5,
        num_classes: Optional[int] = None,
        num_labels: Optional[int] = None,
        average: _Average = "micro",
        multidim_average: _MultidimAverage = "global",
        top_k: int = 1,
        ignore_index: Optional[int] = None,
        validate_args: bool = True,
        **kwargs: Any,
    ) -> Union[BinaryStatScores, MulticlassStatScores, MultilabelStatScores]: ...


class SumMetric(Metric):
    """sum(w * x), float64 accumulators."""

    def __init__(
        self,
        nan_strategy: _NanStrategy = "warn",
        *,
        dtype: Optional[torch.dtype] = None,
        device: _Device = None,
        compute_on_cpu: bool = False,
        dist_sync_on_step: bool = False,
        process_group: Optional[Any] = None,
        dist_sync_fn: None = None,
        distributed_available_fn: _AvailableFn = None,
        sync_on_compute: bool = True,
        compute_with_cache: bool = True,
        **kwargs: Any,
    ) -> None: ...
    def update(self, value: _Value, weight: _Value = 1.0) -> None:
        """Accumulates value, weighted by weight. Never synchronizes."""
    @property
    def nan_strategy(self) -> _NanStrategy: ...
