"""Soak from Python: `updates` updates of a mixed collection (multiclass accuracy, precision,
recall, F1 and a confusion matrix) and of a MeanMetric, cycling over a few fixed batches; resident
memory read after a warm-up and at the end, values checked against numpy. Prints one line; exits 1
if a value differs or memory grew by more than 4 MiB.

    PYTHONPATH=build/python /usr/bin/python3 bench/soak.py [updates]   (default 10^6)
"""

import os
import sys

import numpy as np
import torch

import nosync_metrics as nm

CLASSES, ROWS, BATCHES = 10, 64, 8


def resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def soak(updates):
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(7)
    batches = [(torch.randn(ROWS, CLASSES, generator=gen), torch.randint(CLASSES, (ROWS,), generator=gen),
                torch.randint(0, 100, (ROWS,), generator=gen).float()) for _ in range(BATCHES)]
    times = [updates // BATCHES + (b < updates % BATCHES) for b in range(BATCHES)]
    matrix = np.zeros((CLASSES, CLASSES), dtype=np.int64)
    loss_total = 0.0
    for (logits, labels, loss), n in zip(batches, times):
        np.add.at(matrix, (labels.numpy(), logits.numpy().argmax(1)), n)
        loss_total += float(loss.double().sum()) * n

    collection = nm.MetricCollection({
        "accuracy": nm.MulticlassAccuracy(num_classes=CLASSES), "precision": nm.MulticlassPrecision(num_classes=CLASSES),
        "recall": nm.MulticlassRecall(num_classes=CLASSES), "f1": nm.MulticlassF1Score(num_classes=CLASSES),
        "confusion": nm.MulticlassConfusionMatrix(num_classes=CLASSES)})
    mean = nm.MeanMetric()
    warm_up = min(updates, 10_000)
    rss_warm = 0
    for i in range(updates):
        if i == warm_up:
            rss_warm = resident_bytes()
        logits, labels, loss = batches[i % BATCHES]
        collection.update(logits, labels)
        mean.update(loss)
    rss_warm = rss_warm or resident_bytes()
    growth = resident_bytes() - rss_warm
    same = (np.array_equal(collection.compute()["confusion"].numpy(), matrix)
            and abs(mean.compute().item() - loss_total / (updates * ROWS)) <= 1e-12 * loss_total / (updates * ROWS))
    return growth, rss_warm, same


def main():
    updates = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    growth, rss, same = soak(updates)
    print(f"soak (Python): {updates} updates | resident memory {growth / 2**20:+.2f} MiB after warm-up "
          f"({rss / 2**20:.1f} MiB) | values {'equal the numpy reference' if same else 'DIFFER from the numpy reference'}")
    return 0 if same and growth <= 4 << 20 else 1


if __name__ == "__main__":
    sys.exit(main())
