"""MetricCollection, as in TorchMetrics: named metrics updated and computed together.

A thin layer over the C++ MetricCollection, which holds metrics of every family. With
``compute_groups=True`` (the default), metrics that count the same things share one state, worked
out from their options when they are added (no trial update, no comparison of states: one read of
whether a state is fresh); each distinct state is updated once per batch, and every state's
arguments are checked before any is counted into.

Under torch.distributed, compute() returns each metric's value over every rank where it has
``sync_on_compute=True`` (the default) and its ``distributed_available_fn`` says so, and its own
value where not, as TorchMetrics computes each metric by its own flags: the whole collection is
reduced at once, one all-reduce per (reduction, dtype) of its states, after one small all-gather
that checks that every rank holds the same metrics. Where no metric syncs, compute() issues no
collective (one rank may compute alone). sync(), unsync() and sync_context() work as on a metric;
while the collection or one of its metrics is synced, the other refuses what would reduce the state
twice or be undone by the unsync() (sync, compute, forward, a metric's reset).

``compute_groups`` may also be a list of groups, lists of metric names, as TorchMetrics 1.6 takes it:
the names are checked as TorchMetrics checks them (each must name a metric of the collection, or
ValueError), and then the groups are still worked out from the options, as with True. Sharing never
changes a value, so this differs from TorchMetrics only where the list is wrong: TorchMetrics shares
the state of metrics the list puts together even when they count different things, and returns
wrong values; here such metrics keep their own states (with a warning that names them), and metrics
that count the same things share one even when the list separates them. The ``compute_groups``
property reports the states actually shared. An empty list is False, as in TorchMetrics.

Keys are as in TorchMetrics: keys() and items() name the metrics with prefix and postfix (the names
they were added under with ``keep_base=True``), and ``collection[key]`` takes either form.

As TorchMetrics' (an nn.ModuleDict), the collection is a torch.nn.Module whose metrics are its
child modules, under the names they were added with; model.to() moves every state once, through the
C++ collection (metrics may share a state).
"""

import copy
import functools
import inspect
import warnings
import weakref
from contextlib import contextmanager

import torch
import torch.distributed as dist

from . import _C
from .distributed import Syncable, dist_initialized
from .metric import (NotConstructedError, PythonMetric, is_description, load_state, parse_dtype, parse_to,
                     prefixed_state, state_device, target_device)

_WRONG_GROUP = "MetricCollection: compute_groups puts"


def _rebuilt(cls, metrics, prefix, postfix, compute_groups, state, groups=None, handed_over=()):
    """What pickle and copy.deepcopy make a collection from (see MetricCollection.__reduce__): its
    metrics (copies, each holding its own state), in `groups` (the original's compute groups:
    detaching members and adding metrics after updates make them differ from what fresh metrics
    form), then the state. The metrics named `handed_over` it had handed over to an outer
    collection (it was nested there) are handed over again, as the original holds them: where the
    outer collection's copy holds them already (the copy reached it first), they join keeping the
    state they share there; else the outer collection's copy, made next, takes them over."""
    collection = cls.__new__(cls)
    collection._start(prefix, postfix, compute_groups)
    held = {name for name in handed_over if metrics[name]._collections}
    for name, metric in metrics.items():  # in the original's order
        collection._add(name, metric, handed_over=name in held)
    now = collection._core.groups()
    # a regroup gives every metric a state of its own first: where only the order differs, not those held
    if groups is not None and now != groups and not (held and _partition(now) == _partition(groups)):
        collection._core._regroup(groups)
    with warnings.catch_warnings():  # a wrong list of groups was reported when the original was made
        warnings.filterwarnings("ignore", message=_WRONG_GROUP)
        collection._check_group_names()
    collection.to(state_device(state))
    collection.load_state_dict(state)
    for name in set(handed_over) - held:
        collection._hand_over_one(metrics[name])
    return collection


def _partition(groups):
    """Compute groups (lists of names) in an order of their own, to compare them."""
    return sorted(sorted(group) for group in groups)


def _report_each(calls):
    """Calls each of `calls` whatever the ones before raised, so that every bad-input report that
    warns does (as the core's reports do), then raises the first exception, noting the others."""
    raised = []
    for call in calls:
        try:
            call()
        except Exception as e:
            raised.append(e)
    if raised:
        for later in raised[1:]:
            _note(raised[0], f"Also raised: {type(later).__name__}: {later}")
        raise raised[0]


def _note(error, text):
    """Notes `text` on `error` (Python 3.11+), or warns it where exceptions take no notes."""
    if hasattr(error, "add_note"):
        error.add_note(text)
    else:
        warnings.warn(text, RuntimeWarning, stacklevel=4)


def _metric_of(key):
    """The name of the metric a collection's state-dict key belongs to ("<name>.<state>"); None for
    a key that is not a string (no metric's: an unexpected key)."""
    return key.split(".", 1)[0] if isinstance(key, str) else None


def _updated_apart(metric):
    """Whether the collection leaves `metric` to its own update(), forward() and compute() (a Python
    subclass that defines any of them), as TorchMetrics calls each metric's own."""
    return isinstance(metric, PythonMetric) and (metric._overrides_update_or_compute() or
                                                 type(metric).forward is not PythonMetric.forward)


@functools.lru_cache(maxsize=None)
def _keyword_names(update):
    """The keywords the function `update` takes; None where it takes any (**kwargs)."""
    parameters = inspect.signature(update).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(p.name for p in parameters)


def _keywords_taken(metric, kwargs):
    """The keywords `metric`'s update() takes (TorchMetrics' _filter_kwargs). A classification
    metric built without weighted=True takes no weight, though its class's signature has one (as
    the collection's own update leaves it out for such a metric)."""
    names = _keyword_names(type(metric).update)
    unweighted = metric._arguments.get("weighted") is False
    return {k: v for k, v in kwargs.items() if (names is None or k in names) and not (unweighted and k == "weight")}


@contextmanager
def _restored_on_error(metrics):
    """The metrics' states as they were, should the block raise (their Python attributes are theirs)."""
    earlier = [(m, _C.Metric.clone(m)) for m in metrics]
    try:
        yield
    except BaseException:
        for metric, state in earlier:
            metric._swap_state(state)
        raise


class MetricCollection(Syncable, torch.nn.Module):
    """Named metrics updated and computed together (TorchMetrics' MetricCollection)."""

    def __init__(self, metrics, *additional_metrics, prefix=None, postfix=None, compute_groups=True):
        self._start(prefix, postfix, compute_groups)
        self._add_metrics(metrics, *additional_metrics)
        self._check_group_names()

    def __getattr__(self, name):
        """Reached for an attribute the collection lacks (its metrics, as torch.nn.Module finds them).
        One made by __new__ alone has no core: a TypeError, as a metric made so gives."""
        if "_core" not in self.__dict__:
            cls = type(self).__name__
            raise NotConstructedError(f"{cls} object was made without its constructor (by __new__ alone?); create "
                                      f"it as {cls}(...)")
        return super().__getattr__(name)

    def _start(self, prefix, postfix, compute_groups):
        """An empty collection."""
        super().__init__()
        self.prefix = self._check_affix(prefix, "prefix")
        self.postfix = self._check_affix(postfix, "postfix")
        self._compute_groups = self._check_compute_groups(compute_groups)
        self._core = _C.MetricCollectionCore(bool(self._compute_groups))

    @staticmethod
    def _check_affix(value, name):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"MetricCollection: expected `{name}` to be a string, got {type(value)}")
        return value

    @staticmethod
    def _check_compute_groups(compute_groups):
        """True or False, or a copy of a list of groups (lists of names): TorchMetrics' two forms."""
        if not isinstance(compute_groups, (list, tuple)):
            return bool(compute_groups)
        for group in compute_groups:
            if not isinstance(group, (list, tuple)) or not all(isinstance(name, str) for name in group):
                raise ValueError("MetricCollection: compute_groups must be True, False or a list of groups, each a "
                                 f"list of metric names, got the group {group!r}")
        return [list(group) for group in compute_groups]

    def add_module(self, name, module):
        """torch.nn.Module's way in (add_module, register_module, an attribute set to a module): as
        add_metrics({name: module}), as TorchMetrics' collection (an nn.ModuleDict) takes a metric so."""
        self.add_metrics({name: module})

    def __setattr__(self, name, value):
        self._refuse_to_change(name)
        if isinstance(value, torch.nn.Module):
            self.add_module(name, value)
        else:
            super().__setattr__(name, value)

    def __delattr__(self, name):
        self._refuse_to_change(name)
        super().__delattr__(name)

    def _refuse_to_change(self, name):
        """A metric stays once added (TorchMetrics' nn.ModuleDict replaces or deletes it)."""
        if name in self.__dict__.get("_modules", {}):
            raise ValueError(f"MetricCollection: {name!r} is a metric of the collection, which is not replaced, set "
                             "to None or deleted; make a new collection for other metrics")

    def add_metrics(self, metrics, *additional_metrics):
        """Adds metrics: a dict (names from its keys), or metrics (named after their class); a nested
        collection's metrics join under their keys in it."""
        self._add_metrics(metrics, *additional_metrics)
        self._check_group_names()

    def _add_metrics(self, metrics, *additional_metrics):
        """A nested collection's metrics join this one, as TorchMetrics flattens it: under their keys
        in it (prefix and postfix included), after the dict key and "_" in a dict."""
        if self._sync_cache is not None:  # (its unsync() would find no local state for them)
            raise RuntimeError("MetricCollection.add_metrics: the collection is synced (sync() or sync_context()); "
                               "call unsync() first")
        named = []
        if isinstance(metrics, dict):
            if additional_metrics:
                raise ValueError("MetricCollection: give further metrics inside the dict, not after it")
            # in the order of their names, as TorchMetrics adds them
            for name, metric in sorted(metrics.items(), key=lambda item: (not isinstance(item[0], str), str(item[0]))):
                if isinstance(metric, MetricCollection):
                    named += [(f"{name}_{key}", member, metric) for key, member in metric.items()]
                else:
                    named.append((name, metric, None))
        else:
            # further arguments that are not metrics (a collection among them) are left out with
            # TorchMetrics' warning; another library's metric is refused below, as in the first
            kept, ignored = [], []
            for extra in additional_metrics:
                left_out = isinstance(extra, MetricCollection) or not isinstance(extra, torch.nn.Module)
                (ignored if left_out else kept).append(extra)
            if ignored:
                warnings.warn(f"MetricCollection: You have passes extra arguments {ignored} which are not `Metric` so "
                              "they will be ignored.", stacklevel=3)
            for metric in (list(metrics) if isinstance(metrics, (list, tuple)) else [metrics]) + kept:
                if isinstance(metric, MetricCollection):
                    named += [(key, member, metric) for key, member in metric.items()]
                else:
                    named.append((type(metric).__name__, metric, None))
        taken = set(self._modules)
        for name, metric, _ in named:  # every one checked before anything changes: a refusal changes nothing
            self._check_addable(name, metric, taken)
            taken.add(name)
        for nested in {id(n): n for _, _, n in named if n is not None}.values():
            self._hand_over(nested)
        for name, metric, nested in named:
            self._add(name, metric)
            if nested is not None:
                self._nested_affixes = {**self._nested_affixes, name: (nested.prefix, nested.postfix)}

    @staticmethod
    def _hand_over(collection):
        """Gives each of a nested collection's metrics a state of its own there, which no metric added
        to it later joins: they share states anew in the collection they join, and the nested one
        stays right."""
        for metric in collection.values():
            collection._hand_over_one(metric)

    def _hand_over_one(self, metric):
        self._detach(metric, keep_alone=True)
        # handed over: it shares states anew in the collection it joins
        metric._collections = tuple(ref for ref in metric._collections if ref() is not self)

    def _check_group_names(self):
        """As TorchMetrics checks a list of groups, every time metrics are added: each name must be a
        metric's (the name it was added under). Called by __init__ and add_metrics, so that a warning
        names the caller's line. Warns of a group whose metrics cannot share one state
        (TorchMetrics would share it anyway, and give wrong values); here they keep their own."""
        if not isinstance(self._compute_groups, list):
            return
        for group in self._compute_groups:
            for name in group:
                if name not in self._modules:
                    raise ValueError(f"MetricCollection: compute_groups names {name!r}, which does not match a "
                                     f"metric in the collection; its metrics are {list(self._modules)}")
        shared = {name: index for index, names in enumerate(self._core.groups()) for name in names}
        for group in self._compute_groups:
            if len({shared[name] for name in group}) > 1:
                warnings.warn(f"{_WRONG_GROUP} {group} in one group, but they cannot share one state (they "
                              "count different things, live on different devices, were updated before they were "
                              "added, one is a subclass with its own update(), forward() or compute(), or one is "
                              "in another collection too); they "
                              f"keep separate states: {self.compute_groups}", stacklevel=3)

    @staticmethod
    def _check_addable(name, metric, taken):
        """Raises unless `metric` may join under `name`, none of the names `taken`."""
        if not isinstance(name, str):
            raise ValueError(f"MetricCollection: metric names must be strings, got {name!r}")
        if not name or "." in name:  # a KeyError, as torch.nn.ModuleDict (and so TorchMetrics) raises
            raise KeyError(f"MetricCollection: a metric's name must be non-empty and hold no '.', which separates it "
                           f"from the state's name in state_dict() keys; got {name!r}")
        if name in taken:
            raise ValueError(f"MetricCollection: encountered two metrics both named {name}")
        if not isinstance(metric, _C.Metric):
            raise ValueError(f"MetricCollection: {name} is a {type(metric).__name__}, not a nosync_metrics metric")

    def _add(self, name, metric, handed_over=False):
        """Adds `metric` under `name`; `handed_over`: as a nested collection holds a metric it handed
        over to an outer one (a copy's, see _rebuilt): alone, its state (the outer one's) left as it is."""
        self._check_addable(name, metric, self._modules)
        apart = _updated_apart(metric)
        if not handed_over:
            metric._alone()
        # a metric of another collection too: every collection it is in counts into its state, so it
        # keeps a state of its own in each, which no other metric joins (none sees both's batches)
        others = [] if handed_over else [c for c in (ref() for ref in metric._collections) if c not in (None, self)]
        for other in others:
            other._detach(metric, keep_alone=True)
        self._core.add(name, metric, updated_apart=apart)
        if others or handed_over:
            self._core._keep_alone(name)
        self._modules[name] = metric
        if apart:
            self._apart_names = self._apart_names + [name]
        elif not handed_over:
            metric._collections = metric._collections + (weakref.ref(self),)

    def _detach(self, metric, keep_alone=False):
        """Gives `metric`, about to count, reset or load on its own, a copy of the state it shares with
        other metrics of its compute group, in a group of its own (see PythonMetric._alone); which
        no metric added later joins where `keep_alone` (another collection holds it too)."""
        for name, member in self._modules.items():
            if member is metric:  # its first name: the C++ collection moves every name of it
                (self._core._keep_alone if keep_alone else self._core._detach)(name)
                return

    def _key(self, name):
        return f"{self.prefix or ''}{name}{self.postfix or ''}"

    def _base(self, key):
        """The name a metric was added under, from a key with or without prefix and postfix."""
        if self.prefix and key.startswith(self.prefix):
            key = key[len(self.prefix):]
        if self.postfix and key.endswith(self.postfix):
            key = key[:-len(self.postfix)]
        return key

    def _keyed(self, values, own=None):
        """{key: value} in the order the metrics were added: the C++ collection's `values` in each
        metric's dtype, and the values metrics updated apart gave (`own`) as they gave them. A dict
        value is spread into its keys, as TorchMetrics does (each after its metric's name and "_"
        where two would collide)."""
        own = own or {}
        values = {name: own[name] if name in own else m._result(values[name]) for name, m in self._modules.items()}
        spread = [k for name, v in values.items() for k in (v if isinstance(v, dict) else [name])]
        collide = len(spread) != len(set(spread))
        flat = {}
        for name, value in values.items():
            if not isinstance(value, dict):
                flat[name] = value
                continue
            # a metric from a nested collection keeps that collection's prefix and postfix around its keys
            prefix, postfix = self._nested_affixes.get(name, (None, None))
            base = name.replace(prefix or "", "").replace(postfix or "", "")
            flat.update({f"{prefix or ''}{f'{base}_{k}' if collide else k}{postfix or ''}": v for k, v in value.items()})
        return {self._key(k): v for k, v in flat.items()}

    _nested_affixes = {}  # name -> (prefix, postfix) of the nested collection a metric came from

    _apart_names = []  # the metrics updated apart (see _updated_apart), in the order added

    def _apart(self):
        """(name, metric) of the metrics updated apart."""
        return [(name, self._modules[name]) for name in self._apart_names]

    def _apart_metrics(self):
        """The metrics updated apart, each once (a metric may be here under several names)."""
        return list({id(m): m for _, m in self._apart()}.values())

    def update(self, *args, **kwargs):
        """Updates every metric with the same arguments (keywords each by the names it takes). A
        Python subclass with its own update(), forward() or compute() is updated by its update(), on
        itself; a call that raises leaves every state as it was."""
        if not self._apart_names:
            return self._core.update(*args, **kwargs)
        apart = self._apart_metrics()
        with _restored_on_error(apart):
            for metric in apart:
                metric.update(*args, **_keywords_taken(metric, kwargs))
            self._core.update(*args, **kwargs)

    def compute(self):
        """name -> value, in the order the metrics were added (prefix and postfix applied); each over
        every rank or this one's, as its ``sync_on_compute`` says (TorchMetrics computes each metric
        by its own flags); with no such metric, no collective (it may compute on one rank alone)."""
        self._check_not_synced_elsewhere("compute")
        wanted = self._syncing("sync_on_compute")
        syncs = any(wanted.values()) and self._sync_cache is None and self._world_size() > 1
        synced = self._synced_core() if syncs else None
        values, computed = {}, {}

        def core():
            values.update(self._by_flag(wanted, synced.compute, self._core.compute)
                          if synced is not None else self._core.compute())

        def apart(metric):
            # after sync() the states hold every rank's already
            with metric._syncing_on_compute(False if self._sync_cache is not None else None), \
                    self._reports_of(metric, ".compute"):
                computed[id(metric)] = metric.compute()

        _report_each([core] + [functools.partial(apart, metric) for metric in self._apart_metrics()])
        return self._keyed(values, {name: computed[id(metric)] for name, metric in self._apart()})

    def _reports_of(self, metric, who):
        """A context in which the bad-input reports of `metric` (updated apart) name it as the core's
        name their metrics: "MetricCollection<who>: 'name', ...: " (every name it has here)."""
        names = ", ".join(f"'{name}'" for name, m in self._apart() if m is metric)
        return _C._ReportContext(f"MetricCollection{who}: {names}: ")

    def forward(self, *args, **kwargs):
        """Accumulates, and returns each metric's value on this batch alone (over every rank when
        every member has ``dist_sync_on_step=True``). A metric updated apart gives its own
        forward()'s value (the reports its forward() makes name it, as compute()'s do)."""
        self._check_not_synced()
        return _C._in_forward(lambda: self._forward_batch(args, kwargs))

    def _forward_batch(self, args, kwargs):
        """forward() inside _C._in_forward: the refusals of the updates it makes name forward()."""
        with _restored_on_error(self._apart_metrics()):
            values = {id(m): self._forward_apart(m, args, kwargs) for m in self._apart_metrics()}
            own = {name: values[id(m)] for name, m in self._apart()}
            wanted = self._syncing("dist_sync_on_step")
            if not (any(wanted.values()) and self._world_size() > 1):
                return self._keyed(self._core.forward(*args, **kwargs), own)
            batch = self._core.clone()
            batch.reset()
            batch.update(*args, **kwargs)
        self._core._merge_appended(batch)
        return self._keyed(self._by_flag(wanted, self._synced_core(batch)._compute_without_report,
                                         batch._compute_without_report), own)

    def _forward_apart(self, metric, args, kwargs):
        with self._reports_of(metric, ".forward"):
            return metric(*args, **_keywords_taken(metric, kwargs))

    def _syncing(self, flag):
        """name -> whether the metric (updated together) takes its value over every rank: its `flag`
        ("sync_on_compute", "dist_sync_on_step") is set and its distributed_available_fn says so."""
        return {name: getattr(self._modules[name], flag) and self._modules[name]._distributed_available()
                for name in self._core.names() if name not in self._apart_names}

    def _by_flag(self, wanted, synced, local):
        """The values of `synced()` for the metrics `wanted` (name -> bool, from _syncing) and of
        `local()` for the others (only what is needed is computed; every rank takes part in a sync,
        whatever its own flags)."""
        if not any(wanted.values()):
            return local()
        values = synced()
        if not all(wanted.values()):
            here = local()
            values = {name: values[name] if wanted[name] else here[name] for name in values}
        return values

    def __call__(self, *args, **kwargs):
        """forward() (a subclass's own too): accumulates the batch and returns its values."""
        return self.forward(*args, **kwargs)

    def reset(self):
        """Resets every metric (a subclass's own reset() included). A metric it handed over to an
        outer collection (it is nested there) takes a state of its own first, so that the outer
        collection's metrics that shared its state keep theirs, as TorchMetrics resets each alone.
        Refused while another collection holding one of its metrics is synced (its unsync() would
        undo the reset). Inside its own sync it unsyncs first: the states its metrics share with
        other collections' metrics take their local values back."""
        self._refuse_while_synced("reset", self._held_by_another_synced())
        if self._sync_cache is not None:
            self.unsync()
        for metric in self._modules.values():
            if any(ref() not in (None, self) for ref in metric._collections):
                metric._alone()
        self._core.reset()
        for metric in self._modules.values():
            metric._sync_cache = None  # a member synced on its own stays reset too: its unsync() restores nothing
        for metric in self._modules.values():
            if type(metric).reset is not PythonMetric.reset:
                metric._reset_by_collection = True
                try:
                    metric.reset()
                finally:
                    del metric._reset_by_collection

    def to(self, *args, **kwargs):
        """Moves every metric's state to a device, given as torch.nn.Module.to takes it, and their own
        modules (a subclass's encoder) with them; returns the collection."""
        device = parse_to("MetricCollection", args, kwargs)
        if device is not None:
            self._core.to(device)
            for metric in {id(m): m for m in self._modules.values()}.values():
                metric._apply_to_own_modules(lambda t: t.to(device))
        return self

    def _apply(self, fn, recurse=True):
        """model.to(), .cuda(), .cpu(): every state moves once (keeping its dtype), as to() moves it,
        after `fn` has reached the metrics' own modules (to_empty() from meta: to() would copy them)."""
        for metric in self._modules.values():
            metric._apply_to_own_modules(fn)
        if self._modules:
            self.to(target_device(fn, next(iter(self._modules.values())).device))
        return self

    def set_dtype(self, dst_type):
        """set_dtype(dst_type) on every metric, as in TorchMetrics; returns the collection."""
        dtype = parse_dtype("MetricCollection.set_dtype", dst_type)
        for metric in self._modules.values():
            metric.set_dtype(dtype)
        return self

    def persistent(self, mode=True):
        """Sets persistent(mode) on every metric (whether a parent module's state_dict() holds its state);
        True by default, as TorchMetrics' MetricCollection.persistent (a metric's is False)."""
        for metric in self._modules.values():
            metric.persistent(mode)

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """"<name>.<state>" -> tensor, for every metric (`prefix` as in torch.nn.Module). Given a
        `destination`, as a parent module's state_dict() gives it, only the metrics set persistent(True)
        write their state there."""
        if destination is not None:
            return super().state_dict(destination=destination, prefix=prefix, keep_vars=keep_vars)
        return prefixed_state("MetricCollection", self._core.state_dict(), destination, prefix)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Checks every part before loading any: a bad dict changes nothing. A metric whose part
        differs from what its compute group loads leaves the group with it. With strict=False, unknown
        keys are ignored, and a metric's missing key takes a group-mate's of the same name, or keeps
        its value; a metric with no key at all reads what its compute group's owner holds after the
        load (TorchMetrics' compute groups share states), and an absent owner a group-mate's part
        that can serve it, or keeps its state. Returns (missing_keys, unexpected_keys)."""
        def load(state):
            if strict:
                return self._core.load_state_dict(state)
            present = {_metric_of(key) for key in state_dict}
            return self._core._load_following_groups({k: v for k, v in state.items() if _metric_of(k) in present})
        return load_state("MetricCollection", load, lambda: self._state_for(state_dict), state_dict, strict, assign)

    def _state_for(self, state_dict):
        """The current state, where a metric's key is missing from `state_dict` but a metric of its
        compute group has it, taking that (the state they share) instead."""
        state = self._core.state_dict()
        for group in self._core.groups():
            for name in group:
                for key in [k for k in state if k.startswith(name + ".") and k not in state_dict]:
                    part = key[len(name) + 1:]
                    given = [state_dict[f"{o}.{part}"] for o in group if f"{o}.{part}" in state_dict]
                    if given and not is_description(part):  # each metric has its own
                        state[key] = given[0]
        return state

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        # A parent module's load: the metrics whose whole state the checkpoint holds load as
        # load_state_dict(strict=False) loads them; each metric's own load, which follows, then only
        # reports what is missing. Where this load fails, the metrics' own loads load and report
        # what is wrong.
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        names = list(self._core.state_dict())
        given = {key[len(prefix):]: value for key, value in state_dict.items() if key.startswith(prefix)}
        incomplete = {_metric_of(name) for name in names if name not in given}
        part = {name: given[name] for name in names if _metric_of(name) not in incomplete}
        if part:
            try:
                self._core._load_following_groups(part)
            except (RuntimeError, ValueError, TypeError):
                return
            for name in {_metric_of(key) for key in part}:
                # the tensor this load gave it: a flag left by a load that raised never matches another
                self._modules[name]._loaded_by_its_collection = part[name + ".update_count"]

    def merge_state(self, other):
        """Folds in a collection with the same metrics whose compute groups each hold one of this
        one's or more (the same groups, or fewer metrics kept apart there); `other` is unchanged."""
        if not isinstance(other, MetricCollection):
            raise ValueError(f"MetricCollection.merge_state: other must be a MetricCollection, got {type(other)}")
        self._core.merge(other._core)

    def clone(self, prefix=None, postfix=None):
        """A deep copy (sharing states between the same metrics), with a new prefix/postfix where one is
        given and not empty (as TorchMetrics' clone keeps the old one for "")."""
        groups = {id(m.process_group): m.process_group for m in self._modules.values()}  # shared, not copied
        cloned = copy.deepcopy(self, groups)
        cloned.prefix = self._check_affix(prefix, "prefix") if prefix else self.prefix
        cloned.postfix = self._check_affix(postfix, "postfix") if postfix else self.postfix
        return cloned

    def __reduce__(self):
        """pickle, torch.save and copy.deepcopy rebuild the collection from its metrics and its state.
        The metrics themselves are copied (each as a metric is), so that one the model holds elsewhere
        too (an attribute, another collection) stays one object in the copy."""
        attributes = {k: v for k, v in self.__dict__.items() if k not in ("_core", "_modules")}
        return _rebuilt, (type(self), dict(self._modules), self.prefix, self.postfix, self._compute_groups,
                          self.state_dict(), self._core.groups(), self._handed_over()), attributes

    def _handed_over(self):
        """The names of the metrics it handed over to an outer collection (see _hand_over)."""
        return [name for name, metric in self._modules.items()
                if name not in self._apart_names and not any(ref() is self for ref in metric._collections)]

    def __copy__(self):
        """copy.copy: a collection of the same metric objects, grouped afresh: each is then in two
        collections, so a metric that shared its state with others keeps one of its own in each (as
        when it is added to another). It is not synced itself, even where the original is: its
        metrics' state is the original's, which that unsync() restores."""
        rebuild, arguments, attributes = self.__reduce__()
        *made_from, _, handed_over = arguments  # (not the original's groups, which the metrics just left)
        copied = rebuild(*made_from, None, handed_over)
        copied.__setstate__({k: v for k, v in attributes.items() if k != "_sync_cache"})
        return copied

    def _core_for_sync(self):
        return self._core

    def _sync_group(self):
        override = getattr(self, "_sync_group_override", None)
        if override is not None:
            return override
        # None is the default group, which dist.group.WORLD names too
        named = (dist.group.WORLD if m.process_group is None else m.process_group for m in self._modules.values())
        groups = {id(group): group for group in named}
        if len(groups) > 1:
            raise ValueError("MetricCollection: its metrics name different process groups; give them one")
        return next(iter(groups.values()), None)

    def _sync_name(self):
        return "MetricCollection"

    def _distributed_available(self):
        """Whether any metric's distributed_available_fn says so (an empty collection: whether torch.distributed
        is up); each metric's own decides whether its value is taken over every rank (_syncing)."""
        return dist_initialized() and (not self._modules or any(m._distributed_available()
                                                                for m in self._modules.values()))

    _holds_metrics = True

    def _synced_elsewhere(self):
        synced_alone = next((name for name, metric in self._modules.items() if metric._sync_cache is not None), None)
        return f"its metric {synced_alone!r}" if synced_alone is not None else self._held_by_another_synced()

    def _held_by_another_synced(self):
        """"a MetricCollection holding its metric 'name'" where another collection synced now holds one
        of its metrics; else None."""
        name = next((name for name, m in self._modules.items() if m._synced_collection() not in (None, self)), None)
        return None if name is None else f"a MetricCollection holding its metric {name!r}"

    def __setstate__(self, state):
        super().__setstate__(state)
        # a copy of a synced collection (deepcopy, clone, pickle) is synced too, and its metrics through it
        # alone (each copy took the sync as its own: see PythonMetric._pickled_attributes)
        self._announce_sync()
        if self._sync_cache is not None:
            for metric in self._modules.values():
                metric._sync_cache = None

    def check(self):
        """Raises or warns if any metric's update() counted bad input."""
        def apart(metric):
            with self._reports_of(metric, ".check"):
                metric.check()

        _report_each([self._core.check] + [functools.partial(apart, metric) for metric in self._apart_metrics()])

    @property
    def compute_groups(self):
        """{group: [names]}: the metrics that share a state, as TorchMetrics reports them. These are the
        states actually shared, worked out from the options, also when a list of groups was given;
        none with compute_groups=False."""
        if not self._compute_groups:
            return {}
        return dict(enumerate(list(g) for g in self._core.groups()))

    def _renamed(self):
        return {self._key(name): metric for name, metric in self._modules.items()}

    def keys(self, keep_base=False):
        """The metrics' keys, with prefix and postfix (the names they were added under with keep_base=True)."""
        return self._modules.keys() if keep_base else self._renamed().keys()

    def items(self, keep_base=False, copy_state=True):
        """(key, metric) pairs, as keys() names them. copy_state has no effect: metrics that share a
        state read it in place, and one that counts, resets or loads on its own takes a copy first."""
        return self._modules.items() if keep_base else self._renamed().items()

    def values(self, copy_state=True):
        """The metrics, in the order they were added (copy_state has no effect, as in items())."""
        return self._modules.values()

    def __getitem__(self, key, copy_state=True):
        """The metric under `key`, given with or without prefix and postfix (as TorchMetrics strips them)."""
        if not isinstance(key, str):
            raise KeyError(f"MetricCollection: keys are strings, got {key!r}")
        for name in (self._base(key), key):
            if name in self._modules:
                return self._modules[name]
        raise KeyError(f"MetricCollection: no metric under {key!r}; its keys are {list(self.keys())}")

    def __contains__(self, name):
        """Whether a metric was added under `name` (without prefix and postfix, as in TorchMetrics)."""
        return name in self._modules

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return len(self._modules)

    def __repr__(self):
        """As TorchMetrics writes it: the child modules as torch.nn.Module lists them, then prefix and postfix."""
        lines = [f"  ({name}): {metric!r}" for name, metric in self._modules.items()]
        affixes = [f"  {name}={value}" for name, value in (("prefix", self.prefix), ("postfix", self.postfix)) if value]
        return "MetricCollection(\n" + ",\n".join(["\n".join(lines)] + affixes) + "\n)"
