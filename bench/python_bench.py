#!/usr/bin/env python3
"""A training step's five metric updates from Python: mean loss, and multiclass accuracy,
precision, recall and F1 (macro) on (128, 1000) logits; nosync_metrics next to the same updates
written naively in Python (examples/python_training_loop.py), on one thread. Also the same step
through forward() (calling the metrics, as Lightning modules do), which computes the batch's values,
and the updates followed by compute() of the values so far. TorchMetrics 1.6.3 cannot be installed
here; its figures, measured on this kind of machine, come from shared/reference/README.md.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_bench.py [--iterations N] [--json FILE]
"""

import argparse
import importlib.util
import json
import os
import statistics
import time

import torch

import nosync_metrics as nm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Mean + MulticlassAccuracy/Precision/Recall/F1Score (C = 1000, N = 128, macro), per step.
TORCHMETRICS_REFERENCE = {
    "TorchMetrics 1.6.3, separate metrics": {"us": 10900, "syncs": 6},
    "TorchMetrics 1.6.3, MetricCollection(compute_groups=True)": {"us": 3100, "syncs": 3},
}


def naive_metrics():
    spec = importlib.util.spec_from_file_location("example", os.path.join(ROOT, "examples", "python_training_loop.py"))
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example.NaiveMetrics(1000)


class Nosync:
    def __init__(self):
        self.loss = nm.MeanMetric()
        self.scores = nm.MetricCollection([nm.MulticlassAccuracy(num_classes=1000), nm.MulticlassPrecision(num_classes=1000),
                                           nm.MulticlassRecall(num_classes=1000), nm.MulticlassF1Score(num_classes=1000)])

    def update(self, loss, logits, target):
        self.loss.update(loss)
        self.scores.update(logits, target)

    def forward(self, loss, logits, target):
        """The Lightning idiom: calling the metrics accumulates and gives the batch's values."""
        return self.loss(loss), self.scores(logits, target)

    def update_and_compute(self, loss, logits, target):
        """The updates, then the values so far: each compute() reads its count and bad-input tally
        back, to report, and computes on."""
        self.update(loss, logits, target)
        return self.loss.compute(), self.scores.compute()


def measure(metrics, iterations, call="update"):
    g = torch.Generator().manual_seed(0)
    logits, target, loss = torch.randn(128, 1000, generator=g), torch.randint(0, 1000, (128,), generator=g), torch.rand(())
    step = getattr(metrics, call)
    for _ in range(10):
        step(loss, logits, target)
    with nm.count_syncs() as syncs:
        step(loss, logits, target)
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        step(loss, logits, target)
        times.append((time.perf_counter() - start) * 1e6)
    return {"us": statistics.median(times), "syncs": syncs.total}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = dict(TORCHMETRICS_REFERENCE)
    results["naive Python (separate states)"] = measure(naive_metrics(), max(args.iterations // 20, 3))
    results["nosync_metrics (MetricCollection)"] = measure(Nosync(), args.iterations)
    results["nosync_metrics (MetricCollection), forward(): the batch's values too"] = measure(
        Nosync(), max(args.iterations // 10, 3), call="forward")
    results["nosync_metrics (MetricCollection), then compute(): the values so far"] = measure(
        Nosync(), max(args.iterations // 10, 3), call="update_and_compute")
    ours = results["nosync_metrics (MetricCollection)"]["us"]
    for name, r in results.items():
        print(f"{name:60s} {r['us']:10.1f} us/step  {r['syncs']} syncs  ({r['us'] / ours:.0f}x ours)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
