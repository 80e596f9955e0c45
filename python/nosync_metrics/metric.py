"""What every nosync_metrics metric class adds to its C++ metric: TorchMetrics' constructor
arguments (kept for clone() and repr(), readable as attributes), TorchMetrics' class attributes,
TorchMetrics' method signatures, argument errors that name the metric, TorchMetrics'
distributed behaviour, and torch.nn.Module (a metric is a submodule of the model it sits on)."""

import copy
import functools
import inspect
import numbers
from collections.abc import Mapping
from contextlib import contextmanager

import torch
from torch.nn.modules.module import _IncompatibleKeys

from . import _C
from ._C import Metric  # noqa: F401  (TorchMetrics' import path: torchmetrics.metric.Metric)
from .distributed import Syncable, dist_initialized, synced_collections

_P = inspect.Parameter
_KEYWORD = _P.KEYWORD_ONLY
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def arg(name, default=_P.empty, kind=_P.POSITIONAL_OR_KEYWORD):
    return _P(name, kind, default=default)


#: TorchMetrics' Metric keyword arguments (its ``**kwargs``), taken by every metric, with its defaults.
METRIC_KWARGS = [arg("compute_on_cpu", False, _KEYWORD), arg("dist_sync_on_step", False, _KEYWORD),
                 arg("process_group", None, _KEYWORD), arg("dist_sync_fn", None, _KEYWORD),
                 arg("distributed_available_fn", None, _KEYWORD), arg("sync_on_compute", True, _KEYWORD),
                 arg("compute_with_cache", True, _KEYWORD)]

#: TorchMetrics' class attributes, and their values on its Metric base.
CONSTANTS = {"is_differentiable": None, "higher_is_better": None, "full_state_update": None,
             "plot_lower_bound": None, "plot_upper_bound": None, "plot_legend_name": None}


# ---------------------------------------------------------------- argument checks, naming the metric

def check_int(who, name, value, optional=False):
    """`value` as an int that fits int64 (None passes where `optional`); ValueError otherwise, as
    TorchMetrics raises for a wrong type (bool is not taken for an int)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{who}: {name} must be an int{' or None' if optional else ''}, got {value!r} "
                         f"({type(value).__name__})")
    if not _INT64_MIN <= int(value) <= _INT64_MAX:
        raise ValueError(f"{who}: {name} = {value} does not fit in a 64-bit integer")
    return int(value)


def check_real(who, name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{who}: {name} must be a number, got {value!r} ({type(value).__name__})")
    try:
        return float(value)
    except OverflowError:  # an int beyond float64's range
        raise ValueError(f"{who}: {name} is an int too large for a float64") from None


def check_bool(who, name, value):
    if not isinstance(value, bool):
        raise ValueError(f"{who}: {name} must be a bool, got {value!r} ({type(value).__name__})")
    return value


def check_str(who, name, value, optional=False):
    if not (isinstance(value, str) or (optional and value is None)):
        raise ValueError(f"{who}: {name} must be a string{' or None' if optional else ''}, got {value!r} "
                         f"({type(value).__name__})")
    return value


def check_device(who, name, value):
    """None, or what torch.device() takes (a string, a torch.device, a CUDA index): the form the C++
    constructor casts (the string itself, or a torch.device)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, torch.device, numbers.Integral)):
        raise ValueError(f"{who}: {name} must be a device (a string, a torch.device or an index), got {value!r} "
                         f"({type(value).__name__})")
    try:
        device = torch.device(value)
    except (RuntimeError, TypeError, ValueError) as error:
        raise ValueError(f"{who}: {name} {value!r} is not a device: {error}") from None
    return value if isinstance(value, str) else device


def check_metric_kwargs(who, arguments):
    """TorchMetrics' Metric keyword arguments: every value it takes is taken (compute_on_cpu=True and
    compute_with_cache=False give the same values: every state is a tensor and compute() is
    idempotent); a custom dist_sync_fn is not supported."""
    for name in ("compute_on_cpu", "dist_sync_on_step", "sync_on_compute", "compute_with_cache"):
        check_bool(who, name, arguments[name])
    if arguments["dist_sync_fn"] is not None:
        raise ValueError(f"{who}: dist_sync_fn is not supported: nosync-metrics reduces every state with its own "
                         "reduction over torch.distributed (leave dist_sync_fn=None)")
    available = arguments["distributed_available_fn"]
    if available is not None and not callable(available):
        raise ValueError(f"{who}: distributed_available_fn must be callable or None, got {available!r}")


def parse_to(who, args, kwargs):
    """The device of nn.Module.to's forms (to(device), to(tensor), to(device=...)); None if none given.
    A dtype is refused: a state's dtype is fixed when the metric is made."""
    for value in list(args) + [kwargs.get("device"), kwargs.get("dtype")]:
        if value is not None and (isinstance(value, bool) or not isinstance(
                value, (str, numbers.Integral, torch.device, torch.dtype, torch.Tensor))):
            raise ValueError(f"{who}.to: expected a device, a dtype or a tensor, got {value!r} "
                             f"({type(value).__name__})")
    try:
        device, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"{who}.to: {error}") from None
    explicit = [a for a in args if isinstance(a, torch.dtype)] + [kwargs.get("dtype")]
    if dtype is not None and any(d is not None for d in explicit):
        raise ValueError(f"{who}.to: dtype={dtype} is not supported: the state's dtype is fixed when the metric is "
                         "made; set_dtype() chooses the dtype of the values")
    return torch.device("cpu") if device is not None and device.type == "cpu" else device  # ("cpu:0" is the CPU)


def parse_dtype(who, dst_type):
    """The floating dtype `dst_type` names, in the forms Tensor.type() takes: a torch.dtype or a
    tensor type name ("torch.DoubleTensor", "torch.cuda.HalfTensor": only the dtype is taken from
    it). Anything else is a ValueError, as TorchMetrics' set_dtype raises; so is a dtype that is not
    floating."""
    dtype = dst_type
    if not isinstance(dst_type, torch.dtype):
        named = None
        if isinstance(dst_type, str) and dst_type.startswith("torch."):
            named = functools.reduce(lambda found, part: getattr(found, part, None), dst_type.split(".")[1:], torch)
        dtype = getattr(named, "dtype", None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"{who}: expected a torch.dtype or a tensor type name such as 'torch.DoubleTensor', got "
                         f"{dst_type!r}")
    if not dtype.is_floating_point:  # (an integer dtype would cut every score and mean to a whole number)
        raise ValueError(f"{who}: expected a floating dtype (float16, bfloat16, float32, float64), got {dtype}")
    return dtype


# ---------------------------------------------------------------- state dicts as nn.Module gives them

class StateDictError(ValueError, RuntimeError):
    """A state dict that load_state_dict refuses (a missing or unexpected key, a tensor that does not
    fit): a ValueError, and a RuntimeError as torch.nn.Module's load_state_dict raises. (A value that
    is not a tensor stays a TypeError.)"""


def is_description(key):
    """Whether a state dict's key ("<state>", or a collection's "<name>.<state>") is what says what
    the state is: its format version or the metric, options and layout ("_version", "_metric")."""
    return key.rsplit(".", 1)[-1] in ("_version", "_metric")


def _check_descriptions(who, expected, state_dict):
    """Refuses `state_dict` where it lacks a description that the keys `expected` have and nothing
    else is amiss (the C++ load, which takes a dict without them, names an unexpected or another
    missing key); a parent module's strict load of the metric names them missing too."""
    if any(key not in expected for key in state_dict) or any(
            key not in state_dict for key in expected if not is_description(key)):
        return
    for key in expected:
        if is_description(key) and key not in state_dict:
            raise StateDictError(f"{who}.load_state_dict: missing key '{key}' (what the state is of, which a "
                                 "strict load checks; strict=False loads a state without it)")


def load_state(who, load, current, state_dict, strict, assign):
    """Loads `state_dict` with `load` (the C++ load, which checks every key before it changes any).
    A strict load refuses a dict without the descriptions that `current` (the state now) has;
    strict=False completes the dict from `current` and drops unknown keys. Returns what
    torch.nn.Module.load_state_dict returns."""
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"{who}.load_state_dict: expected state_dict to be dict-like, got {type(state_dict)}")
    check_bool(f"{who}.load_state_dict", "strict", strict)
    if assign:
        raise ValueError(f"{who}.load_state_dict: assign=True is not supported: the values are copied into the "
                         "metric's own state tensors")
    if strict:
        missing, unexpected, state = [], [], dict(state_dict)
        _check_descriptions(who, current(), state_dict)
    else:
        state = current()
        missing = [key for key in state if key not in state_dict]
        unexpected = [key for key in state_dict if key not in state]
        state.update((key, value) for key, value in state_dict.items() if key in state)
    try:
        load(state)
    except ValueError as error:
        raise StateDictError(str(error)) from None
    return _IncompatibleKeys(missing, unexpected)


def _same_state(state, given):
    """Whether `given` holds the tensors of `state` (two meta tensors hold no values to differ in)."""
    if not isinstance(given, Mapping) or set(state) != set(given):
        return False
    for key, tensor in state.items():
        other = given[key]
        if (not isinstance(other, torch.Tensor) or other.shape != tensor.shape or other.dtype != tensor.dtype or
                other.is_meta != tensor.is_meta):
            return False
        if not (tensor.is_meta or torch.equal(tensor, other.to(tensor.device))):
            return False
    return True


def prefixed_state(who, state, destination, prefix):
    """`state` under keys with `prefix`, written into `destination` where one is given."""
    check_str(f"{who}.state_dict", "prefix", prefix)
    if destination is None and not prefix:
        return state
    destination = {} if destination is None else destination
    for key, value in state.items():
        destination[prefix + key] = value
    return destination


def target_device(fn, device):
    """The device that `fn` (what nn.Module._apply applies to every tensor: model.to(), .cuda(), ...)
    sends a tensor on `device` to."""
    return fn(torch.empty(0, device=device)).device


def parent_loads(load, names, state_dict, prefix, required, missing_keys, unexpected_keys, error_msgs):
    """A parent module's load_state_dict() reaching a metric whose state has the keys `names`: loads
    the keys under `prefix` with `load` (all or nothing), when `required` or when the checkpoint holds
    them (TorchMetrics loads whatever state it finds); reports problems as nn.Module does."""
    given = {key[len(prefix):]: value for key, value in state_dict.items() if key.startswith(prefix)}
    unexpected_keys.extend(prefix + key for key in given if key not in names)
    if not required and not any(key in given for key in names):
        return
    missing = [prefix + key for key in names if key not in given]
    missing_keys.extend(missing)
    if missing:
        return
    try:
        load({key: given[key] for key in names})
    except (RuntimeError, ValueError, TypeError) as error:
        error_msgs.append(f"While loading {prefix[:-1]}: {error}")


def state_device(state):
    """The device of a state dict's tensors (the descriptions stay on the CPU)."""
    return next((v.device for k, v in state.items() if not is_description(k)), "cpu")


def made(cls, arguments):
    """A `cls` made with `arguments` as unpickling makes it: a subclass's own __init__ is not called."""
    metric = cls.__new__(cls)
    cls._init_metric(metric, **arguments)
    return metric


def _rebuilt(cls, arguments, state):
    """What pickle and copy.deepcopy make a metric from (see PythonMetric.__reduce__): holding `state`,
    on the device its state tensors came back on (torch.load's map_location applies)."""
    metric = made(cls, arguments)
    metric.to(state_device(state))
    metric.load_state_dict(state)
    return metric


# What a metric or collection raises while its constructor has not run (made by __new__ alone): a
# TypeError, and an AttributeError so that hasattr() and getattr() with a default still work where a
# subclass's __init__ asks before calling its base's.
NotConstructedError = _C.NotConstructedError


# ---------------------------------------------------------------- the mixin in front of every C++ metric

class PythonMetric(Syncable):
    """Mixed into every metric class in front of its C++ base; torch.nn.Module comes after that base
    (the C++ methods win over Module's of the same name: to, state_dict, forward, ...).

    A metric is a torch.nn.Module, as in TorchMetrics: a submodule of the model it is set on, moved
    by model.to(), copied by copy.deepcopy, saved by pickle and torch.save(model). Calling it runs
    forward() directly, without Module's hooks, so that a step costs no more than before.

    With torch.distributed initialized and more than one rank, compute() returns the value over
    every rank (``sync_on_compute=True``, the default) and leaves the local state as it was;
    forward() returns the batch value over every rank with ``dist_sync_on_step=True``.

    Values come back in the dtypes TorchMetrics 1.6 gives (see _result_dtype), converted from the
    state's own dtype on the way out: the state never changes dtype.
    """

    # TorchMetrics' class attributes, with its Metric base's values; each class sets its own.
    is_differentiable = None
    higher_is_better = None
    full_state_update = None
    plot_lower_bound = None
    plot_upper_bound = None
    plot_legend_name = None

    def __setattr__(self, name, value):
        if name in CONSTANTS:
            raise RuntimeError(f"{type(self).__name__}: Can't change const `{name}`.")
        super().__setattr__(name, value)

    _collections = ()  # weak references to the collections in whose compute groups it may share a state

    def _alone(self, check=None):
        """Before the metric counts, resets or loads on its own (not through its collection): where it
        shares a state with other metrics of a collection, it takes a copy first, so that theirs stays
        as it was (TorchMetrics' collection hands out metrics with copies of the group's state).
        `check` runs before: a call it refuses leaves the metric in its group."""
        if not self._collections or not _C.Metric._shares_state(self):
            return
        if check is not None:
            check()
        collections = [ref() for ref in self._collections]
        for collection in collections:
            if collection is not None:
                collection._detach(self)
        if None in collections:
            self._collections = tuple(ref for ref, collection in zip(self._collections, collections) if collection)

    def _synced_collection(self):
        """A collection synced now that holds the metric (nested, with another, updated apart), or a
        metric it shares its state with in another collection (an outer collection's group-mate of a
        nested one's metric); None if none."""
        synced = synced_collections()
        if not synced:
            return None
        mates = self._group_mates()
        return next((c for c in synced if any(m is mate for m in c._modules.values() for mate in mates)), None)

    def _group_mates(self):
        """The metric and those it shares its state with in its collections' compute groups."""
        mates = [self]
        for holder in (ref() for ref in self._collections):
            if holder is None:
                continue
            for group in holder._core.groups():
                members = [holder._modules[name] for name in group]
                if any(member is self for member in members):
                    mates += members
        return mates

    def _synced_elsewhere(self):
        return None if self._synced_collection() is None else "a MetricCollection holding it"

    def _core_for_sync(self):
        return self

    def _sync_group(self):
        return getattr(self, "_sync_group_override", None) or self.process_group

    def _sync_name(self):
        return self.metric_name

    def _distributed_available(self):
        return bool(self.distributed_available_fn())

    @property
    def dtype(self):
        """The dtype of the metric's floating values: torch.get_default_dtype() when it was made (an
        aggregator's dtype= where given), then what set_dtype() sets. The state keeps its own dtype."""
        return self._dtype

    def __getattr__(self, name):
        """Reached for an attribute the metric lacks. One made by __new__ alone lacks every attribute
        its constructor sets, and gets the TypeError that its C++ methods give (NotConstructedError)."""
        _C.Metric.device.fget(self)
        return super().__getattr__(name)

    def set_dtype(self, dst_type):
        """From now on every value comes back in `dst_type` (a floating torch.dtype or a name such as
        "torch.DoubleTensor"), counts and scores included, as after TorchMetrics' set_dtype, which
        converts every state; here the state keeps its own dtype. Returns the metric."""
        _C.Metric.device.fget(self)  # (made by its constructor)
        self._dtype = parse_dtype(f"{type(self).__name__}.set_dtype", dst_type)
        self._dtype_set = True
        return self

    def type(self, dst_type):
        """Does nothing, as in TorchMetrics: set_dtype() chooses the values' dtype. Returns the metric."""
        return self

    def float(self):
        """Does nothing, as in TorchMetrics: set_dtype() chooses the values' dtype. Returns the metric."""
        return self

    def double(self):
        """Does nothing, as in TorchMetrics: set_dtype() chooses the values' dtype. Returns the metric."""
        return self

    def half(self):
        """Does nothing, as in TorchMetrics: set_dtype() chooses the values' dtype. Returns the metric."""
        return self

    def _result_dtype(self):
        """The dtype compute() and forward() return in; None: the C++ metric's own. TorchMetrics keeps
        floating states in the metric's dtype, and so returns values in it; classification metrics,
        whose TorchMetrics states are integer counts, override this."""
        return self.dtype

    def _result(self, value):
        dtype = self._result_dtype()
        return value if dtype is None or value.dtype == dtype else value.to(dtype)

    @property
    def update_called(self):
        """Whether update() or forward() ran since the metric was made or last reset."""
        return self.update_count > 0

    _sync_on_compute_now = None  # what compute() syncs by while _syncing_on_compute sets it
    _reports_now = True  # whether compute() reports bad input (not for forward()'s batch)

    def compute(self):
        """The value over every update since the last reset (over every rank under torch.distributed
        with ``sync_on_compute=True``), on the metric's device. Raises or warns if an update counted
        bad input."""
        syncs = self.sync_on_compute if self._sync_on_compute_now is None else self._sync_on_compute_now
        # inside its collection's sync the state holds every rank's already
        synced = self._sync_cache is not None or self._synced_collection() is not None
        core = self._synced_core() if syncs and not synced and self._world_size() > 1 else None
        if self._reports_now:
            return self._result(super().compute() if core is None else core.compute())
        return self._result(_C.Metric._compute_without_report(self if core is None else core))

    @contextmanager
    def _syncing_on_compute(self, syncs, reports=True):
        """compute() syncs as `syncs` says inside, and reports bad input if `reports` (a subclass's
        compute() reaches it through super())."""
        earlier = self._sync_on_compute_now, self._reports_now
        self._sync_on_compute_now, self._reports_now = syncs, reports
        try:
            yield
        finally:
            self._sync_on_compute_now, self._reports_now = earlier

    def forward(self, *args, **kwargs):
        """Accumulates the batch, as update() does, and returns the value of this batch alone (over
        every rank with ``dist_sync_on_step=True``). A subclass's own update() and compute() are
        what it runs, as in TorchMetrics."""
        self._check_not_synced()
        return _C._in_forward(lambda: self._forward_batch(args, kwargs))

    def _forward_batch(self, args, kwargs):
        """forward() inside _C._in_forward: the refusals of the updates it makes name forward()."""
        self._alone(lambda: _C.Metric._check_update(self, *args, **kwargs))
        if self._overrides_update_or_compute():
            return self._forward_own(args, kwargs)
        if not (self.dist_sync_on_step and self._world_size() > 1):
            return self._result(super().forward(*args, **kwargs))
        batch = self.clone()
        batch.reset()
        batch.update(*args, **kwargs)
        self._merge_appended(batch)
        return self._result(batch._synced_core()._compute_without_report())

    def _forward_own(self, args, kwargs):
        """forward() of a subclass with its own update() or compute(), as TorchMetrics': both run on
        the metric itself (its attributes change as they would in update()), over a fresh state that
        then joins the earlier one. As the built-in forward(), it leaves the batch's bad input to the
        next compute() to report. A call that raises leaves the state as it was."""
        state = _C.Metric.clone(self)
        _C.Metric.reset(state)
        self._swap_state(state)  # the metric counts into the fresh state, `state` keeps the earlier one
        try:
            self.update(*args, **kwargs)
            with self._syncing_on_compute(self.dist_sync_on_step, reports=False):
                value = self.compute()
        finally:
            self._swap_state(state)  # the earlier state is back, `state` holds the batch
        self._merge_appended(state)
        return value

    def _overrides_update_or_compute(self):
        """Whether a Python subclass defines its own update() or compute()."""
        cls = type(self)
        return not getattr(cls.update, "_generated", False) or cls.compute is not PythonMetric.compute

    def __call__(self, *args, **kwargs):
        """forward(): accumulates the batch and returns its value."""
        return self.forward(*args, **kwargs)

    def reset(self):
        """Restores the state the metric was made with."""
        if not self._reset_by_collection:
            self._check_not_synced_elsewhere("reset")
            self._alone()
        super().reset()
        self._sync_cache = None  # a reset state is not the synced one: unsync() has nothing to restore

    _reset_by_collection = False  # set while its collection's reset() calls a subclass's own reset()

    def merge_state(self, incoming_state):
        """Folds in `incoming_state`: a metric of the same class and options, a state dict from
        state_dict(), or a list of them (all or nothing). The incoming metrics are unchanged."""
        several = isinstance(incoming_state, (list, tuple))
        items = [dict(i) if isinstance(i, Mapping) else i for i in (incoming_state if several else [incoming_state])]
        for item in items:
            if not isinstance(item, (_C.Metric, dict)):
                raise ValueError(f"{type(self).__name__}.merge_state: incoming_state must be a metric, a state dict "
                                 f"or a list of them, got {type(item)}")
            if isinstance(item, _C.Metric) and not isinstance(item, type(self)):
                # a ValueError, as TorchMetrics raises it
                raise ValueError(f"{type(self).__name__}.merge_state: expected incoming state to be an instance of "
                                 f"{type(self).__name__}, got {type(item).__name__}")
        # itself: its counts as they are before the merge, added again as TorchMetrics adds them
        items = [_C.Metric._clone_alone(self) if item is self else item for item in items]
        incoming = items if several else items[0]
        self._alone(lambda: _C.Metric.merge_state(_C.Metric._clone_alone(self), incoming))
        super().merge_state(incoming)

    def persistent(self, mode=False):
        """Whether a parent module's state_dict() holds this metric's state (TorchMetrics' default: it
        does not, so a model's state_dict() has the same keys with or without metrics)."""
        self._persistent = check_bool(f"{type(self).__name__}.persistent", "mode", mode)

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """name -> tensor: a copy of every state tensor and the metric's description; load_state_dict()
        restores it exactly. `prefix` works as in torch.nn.Module (keep_vars has no effect: the copies
        are detached). Given a `destination`, as a parent module's state_dict() gives it, the state
        is written there only if persistent(True) was set, after a subclass's own modules, parameters
        and buffers (as torch.nn.Module writes them)."""
        if destination is not None:
            torch.nn.Module.state_dict(self, destination=destination, prefix=prefix, keep_vars=keep_vars)
            if not self._persistent:
                return destination
        return prefixed_state(type(self).__name__, super().state_dict(), destination, prefix)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # its collection may have loaded it just before, from these very tensors
        loaded = self.__dict__.pop("_loaded_by_its_collection", None) is state_dict.get(prefix + "update_count", False)
        # a key is unexpected where neither the state nor the subclass's own parameters, buffers and
        # modules (which torch.nn.Module loads) take it
        not_modules, not_state = [], []
        torch.nn.Module._load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                                              not_modules, error_msgs)
        parent_loads((lambda state: None) if loaded else self._load_unless_held, list(super().state_dict()),
                     state_dict, prefix, self._persistent, missing_keys, not_state, error_msgs)
        unexpected_keys.extend(key for key in not_state if key in not_modules)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Loads a dict from state_dict(), checking every key before changing any. With strict=False,
        unknown keys are ignored and missing keys keep their current values. Returns
        (missing_keys, unexpected_keys), as torch.nn.Module does."""
        def load(target):
            return load_state(type(self).__name__, target.load_state_dict, target.state_dict, state_dict, strict,
                              assign)
        self._alone(lambda: load(_C.Metric._clone_alone(self)))
        return load(super())

    def _load_unless_held(self, state_dict):
        """A parent module's load: a state the metric holds already changes nothing (its collection
        loaded it just before, where the metric shares a state of another layout); it keeps its
        group. Another leaves the group with it, as load_state_dict() does."""
        if not _same_state(super().state_dict(), state_dict):
            self.load_state_dict(state_dict)

    def to(self, *args, **kwargs):
        """Moves the state to a device, given as torch.nn.Module.to takes it (a device, a string, an
        index, a tensor on that device), and a subclass's own modules, parameters and buffers with
        it; returns the metric. A metric that shares its state in a collection's compute group takes
        a copy first (_alone) and moves that, as a model.to() reaching it before its collection
        does; a move to the device it is on changes nothing."""
        device = parse_to(type(self).__name__, args, kwargs)
        if device is not None:
            if torch.device(device) != self.device:
                self._alone()
                super().to(device)
            self._apply_to_own_modules(lambda t: t.to(device))
        return self

    def _apply(self, fn, recurse=True):
        """model.to(), .cuda(), .cpu() reach a metric here, not through its to(): the state moves to the
        device, and keeps its dtype (model.half(), .double() change neither it nor the values' dtype, as
        in TorchMetrics)."""
        self._apply_to_own_modules(fn)
        return self.to(target_device(fn, self.device))

    def _apply_to_own_modules(self, fn):
        """A subclass's own modules, parameters and buffers (an encoder it holds) move and cast as
        torch.nn.Module's do."""
        torch.nn.Module._apply(self, fn)

    def cpu(self):
        """to("cpu")."""
        return self.to("cpu")

    def cuda(self, device=None):
        """to("cuda") (or to CUDA device `device`)."""
        return self.to(torch.device("cuda", device) if isinstance(device, int) else device or "cuda")

    def check(self):
        """Raises or warns, as compute() would, if an update counted bad input."""
        super().check()

    def bad_input(self):
        """What the updates counted as bad input: {"counts": {...}, "updates": n, "first_update": i}."""
        return super().bad_input()

    def lock_updates(self, on):
        """Whether update() takes a lock, so that several threads may update at once (on from Python)."""
        super().lock_updates(on)

    def clone(self):
        """A deep copy: same arguments, same state (sharing the process group, which cannot be copied)."""
        return copy.deepcopy(self, {id(self.process_group): self.process_group})

    def __copy__(self):
        return self.clone()

    def __reduce__(self):
        """pickle, torch.save and copy.deepcopy rebuild the metric from its arguments and its state; its
        attributes (persistent, training, a subclass's own) come back as torch.nn.Module's do."""
        return _rebuilt, (type(self), self._arguments, self.state_dict()), self._pickled_attributes()

    def _pickled_attributes(self):
        """The attributes a copy or pickle keeps (not the sync setting of a compute() under way, nor
        the collections it is in). A copy made inside the sync of a collection holding the metric
        holds every rank's state: it is synced as a metric synced alone, with the local state to
        unsync() to."""
        attributes = {k: v for k, v in self.__dict__.items() if k not in ("_sync_on_compute_now", "_collections")}
        collection = None if self._sync_cache is not None else self._synced_collection()
        if collection is not None:
            attributes["_sync_cache"] = self._local_state_in(collection)
        return attributes

    def _local_state_in(self, collection):
        """The metric's state as `collection`, synced now, keeps it to unsync() to: under the metric's
        name there, else a group-mate's that sharing its state has its keys (not a ConfusionMatrix's
        for a Precision); None where none has (the copy then holds every rank's state, not synced)."""
        own = self.state_dict()
        mates = [m for m in self._group_mates() if m is self or m.state_dict().keys() == own.keys()]
        names = [n for mate in mates for n, m in collection._modules.items() if m is mate]
        if not names:
            return None
        local = collection._sync_cache
        return {key: value if key.startswith("_") else local[f"{names[0]}.{key}"] for key, value in own.items()}

    def __deepcopy__(self, memo):
        """As copy.deepcopy does with __reduce__ (the C++ base's __deepcopy__ gives a bare C++ metric)."""
        rebuild, arguments, attributes = self.__reduce__()
        copied = memo[id(self)] = rebuild(*copy.deepcopy(arguments, memo))
        copied.__setstate__(copy.deepcopy(attributes, memo))
        return copied

    def __repr__(self):
        arguments = dict(self._arguments)
        given = arguments.get("device")
        made_on, now = torch.device("cpu" if given is None else given), self.device
        if made_on.type != now.type or made_on.index not in (None, now.index):
            # where it is now (it moved since it was made): None for the CPU, the default
            arguments["device"] = None if now.type == "cpu" else str(now)
        shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items()
                          if k in self._shown_always or v != self._defaults[k])
        return f"{type(self).__name__}({shown})"


def _option(name, fixed=_P.empty):
    """A read-only attribute: the constructor argument `name` (or the fixed value, as F1's beta = 1)."""
    def get(self):
        return self._arguments[name] if fixed is _P.empty else fixed

    def refuse(self, value):
        raise AttributeError(f"{type(self).__name__}: {name} is fixed when the metric is made (it is part of the "
                             f"C++ metric's options); make a new metric with {name}={value!r}")

    return property(get, refuse, doc=f"The {name} the metric was made with (read-only).")


def _update_method(base, parameters, doc):
    """update() with TorchMetrics' signature; the C++ update() reads the arguments."""
    cpp_update = base.update

    def update(self, *args, **kwargs):
        self._alone(lambda: _C.Metric._check_update(self, *args, **kwargs))
        cpp_update(self, *args, **kwargs)

    update.__signature__ = inspect.Signature([arg("self")] + list(parameters))
    update.__doc__ = doc
    update._generated = True  # PythonMetric.forward takes C++'s own forward while update is this one
    return update


def bound_arguments(name, signature, /, *args, **kwargs):
    """The arguments bound to `signature`, defaults applied, as a dict; a TypeError names `name`.
    (Positional-only: `name=` and `signature=` are the caller's keywords, refused by name.)"""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as error:
        raise TypeError(f"{name}: {error}") from None
    bound.apply_defaults()
    return dict(bound.arguments)


def _init_method(signature, construct):
    """__init__ taking `signature`: checks TorchMetrics' Metric arguments, then construct(self, arguments)."""
    def __init__(self, *args, **kwargs):
        torch.nn.Module.__init__(self)  # first: Module.__setattr__ reads what it sets
        name = type(self).__name__
        arguments = bound_arguments(name, signature, self, *args, **kwargs)
        del arguments["self"]
        unexpected = arguments.pop("kwargs")
        if unexpected:
            raise ValueError(f"{name}: unexpected keyword arguments: {', '.join(f'`{k}`' for k in sorted(unexpected))}")
        check_metric_kwargs(name, arguments)
        self._dtype = torch.get_default_dtype()  # as TorchMetrics' Metric; construct() may choose another
        self._dtype_set = False
        try:
            construct(self, arguments)
        except (ValueError, TypeError) as error:  # a C++ check that names the option but not the metric
            if str(error).startswith((name, name.removesuffix("Metric"))):
                raise
            raise type(error)(f"{name}: {error}") from None
        self.lock_updates(True)  # update() releases the GIL: Python threads may update at once
        self._arguments = arguments
        self._persistent = False
        for parameter in METRIC_KWARGS:
            setattr(self, parameter.name, arguments[parameter.name])
        self.distributed_available_fn = arguments["distributed_available_fn"] or dist_initialized

    __init__.__signature__ = signature
    return __init__


def metric_class(name, base, parameters, construct, doc, shown_always=(), update=(), update_doc="", attributes=None,
                 options=None, result_dtype=None):
    """A class named `name` on the C++ metric `base`.

    Its __init__ takes `parameters` (TorchMetrics' names and defaults) plus METRIC_KWARGS and calls
    construct(self, arguments); update() shows the signature `update` and `update_doc`; `attributes` are TorchMetrics'
    class attributes (is_differentiable, ...); `options` ({name: fixed value or _P.empty}) are the
    constructor arguments readable as attributes (TorchMetrics' self.num_classes, ...); `result_dtype`,
    where given, replaces PythonMetric._result_dtype.
    """
    signature = inspect.Signature([arg("self")] + list(parameters) + METRIC_KWARGS + [_P("kwargs", _P.VAR_KEYWORD)])
    defaults = {p.name: p.default for p in signature.parameters.values() if p.name not in ("self", "kwargs")}
    init = _init_method(signature, construct)
    # _init_metric: the __init__ that unpickling calls, whatever __init__ a subclass defines
    namespace = {"__init__": init, "_init_metric": init, "__doc__": doc, "__module__": "nosync_metrics",
                 "_defaults": defaults, "_shown_always": tuple(shown_always),
                 "update": _update_method(base, update, update_doc)}
    namespace.update(attributes or {})
    namespace.update({option: _option(option, fixed) for option, fixed in (options or {}).items()})
    if result_dtype:
        namespace["_result_dtype"] = result_dtype
    return type(name, (PythonMetric, base, torch.nn.Module), namespace)
