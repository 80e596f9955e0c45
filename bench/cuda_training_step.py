#!/usr/bin/env python3
"""A GPU training step with and without metrics: what the metrics cost a step (the bar: within 1%).

The step of the article this library answers (shared/reference/article-metric-collection.txt): a
torchvision ResNet-18 (1000 classes) trains on random (128, 3, 224, 224) batches in float32, SGD.
In the metric variants each step then updates a mean of the loss and a collection of multiclass
accuracy, precision, recall and F1 (macro) on the logits: nosync_metrics, and TorchMetrics where it
is installed. "no metrics (control)" is the metric-free step again: its ratio shows the noise.

Each round runs every variant for STEPS steps, in a shuffled order, with one synchronize at the
round's end (a training loop that never reads back); a variant's time per step is its round's wall
time over its steps. Its cost is the median over rounds of its ratio to the metric-free step of the
same round, so that drift in the GPU's clocks between rounds cancels. Also per step: the host time
spent inside the metric calls (what a step whose host is the bottleneck pays in full), the
sync-class ATen ops and host reads (count_syncs) and the syncs CUDA's sync debug mode reports.

    PYTHONPATH=build-cuda/python python3 bench/cuda_training_step.py [--rounds N] [--steps N]
        [--batch N] [--image-size N] [--json FILE]
"""

import argparse
import json
import random
import statistics
import sys
import time

import torch
import torchvision

import nosync_metrics as nm
from cuda_launches import syncs

CLASSES = 1000
NONE, CONTROL = "no metrics", "no metrics (control)"


def nosync_metrics():
    loss = nm.MeanMetric(device="cuda")
    scores = nm.MetricCollection([cls(num_classes=CLASSES, device="cuda") for cls in (
        nm.MulticlassAccuracy, nm.MulticlassPrecision, nm.MulticlassRecall, nm.MulticlassF1Score)])
    return loss, scores


def torchmetrics_metrics():
    import torchmetrics as tm
    from torchmetrics import classification as tmc

    loss = tm.MeanMetric().cuda()
    scores = tm.MetricCollection([cls(num_classes=CLASSES) for cls in (
        tmc.MulticlassAccuracy, tmc.MulticlassPrecision, tmc.MulticlassRecall, tmc.MulticlassF1Score)]).cuda()
    return loss, scores


def variants():
    found = {NONE: None, CONTROL: None, "nosync_metrics": nosync_metrics()}
    try:
        import torchmetrics
        found[f"TorchMetrics {torchmetrics.__version__}"] = torchmetrics_metrics()
    except ImportError:
        pass
    return found


class Step:
    def __init__(self, batch, image_size):
        torch.manual_seed(0)
        self.model = torchvision.models.resnet18(num_classes=CLASSES).cuda()
        self.criterion = torch.nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)
        g = torch.Generator(device="cuda").manual_seed(1)
        self.images = torch.randn(batch, 3, image_size, image_size, device="cuda", generator=g)
        self.target = torch.randint(0, CLASSES, (batch,), device="cuda", generator=g)
        self.metric_seconds = 0.0  # host time inside the metric calls

    def __call__(self, metrics):
        logits = self.model(self.images)
        loss = self.criterion(logits, self.target)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        if metrics is not None:
            start = time.perf_counter()
            mean_loss, scores = metrics
            mean_loss.update(loss.detach())
            scores.update(logits.detach(), self.target)
            self.metric_seconds += time.perf_counter() - start


def round_us(step, metrics, steps):
    """Wall µs per step over `steps` steps, and host µs per step inside the metric calls."""
    torch.cuda.synchronize()
    step.metric_seconds = 0.0
    start = time.perf_counter()
    for _ in range(steps):
        step(metrics)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / steps * 1e6, step.metric_seconds / steps * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--json")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("cuda_training_step.py: no CUDA device", file=sys.stderr)
        return 1
    torch.backends.cudnn.benchmark = True
    step, found = Step(args.batch, args.image_size), variants()
    for metrics in found.values():
        round_us(step, metrics, 10)  # warm-up: cuDNN's choice of kernels, the metrics' first update
    rounds = {name: [] for name in found}
    order = list(found)
    shuffle = random.Random(0).shuffle
    for _ in range(args.rounds):
        shuffle(order)
        for name in order:
            rounds[name].append(round_us(step, found[name], args.steps))
    base = [wall for wall, _ in rounds[NONE]]
    rows = []
    for name, metrics in found.items():
        cuda_syncs, sync_ops = syncs(step, (metrics,))
        walls = [wall for wall, _ in rounds[name]]
        rows.append({"variant": name, "step_us": statistics.median(walls),
                     "ratio": statistics.median(w / b for w, b in zip(walls, base)),
                     "metric_host_us": statistics.median(host for _, host in rounds[name]),
                     "rounds_us": walls, "sync_class_ops": sync_ops, "cuda_syncs": cuda_syncs})
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}: ResNet-18, batch {args.batch}, "
          f"3x{args.image_size}x{args.image_size}, {CLASSES} classes, float32; {args.rounds} rounds of "
          f"{args.steps} steps\n")
    print("| variant | µs per step | ÷ no metrics (median of rounds) | host µs in metric calls | "
          "sync-class ops per step | CUDA syncs per step |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['variant']} | {r['step_us']:.0f} | {r['ratio']:.4f} | {r['metric_host_us']:.0f} | "
              f"{r['sync_class_ops']} | {r['cuda_syncs']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
