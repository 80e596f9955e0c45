"""count_syncs: how many host-device synchronization points a block of code has."""

import contextlib
import threading

from . import _C


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

    As a decorator, it adds up every call. Entering the same object again inside itself (a
    decorated function calling itself) counts once. ``strict=True`` raises RuntimeError at the
    first such op, naming it (and the metric call it is in). ``all_threads=True`` counts
    the ops of every thread while open, not only this one's (not with strict).
    ``cuda_sync_debug=True`` also counts the synchronizations CUDA's sync debug mode reports,
    where the library was built against CUDA. An op called inside another sync-class op (item()
    inside bincount) counts once.
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
        self._closed_total += scope.total
        self._closed_cuda += scope.cuda_syncs
        for op, count in scope.by_op.items():
            self._closed_by_op[op] = self._closed_by_op.get(op, 0) + count

    @property
    def total(self):
        """Sync-class ops counted so far (including a block still running)."""
        with self._lock:
            return self._closed_total + sum(opened.scope.total for opened in self._open.values())

    @property
    def by_op(self):
        """{op name: count}, e.g. {'aten::item': 2}."""
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
    """The ops count_syncs counts: a list of (name, why)."""
    return _C.sync_class_ops()
