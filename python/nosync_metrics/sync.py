"""count_syncs: how many host-device synchronization points a block of code has."""

import contextlib
import functools
import threading

import torch

from . import _C


def _read(name, method):
    @functools.wraps(method)
    def counted(self, *args, **kwargs):
        return _C.host_read(name, method, self, *args, **kwargs)
    return counted


def _sends_to_cpu(args, kwargs):
    """Whether Tensor.to(*args, **kwargs) puts the data on the CPU, by the parser of Module.to,
    which refuses `copy=True` (a keyword, or the last positional argument)."""
    kwargs = {key: value for key, value in kwargs.items() if key != "copy"}
    for given in (args, args[:-1]):
        try:
            device = torch._C._nn._parse_to(*given, **kwargs)[0]
        except (RuntimeError, TypeError):
            continue
        return device is not None and device.type == "cpu"
    return False  # not a valid call: to() raises its own error


def _read_if_to_cpu(name, to):
    @functools.wraps(to)
    def counted(self, *args, **kwargs):
        if _sends_to_cpu(args, kwargs):
            return _C.host_read(name, to, self, *args, **kwargs)
        return to(self, *args, **kwargs)
    return counted


# Tensor methods that read data on the host: on the CPU they dispatch no sync-class op (cpu() of a
# CPU tensor returns it), on an accelerator each copies to the host and waits. float(t), int(t),
# bool(t), complex(t) and item() need no entry: they dispatch aten::item or aten::is_nonzero.
_HOST_READS = {
    "tolist": (_read, "copies the data into Python numbers"),
    "numpy": (_read, "a NumPy array over host memory (from an accelerator: numpy(force=True) copies first)"),
    "__array__": (_read, "numpy.asarray(t) and other NumPy calls read the data through numpy()"),
    "cpu": (_read, "copies the data to the host"),
    "to": (_read_if_to_cpu, "to('cpu') (or to a CPU tensor's device) copies the data to the host"),
}


class _WrappedHostReads:
    """The Tensor methods of _HOST_READS, wrapped (for every thread) while any count_syncs is open,
    and as torch defines them when none is."""

    def __init__(self):
        self._lock = threading.Lock()
        self._users = 0
        self._own = {}  # what torch.Tensor's own __dict__ held under each name (None: inherited)

    def acquire(self):
        with self._lock:
            self._users += 1
            if self._users > 1:
                return
            for name, (wrap, _) in _HOST_READS.items():
                self._own[name] = vars(torch.Tensor).get(name)
                setattr(torch.Tensor, name, wrap("Tensor." + name, getattr(torch.Tensor, name)))

    def release(self):
        with self._lock:
            self._users -= 1
            if self._users > 0:
                return
            for name, own in self._own.items():
                if own is None:
                    delattr(torch.Tensor, name)
                else:
                    setattr(torch.Tensor, name, own)


_host_reads = _WrappedHostReads()


class _Open:
    """A running SyncScope and how many times its count_syncs was entered around it."""

    def __init__(self, scope):
        self.scope = scope
        self.depth = 0


class count_syncs(contextlib.ContextDecorator):  # noqa: N801 (a context manager, named like one)
    """Counts, on this thread, the ATen ops that would make the host wait for an accelerator
    (item(), boolean-mask indexing, unique(), bincount, tensors made from host data, copies
    between devices, ...), around any Python code: a metric update, or a whole training step.

        with count_syncs() as syncs:
            step(batch)
        print(syncs.total, syncs.by_op)   # e.g. 2 {'aten::item': 2}

    It also counts the host reads that dispatch no such op on the CPU but would sync on an
    accelerator: ``t.tolist()``, ``t.numpy()``, ``numpy.asarray(t)`` (``Tensor.__array__``),
    ``t.cpu()`` and ``t.to("cpu")``, under 'Tensor.tolist', 'Tensor.numpy', ... (while any counter
    is open these Tensor methods are wrapped, for every thread). ``float(t)``, ``int(t)``,
    ``bool(t)`` are ``aten::item`` / ``aten::is_nonzero`` on every device.

    As a decorator, it adds up every call. Entering the same object again inside itself (a
    decorated function calling itself) counts once. ``strict=True`` raises RuntimeError at the
    first such op or read, naming it (and the metric call it is in). ``all_threads=True`` counts
    the ops and reads of every thread while open, not only this one's (not with strict).
    ``cuda_sync_debug=True`` also counts the synchronizations CUDA's sync debug mode reports,
    where the library was built against CUDA. An op called inside another sync-class op or read
    (item() inside bincount, the copy tolist() makes of a GPU tensor) counts once.
    """

    def __init__(self, strict=False, cuda_sync_debug=False, all_threads=False):
        self.strict = strict
        self.cuda_sync_debug = cuda_sync_debug
        self.all_threads = all_threads
        self._lock = threading.Lock()
        self._open = {}  # who counts (a thread's id; None: all threads) -> _Open
        self._closed_total = 0
        self._closed_cuda = 0
        self._closed_by_op = {}

    def _counting_for(self):
        return None if self.all_threads else threading.get_ident()

    def __enter__(self):
        key = self._counting_for()
        with self._lock:
            if key not in self._open:
                self._open[key] = _Open(_C.SyncScope(self.strict, self.cuda_sync_debug, self.all_threads))
                _host_reads.acquire()
            self._open[key].depth += 1
        return self

    def __exit__(self, *exc):
        key = self._counting_for()
        with self._lock:
            opened = self._open[key]
            opened.depth -= 1
            if opened.depth == 0:
                del self._open[key]
                self._close(opened.scope)
        return False

    def _close(self, scope):
        scope.close()
        _host_reads.release()
        self._closed_total += scope.total
        self._closed_cuda += scope.cuda_syncs
        for op, count in scope.by_op.items():
            self._closed_by_op[op] = self._closed_by_op.get(op, 0) + count

    @property
    def total(self):
        """Sync-class ops and host reads counted so far (including a block still running)."""
        with self._lock:
            return self._closed_total + sum(opened.scope.total for opened in self._open.values())

    @property
    def by_op(self):
        """{op or read name: count}, e.g. {'aten::item': 2, 'Tensor.tolist': 1}."""
        with self._lock:
            counts = dict(self._closed_by_op)
            for opened in self._open.values():
                for op, count in opened.scope.by_op.items():
                    counts[op] = counts.get(op, 0) + count
        return counts

    @property
    def cuda_syncs(self):
        """Synchronizations CUDA's sync debug mode reported (0 without CUDA)."""
        with self._lock:
            return self._closed_cuda + sum(opened.scope.cuda_syncs for opened in self._open.values())

    def __repr__(self):
        return f"count_syncs(total={self.total}, by_op={self.by_op})"


def sync_class_ops():
    """What count_syncs counts: a list of (name, why), the ATen ops then the host reads."""
    return _C.sync_class_ops() + [("Tensor." + name, why) for name, (_, why) in _HOST_READS.items()]
