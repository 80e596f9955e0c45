"""count_syncs: how many host-device synchronization points a block of code has."""

import contextlib

from . import _C


class count_syncs(contextlib.ContextDecorator):  # noqa: N801 (a context manager, named like one)
    """Counts, on this thread, the ATen ops that would make the host wait for an accelerator
    (item(), boolean-mask indexing, unique(), bincount, tensors made from host data, copies
    between devices, ...), around any Python code: a metric update, or a whole training step.

        with count_syncs() as syncs:
            step(batch)
        print(syncs.total, syncs.by_op)   # e.g. 2 {'aten::item': 2}

    As a decorator, it adds up every call. ``strict=True`` raises RuntimeError at the first such op,
    naming it (and the metric call it is in). ``cuda_sync_debug=True`` also counts the
    synchronizations CUDA's sync debug mode reports, where the library was built against CUDA.
    An op called inside another sync-class op (item() inside bincount) counts once.
    """

    def __init__(self, strict=False, cuda_sync_debug=False):
        self.strict = strict
        self.cuda_sync_debug = cuda_sync_debug
        self._closed_total = 0
        self._closed_cuda = 0
        self._closed_by_op = {}
        self._running = []

    def __enter__(self):
        self._running.append(_C.SyncScope(self.strict, self.cuda_sync_debug))
        return self

    def __exit__(self, *exc):
        scope = self._running.pop()
        scope.close()
        self._closed_total += scope.total
        self._closed_cuda += scope.cuda_syncs
        for op, count in scope.by_op.items():
            self._closed_by_op[op] = self._closed_by_op.get(op, 0) + count
        return False

    @property
    def total(self):
        """Sync-class ops counted so far (including a block still running)."""
        return self._closed_total + sum(scope.total for scope in self._running)

    @property
    def by_op(self):
        """{op name: count}, e.g. {'aten::item': 2}."""
        counts = dict(self._closed_by_op)
        for scope in self._running:
            for op, count in scope.by_op.items():
                counts[op] = counts.get(op, 0) + count
        return counts

    @property
    def cuda_syncs(self):
        """Synchronizations CUDA's sync debug mode reported (0 without CUDA)."""
        return self._closed_cuda + sum(scope.cuda_syncs for scope in self._running)

    def __repr__(self):
        return f"count_syncs(total={self.total}, by_op={self.by_op})"


def sync_class_ops():
    """The ops count_syncs counts: a list of (name, why)."""
    return _C.sync_class_ops()
