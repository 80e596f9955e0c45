"""Cross-process sync over torch.distributed, the engine the training job already uses.

The C++ core packs a metric's (or a whole collection's) state into one buffer per (reduction,
dtype); here each buffer is all-reduced with its reduction, after one small all-gather that checks
that every rank holds the same metrics. Rows that grow with the samples (multidim_average=
"samplewise") are gathered, padded to the longest rank's, after one all-gather of every rank's row
counts. A state on a device the backend cannot serve (a CPU state under NCCL) travels to the
current CUDA device for the collective and back, one copy per buffer.
"""

import hashlib
import weakref
from contextlib import contextmanager

import torch
import torch.distributed as dist

from . import _C

_OPS = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}

# The tensors of the last sync's gloo collectives (inputs and outputs: a work holds both), kept
# until the next sync begins. PyTorch 2.6 (1.13 is not affected) tears gloo down
# (destroy_process_group) holding the GIL while it joins its worker threads, and a worker that
# drops the last reference to a tensor whose Python object is gone needs the GIL to free it: the
# two deadlock (pytorch/pytorch#154976). Kept here, the tensors of a sync are not freed by a worker
# when a teardown follows it closely.
_kept_from_last_sync = []


def _collective(collective, *tensors, group, **kwargs):
    """collective(*tensors, group=group, **kwargs), a collective of torch.distributed; over gloo,
    its tensors (and lists of them) are kept."""
    if dist.get_backend(group) == dist.Backend.GLOO:
        _kept_from_last_sync.append(tensors)
    return collective(*tensors, group=group, **kwargs)


# The collections sync() was called on (synced while their _sync_cache is set): a metric asks them
# whether one holds it, nested, in two collections or updated apart alike.
_synced_collections = weakref.WeakSet()


def synced_collections():
    """The collections synced now (sync() or sync_context() without its unsync())."""
    if not _synced_collections:  # every update asks: iterating even an empty WeakSet costs a guard
        return []
    return [c for c in _synced_collections if c._sync_cache is not None]


def dist_initialized():
    """Whether torch.distributed is initialized (TorchMetrics' default distributed_available_fn)."""
    return dist.is_available() and dist.is_initialized()


def _fingerprint(text):
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little", signed=True)


def _same_on_every_rank(text, group, device):
    """Whether every rank's `text` is this one's: one small all-gather of fingerprints."""
    mine = torch.tensor([_fingerprint(text), len(text)], dtype=torch.int64, device=device)
    gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
    _collective(dist.all_gather, gathered, mine, group=group)
    return all(torch.equal(g, gathered[0]) for g in gathered)


def _check_same_on_every_rank(text, group, who, device):
    if _same_on_every_rank(text, group, device):
        return
    texts = [None] * dist.get_world_size(group)
    dist.all_gather_object(texts, text, group=group)
    _C.check_same_texts(texts, who)


def _gather_row_counts(rows, group, backend):
    """Every rank's row counts of each row entry, from one all-gather: counts[rank][entry]."""
    device = _C.collective_device(backend, str(rows[0].device))
    mine = torch.tensor([r.shape[0] for r in rows], dtype=torch.int64, device=device)
    gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
    _collective(dist.all_gather, gathered, mine, group=group)
    return [g.tolist() for g in gathered]


def _gather_rows(rows, counts, group, backend):
    """Every rank's `rows`, in rank order, from one all-gather of the rows padded to the longest
    (`counts`: each rank's row count). With no rows anywhere there is nothing to gather (gloo
    fails on an empty all-gather, with a signal that kills the process)."""
    if max(counts) == 0:
        return rows
    on = rows.to(_C.collective_device(backend, str(rows.device)))
    padded = on.new_zeros((max(counts),) + tuple(on.shape[1:]))
    padded[:on.shape[0]] = on
    gathered = [torch.empty_like(padded) for _ in counts]
    _collective(dist.all_gather, gathered, padded, group=group)
    return torch.cat([g[:c] for g, c in zip(gathered, counts)]).to(rows.device)


def _check_device(packed, group):
    """Where the collectives run for `packed`'s state (an empty collection's: the CPU's)."""
    return _C.collective_device(dist.get_backend(group), str(packed.buffers[0][1].device) if packed.buffers else "cpu")


def reduce_packed(packed, description, group, who, checked=False):
    """All-reduces `packed`'s buffers in place over `group` (None: the default group), and gathers
    its rows (the Cat entries: TorchMetrics' list states); first checks that every rank describes
    its state as `description`, unless `checked` already."""
    backend = dist.get_backend(group)
    buffers = packed.buffers
    if not checked:
        _check_same_on_every_rank(description, group, who, _check_device(packed, group))
    rows = packed.rows
    counts = _gather_row_counts(rows, group, backend) if rows else []
    for index, entry in enumerate(rows):
        packed.set_rows(index, _gather_rows(entry, [theirs[index] for theirs in counts], group, backend))
    for reduction, buffer in buffers:
        on = buffer.to(_C.collective_device(backend, str(buffer.device)))
        _collective(dist.all_reduce, on, op=_OPS[reduction], group=group)
        if on is not buffer:
            buffer.copy_(on)


class Syncable:
    """TorchMetrics' distributed behaviour, for metrics and collections alike.

    A subclass provides ``_core_for_sync()`` (an object with ``_pack``, ``_describe`` and
    ``_synced_copy``), ``_sync_group()``, ``_sync_name()``, ``state_dict()`` and ``load_state_dict()``.
    """

    _sync_cache = None
    _holds_metrics = False  # a collection: its metrics look its sync up (synced_collections)

    def _synced_elsewhere(self):
        """What else holds this object's state synced, by sync() or sync_context() there ("a
        MetricCollection holding it", "its metric 'acc'"), or None: a sync, compute, forward or reset
        here would reduce the state twice, or be undone by that unsync()."""
        return None

    def _check_not_synced_elsewhere(self, call):
        self._refuse_while_synced(call, self._synced_elsewhere())

    def _refuse_while_synced(self, call, elsewhere):
        """Raises unless `elsewhere`, what holds the state synced (see _synced_elsewhere), is None."""
        if elsewhere is not None:
            raise RuntimeError(f"{self._sync_name()}.{call}: {elsewhere} is synced (sync() or sync_context()), and "
                               f"holds every rank's state; call unsync() there first")

    def _announce_sync(self):
        """A collection synced now (a copy of a synced one too) is one its metrics look up."""
        if self._holds_metrics and self._sync_cache is not None:
            _synced_collections.add(self)

    def _distributed_available(self):
        """Whether to reduce over ranks (TorchMetrics' distributed_available_fn); the subclass may narrow it."""
        return dist_initialized()

    def _world_size(self):
        available = dist_initialized() and self._distributed_available()
        return dist.get_world_size(self._sync_group()) if available else 1

    def _synced_core(self, core=None):
        """A copy of the C++ metric or collection (`core`, by default this one's) holding the state
        reduced over every rank."""
        # a worker that still holds one of the last sync's tensors frees it while this sync's
        # collectives wait (the GIL released)
        _kept_from_last_sync.clear()
        core = self._core_for_sync() if core is None else core
        group = self._sync_group()
        packed = core._pack()
        # Ranks may group the same metrics otherwise (one of them counted, reset or loaded alone on
        # one rank): then every rank reduces each metric's own state, as TorchMetrics does. A metric
        # checks twice too where ranks differ, so that every rank issues the same collectives.
        checked = _same_on_every_rank(core._describe(), group, _check_device(packed, group))
        if not checked and isinstance(core, _C.MetricCollectionCore):
            core = core.clone()
            core._regroup([[name] for name in core.names()])
            packed = core._pack()
        reduce_packed(packed, core._describe(), group, self._sync_name(), checked=checked)
        return core._synced_copy(packed)

    def sync(self, dist_sync_fn=None, process_group=None, should_sync=True, distributed_available=None):
        """Replaces the local state by the state reduced over every rank; unsync() restores it."""
        if dist_sync_fn is not None:
            raise ValueError(f"{self._sync_name()}.sync: dist_sync_fn is not supported: nosync-metrics reduces "
                             "each state tensor with its declared reduction over torch.distributed")
        if self._sync_cache is not None and should_sync:
            raise RuntimeError("The Metric has already been synced.")
        if not should_sync:
            return
        self._check_not_synced_elsewhere("sync")
        available = self._distributed_available() if distributed_available is None else distributed_available()
        if not available:
            return
        if process_group is not None:
            self._sync_group_override = process_group
        try:
            local = self.state_dict()
            synced = self._synced_core().state_dict()
        finally:
            self._sync_group_override = None
        self.load_state_dict(synced)
        self._sync_cache = local
        self._announce_sync()

    def unsync(self, should_unsync=True):
        """Restores the local state that sync() replaced."""
        if not should_unsync:
            return
        if self._sync_cache is None:
            raise RuntimeError("The Metric has already been un-synced.")
        self.load_state_dict(self._sync_cache)
        self._sync_cache = None

    def _check_not_synced(self):
        """forward() on a synced state would count the batch into every rank's state, which unsync()
        then drops (TorchMetrics raises too)."""
        if self._sync_cache is not None:
            raise RuntimeError(f"{self._sync_name()}.forward: the metric shouldn't be synced when performing "
                               "forward; call unsync() first")
        self._check_not_synced_elsewhere("forward")

    @contextmanager
    def sync_context(self, dist_sync_fn=None, process_group=None, should_sync=True, should_unsync=True,
                     distributed_available=None):
        """Synced state inside the block, local state after it."""
        self.sync(dist_sync_fn, process_group, should_sync, distributed_available)
        try:
            yield self
        finally:
            self.unsync(should_unsync=should_unsync and self._sync_cache is not None)
