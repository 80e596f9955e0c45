#!/usr/bin/env python3
"""The reference article's training loop on the CPU: a torchvision ResNet-18 (random weights) on a
fake dataset, tracking mean loss and multiclass accuracy, precision, recall and F1 (macro, 1000
classes by default) three ways:

  none    no metrics
  naive   the sync-heavy update patterns, written plainly in Python (a host weight made into a
          tensor, NaN checks branched on the host, unique() validation, bincount)
  nosync  nosync_metrics

It prints, for each mode, the median step time and the sync points per step (count_syncs around
the whole step), then the final metric values; naive and nosync must agree.

    PYTHONPATH=build/python /usr/bin/python3 examples/python_training_loop.py --steps 20
"""

import argparse
import statistics
import time

import torch
import torchvision

import nosync_metrics as nm


class NaiveMean:
    """MeanMetric.update as TorchMetrics writes it."""

    def __init__(self):
        self.total = torch.tensor(0.0)
        self.weight = torch.tensor(0.0)

    def update(self, value, weight=1.0):
        weight = torch.as_tensor(weight, dtype=value.dtype, device=value.device)  # a new tensor per call
        weight = torch.broadcast_to(weight, value.shape)
        nans, nans_weight = torch.isnan(value), torch.isnan(weight)
        if nans.any() or nans_weight.any():  # the host waits for the answer
            keep = ~(nans | nans_weight)
            value, weight = value[keep], weight[keep]
        self.total += (value * weight).sum()
        self.weight += weight.sum()

    def compute(self):
        return self.total / self.weight


class NaiveConfusion:
    """A multiclass stat-score metric's update: unique() validation, argmax, bincount."""

    def __init__(self, num_classes):
        self.num_classes = num_classes
        self.matrix = torch.zeros(num_classes, num_classes, dtype=torch.long)

    def update(self, preds, target):
        if len(torch.unique(target)) > self.num_classes:  # the size of unique() is read back
            raise ValueError("more classes in target than num_classes")
        mapping = target * self.num_classes + preds.argmax(1)
        self.matrix += torch.bincount(mapping, minlength=self.num_classes**2).reshape(self.num_classes, -1)

    def counts(self):
        tp = self.matrix.diag().double()
        return tp, self.matrix.sum(0).double() - tp, self.matrix.sum(1).double() - tp


def macro(scores, seen):
    return (scores * seen).sum() / seen.sum().clamp_min(1)


def safe_ratio(num, den):
    return torch.where(den > 0, num / den.clamp_min(1e-300), torch.zeros_like(num))


class NaiveMetrics:
    """Mean loss plus four metrics, each with its own state (TorchMetrics without compute groups)."""

    def __init__(self, classes):
        self.loss = NaiveMean()
        self.scores = {name: NaiveConfusion(classes) for name in ("accuracy", "precision", "recall", "f1")}

    def update(self, loss, logits, target):
        self.loss.update(loss.detach())
        for state in self.scores.values():
            state.update(logits.detach(), target)

    def compute(self):
        values = {"loss": self.loss.compute().item()}
        for name, state in self.scores.items():
            tp, fp, fn = state.counts()
            seen = ((tp + fp + fn) > 0).double()
            score = {"accuracy": safe_ratio(tp, tp + fn), "recall": safe_ratio(tp, tp + fn),
                     "precision": safe_ratio(tp, tp + fp), "f1": safe_ratio(2 * tp, 2 * tp + fp + fn)}[name]
            values[name] = macro(score, seen).item()
        return values


class NosyncMetrics:
    def __init__(self, classes):
        self.loss = nm.MeanMetric()
        self.scores = nm.MetricCollection({
            "accuracy": nm.MulticlassAccuracy(num_classes=classes),
            "precision": nm.MulticlassPrecision(num_classes=classes),
            "recall": nm.MulticlassRecall(num_classes=classes),
            "f1": nm.MulticlassF1Score(num_classes=classes),
        })

    def update(self, loss, logits, target):
        self.loss.update(loss.detach())
        self.scores.update(logits.detach(), target)

    def compute(self):
        values = {"loss": self.loss.compute().item()}
        values.update({name: value.item() for name, value in self.scores.compute().items()})
        return values


class NoMetrics:
    def __init__(self, classes):
        pass

    def update(self, loss, logits, target):
        pass

    def compute(self):
        return {}


def fake_batches(count, batch_size, image_size, classes):
    """Random images and labels index % classes, made before timing (as a DataLoader would)."""
    generator = torch.Generator().manual_seed(0)
    batches = []
    for b in range(count):
        images = torch.randn(batch_size, 3, image_size, image_size, generator=generator)
        labels = torch.arange(b * batch_size, (b + 1) * batch_size) % classes
        batches.append((images, labels))
    return batches


def train(mode, batches, warmup, classes):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=classes)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    criterion = torch.nn.CrossEntropyLoss()
    metrics = {"none": NoMetrics, "naive": NaiveMetrics, "nosync": NosyncMetrics}[mode](classes)
    times, syncs = [], []
    for index, (images, labels) in enumerate(batches):
        start = time.perf_counter()
        with nm.count_syncs() as counted:
            optimizer.zero_grad()
            logits = model(images)
            loss = criterion(logits, labels)
            loss.backward()
            optimizer.step()
            metrics.update(loss, logits, labels)
        if index >= warmup:
            times.append(time.perf_counter() - start)
            syncs.append(counted.total)
    return statistics.median(times), statistics.mean(syncs), metrics.compute()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metrics", choices=["none", "naive", "nosync", "all"], default="all")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per mode")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=96)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    modes = ["none", "naive", "nosync"] if args.metrics == "all" else [args.metrics]
    batches = fake_batches(args.steps + args.warmup, args.batch_size, args.image_size, args.classes)
    print(f"ResNet-18, batch {args.batch_size} of {args.image_size}x{args.image_size} images, {args.classes} classes, "
          f"{args.steps} timed steps per mode, torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    results = {}
    for mode in modes:
        step, syncs, values = train(mode, batches, args.warmup, args.classes)
        results[mode] = values
        print(f"  {mode:7s} median step {step * 1000:8.2f} ms   sync points per step {syncs:5.1f}")
    for mode in modes:
        if results[mode]:
            print(f"  {mode:7s} final " + "  ".join(f"{k} {v:.6f}" for k, v in results[mode].items()))
    if "naive" in results and "nosync" in results:
        agree = all(abs(results["naive"][k] - results["nosync"][k]) <= 1e-6 * max(1.0, abs(results["naive"][k]))
                    for k in results["naive"])
        print(f"  naive and nosync agree: {'yes' if agree else 'NO'}")
        if not agree:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
